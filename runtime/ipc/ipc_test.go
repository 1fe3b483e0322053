package ipc

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime"
)

func TestEchoAndErrors(t *testing.T) {
	srv, _ := newServer(t)
	c := dial(t, srv)
	if _, err := c.Do(mNoop, Span{}, Span{}, Span{}); err != nil {
		t.Fatal(err)
	}
	in, _ := c.Alloc(1000)
	out, _ := c.Alloc(1000)
	for i := range in.Bytes() {
		in.Bytes()[i] = byte(i)
	}
	res, err := c.Do(mEcho, Span{}, in.All(), out.All())
	if err != nil || res.N != 1000 || !bytes.Equal(in.Bytes(), out.Bytes()) {
		t.Fatalf("echo: %v %+v", err, res)
	}
	small, _ := c.Alloc(10)
	res, err = c.Do(mEcho, Span{}, in.All(), small.All())
	if !errors.Is(err, runtime.ErrShortBuffer) || res.Value != 1000 {
		t.Fatalf("short echo: %v %+v", err, res)
	}
	if _, err := c.Do(Method{99, 0}, Span{}, Span{}, out.All()); !errors.Is(err, runtime.ErrNoModule) {
		t.Fatalf("bad module: %v", err)
	}
	if _, err := c.Do(Method{0, 99}, Span{}, Span{}, out.All()); !errors.Is(err, runtime.ErrNoMethod) {
		t.Fatalf("bad method: %v", err)
	}
	m, err := c.Resolve("admin", "echo")
	if err != nil || m != mEcho {
		t.Fatalf("resolve: %v %v", m, err)
	}
	st := srv.Stats()
	if st.Clients != 1 || st.BadRequests != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestManyGoroutines(t *testing.T) {
	srv, _ := newServer(t)
	c := dial(t, srv)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			in, _ := c.Alloc(64)
			out, _ := c.Alloc(64)
			for i := 0; i < 2000; i++ {
				in.Bytes()[0] = byte(i)
				res, err := c.Do(mEcho, Span{}, in.All(), out.All())
				if err != nil || res.N != 64 || out.Bytes()[0] != byte(i) {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientCloseReclaims(t *testing.T) {
	srv, _ := newServer(t)
	c, err := Dial(srv.Path(), DialOptions{SegmentSize: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Stats().SegmentBytes; got != 2<<20 {
		t.Fatalf("segment bytes %d", got)
	}
	c.Close()
	waitFor(t, func() bool { return srv.Stats().Clients == 0 && srv.Stats().SegmentBytes == 0 })
	if _, err := c.Do(mNoop, Span{}, Span{}, Span{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

func TestServerCloseWakesWaiters(t *testing.T) {
	srv, _ := newServer(t, sleeper{})
	c := dial(t, srv)
	m, err := c.Resolve("sleeper", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	call, err := c.Start(m, Span{}, Span{}, Span{})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { c.sock.Close() }) // as if the daemon died
	start := time.Now()
	_, err = call.Wait()
	if !errors.Is(err, ErrDaemonGone) && !errors.Is(err, ErrClosed) {
		t.Fatalf("wait: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("woke after %v", d)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not reached in 5s")
}

var _ = os.Getpid

// TestFailedSubmitGivesBack: a request that cannot be enqueued leaves no
// pending call and no taken slot behind (StartRaw leaked both).
func TestFailedSubmitGivesBack(t *testing.T) {
	srv, _ := newServer(t)
	c := dial(t, srv)
	c.Close()
	for range 2 * RingSize {
		if _, err := c.StartRaw(Request{}); err == nil {
			t.Fatal("StartRaw on a closed client succeeded")
		}
	}
	c.mu.Lock()
	n := len(c.pending)
	c.mu.Unlock()
	if n != 0 || len(c.slots) != 0 {
		t.Fatalf("%d pending calls and %d slots left by failed submits", n, len(c.slots))
	}
}

// TestCallTimeout: a daemon that never completes a call (the sleeper
// outlasts the bound) makes Wait return ErrStalled within the client's
// CallTimeout, and the connection is given up.
func TestCallTimeout(t *testing.T) {
	srv, _ := newServer(t, sleeper{})
	c, err := Dial(srv.Path(), DialOptions{SegmentSize: 4 << 20, CallTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.Resolve("sleeper", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	calls := make([]*Call, 3)
	for i := range calls {
		if calls[i], err = c.Start(m, Span{}, Span{}, Span{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, call := range calls {
		if _, err := call.Wait(); !errors.Is(err, ErrStalled) || !errors.Is(err, ErrDaemonGone) {
			t.Fatalf("call %d: wait: %v, want ErrStalled", i, err)
		}
	}
	if _, err := c.Do(mNoop, Span{}, Span{}, Span{}); !errors.Is(err, ErrStalled) {
		t.Fatalf("call after the stall: %v", err)
	}
}

// TestCallTaken: a call behind one the daemon runs in its poller (the
// ring was empty: inline) waits in the request ring, not taken, until
// that one is done; then the daemon takes it. Before Taken, a submitted
// call always looked in progress.
func TestCallTaken(t *testing.T) {
	srv, _ := newServer(t, sleeper{})
	c := dial(t, srv)
	m, err := c.Resolve("sleeper", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Start(m, Span{}, Span{}, Span{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, first.Taken)
	// The poller found nothing behind the first call and runs it itself
	// for a second: give it the moment to get there.
	time.Sleep(200 * time.Millisecond)
	second, err := c.Start(m, Span{}, Span{}, Span{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Taken() || second.Poll() {
		t.Fatal("the second call was taken while the poller runs the first")
	}
	if _, err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, second.Taken)
	if _, err := second.Wait(); err != nil {
		t.Fatal(err)
	}
	if !second.Taken() {
		t.Fatal("a completed call is not taken")
	}
}
