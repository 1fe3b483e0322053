package client

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/internal/leakcheck"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// Child processes: the test binary re-executed with childEnv naming a role.
const (
	childEnv  = "IOWARP_CLIENT_TEST_CHILD"
	socketEnv = "IOWARP_CLIENT_TEST_SOCKET"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(childMain(role, os.Getenv(socketEnv)))
	}
	os.Exit(leakcheck.Run(m.Run))
}

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// daemon is an in-process daemon: pool, runtime with cte and testmod, ipc
// server.
type daemon struct {
	pool *bufferpool.Pool
	rt   *runtime.Runtime
	srv  *ipc.Server
}

func newDaemon(tb testing.TB, path string) (*daemon, error) {
	pool, err := bufferpool.New(bufferpool.Config{OrganizerInterval: -1, Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4 << 30}}})
	if err != nil {
		return nil, err
	}
	d := &daemon{pool: pool, rt: runtime.New(runtime.Options{Log: quietLog()})}
	if err := d.rt.Initialize(nil); err != nil {
		return nil, err
	}
	if err := d.rt.Register(cte.New(pool)); err != nil {
		return nil, err
	}
	if err := d.rt.Register(testmod{}); err != nil {
		return nil, err
	}
	d.srv, err = ipc.Listen(path, d.rt, ipc.Options{Log: quietLog()})
	return d, err
}

func (d *daemon) close() {
	d.srv.Close()
	d.rt.Shutdown()
	d.pool.Close()
}

func startDaemon(tb testing.TB) *daemon {
	tb.Helper()
	d, err := newDaemon(tb, filepath.Join(tb.TempDir(), "d.ipc"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.close)
	return d
}

func connect(tb testing.TB, d *daemon) *Client {
	tb.Helper()
	c, err := Connect(Options{Socket: d.srv.Path()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// testmod has a method that sleeps (up to 30 s, or until shutdown).
type testmod struct{}

func (testmod) Name() string                  { return "testmod" }
func (testmod) Methods() []string             { return []string{"sleep"} }
func (testmod) Initialize(*runtime.Env) error { return nil }
func (testmod) Shutdown() error               { return nil }
func (testmod) Run(ctx context.Context, _ *runtime.Task) (runtime.Result, error) {
	select {
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	return runtime.Result{}, nil
}

// child starts the test binary in role against socket.
func child(tb testing.TB, role, socket string, extra ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, socketEnv+"="+socket)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	return cmd
}

func childMain(role, socket string) int {
	var err error
	switch role {
	case "mixed":
		err = childMixed(socket)
	case "putloop":
		err = childPutLoop(socket)
	case "daemon":
		err = childDaemon(socket)
	case "user-a", "user-b", "user-a-after":
		err = childUser(role, socket)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s (pid %d): %v\n", role, os.Getpid(), err)
		return 1
	}
	return 0
}

// randomSize is log-uniform in [1 B, 8 MiB].
func randomSize(r *rand.Rand) int {
	return int(math.Exp2(r.Float64() * 23))
}

func fill(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		b[i], b[i+1], b[i+2], b[i+3], b[i+4], b[i+5], b[i+6], b[i+7] =
			byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// childMixed does Put/Get/PartialPut/PartialGet of random sizes on its
// own bucket, keeping a model and checking SHA-256 of all it reads.
func childMixed(socket string) error {
	seed, _ := strconv.ParseUint(os.Getenv("IOWARP_SEED"), 10, 64)
	ops, _ := strconv.Atoi(os.Getenv("IOWARP_OPS"))
	r := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	c, err := Connect(Options{Socket: socket})
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.Bucket(fmt.Sprintf("child-%d", os.Getpid()))
	if err != nil {
		return err
	}
	model := map[string][]byte{}
	for i := 0; i < ops; i++ {
		if err := mixedOp(r, b, model); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	return verifyAll(b, model)
}

func mixedOp(r *rand.Rand, b *Bucket, model map[string][]byte) error {
	name := fmt.Sprintf("blob-%d", r.IntN(3))
	switch op := r.IntN(4); {
	case op == 0 || model[name] == nil:
		data := fill(r, randomSize(r))
		if err := b.Put(name, data); err != nil {
			return fmt.Errorf("put %s (%d B): %w", name, len(data), err)
		}
		model[name] = data
	case op == 1:
		return check(b, name, model[name])
	case op == 2:
		cur := model[name]
		off := r.IntN(len(cur) + 1)
		data := fill(r, min(randomSize(r), 8<<20-off))
		if err := b.PartialPut(name, int64(off), data); err != nil {
			return fmt.Errorf("partial put %s at %d (%d B): %w", name, off, len(data), err)
		}
		if end := off + len(data); end > len(cur) {
			cur = append(cur, make([]byte, end-len(cur))...)
		}
		copy(cur[off:], data)
		model[name] = cur
	default:
		cur := model[name]
		off := r.IntN(len(cur) + 1)
		buf := make([]byte, randomSize(r))
		n, err := b.PartialGet(name, int64(off), buf)
		if err != nil {
			return fmt.Errorf("partial get %s at %d: %w", name, off, err)
		}
		want := cur[off:min(off+len(buf), len(cur))]
		if sha256.Sum256(buf[:n]) != sha256.Sum256(want) {
			return fmt.Errorf("partial get %s at %d: %d bytes, checksum differs (want %d bytes)", name, off, n, len(want))
		}
	}
	return nil
}

func check(b *Bucket, name string, want []byte) error {
	got, err := b.Get(name)
	if err != nil {
		return fmt.Errorf("get %s: %w", name, err)
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		return fmt.Errorf("get %s: %d bytes, checksum differs (want %d bytes)", name, len(got), len(want))
	}
	return nil
}

func verifyAll(b *Bucket, model map[string][]byte) error {
	for name, want := range model {
		if err := check(b, name, want); err != nil {
			return err
		}
	}
	return nil
}

// childPutLoop puts 8 MiB blobs until killed, saying "ready" after the first.
func childPutLoop(socket string) error {
	c, err := Connect(Options{Socket: socket})
	if err != nil {
		return err
	}
	b, err := c.Bucket("victim")
	if err != nil {
		return err
	}
	data := make([]byte, 8<<20)
	for i := 0; ; i++ {
		data[0] = byte(i)
		t, err := b.PutAsync("big", data)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Println("ready")
		}
		if err := t.Wait(); err != nil {
			return err
		}
	}
}

// childDaemon serves socket until killed.
func childDaemon(socket string) error {
	d, err := newDaemon(nil, socket)
	if err != nil {
		return err
	}
	defer d.close()
	fmt.Println("ready")
	select {}
}
