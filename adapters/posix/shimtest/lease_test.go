package shimtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// randFile writes n pseudo-random bytes to a file on tmpfs (outside the
// mount) and returns its path and bytes.
func randFile(t *testing.T, dir string, n int) (string, []byte) {
	t.Helper()
	b := make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(b)
	p := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

func requireSame(t *testing.T, what, p string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || sum(got) != sum(want) {
		t.Fatalf("%s %s: %d bytes (want %d), sha256 equal %v, err %v", what, p, len(got), len(want), sum(got) == sum(want), err)
	}
}

// requireFastWrites: the fast path carried the n bytes written (the
// harvest never sends a shim writer to the kernel, and a spent lease is
// refilled over runtime/ipc).
func requireFastWrites(t *testing.T, r Report, n int) {
	t.Helper()
	requireOurs(t, r)
	if r.FastWrite != int64(n) || r.KernelWrite != 0 {
		t.Fatalf("fast path carried %d of %d bytes written: %+v", r.FastWrite, n, r)
	}
}

// TestNewFileFastWrite: dd and cp of new files under the shim place the new
// pages in shared memory themselves (the lease, bufferpool/lease.go): the
// fast path carries every byte, the content is right on the mount at once
// and, after a clean unmount, in the backing directory.
func TestNewFileFastWrite(t *testing.T) {
	setup(t)
	dir, back, d := startOwnDaemon(t)
	const n = 24<<20 + 12345 // not a whole number of pages
	src, data := randFile(t, t.TempDir(), n)
	_, r := run(t, dir, true, nil, "dd", "if="+src, "of=dd.bin", "bs=1M", "status=none")
	requireFastWrites(t, r, n)
	_, r = run(t, dir, true, nil, "cp", src, "cp.bin")
	requireFastWrites(t, r, n)
	_, r = run(t, dir, true, nil, "dd", "if="+src, "of=dd4k.bin", "bs=4096", "status=none")
	requireFastWrites(t, r, n)
	for _, name := range []string{"dd.bin", "cp.bin", "dd4k.bin"} {
		requireSame(t, "on the mount", filepath.Join(dir, name), data)
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() != n {
			t.Fatalf("stat %s: %v %v", name, st, err)
		}
	}
	d.Process.Signal(syscall.SIGTERM)
	d.Wait()
	for _, name := range []string{"dd.bin", "cp.bin", "dd4k.bin"} {
		requireSame(t, "in the backing dir after unmount", filepath.Join(back, name), data)
	}
}

// TestExtendSeenOutside: while a shim writer extends a file in shared
// memory, stat and tail -c of processes without the shim see the size
// grow and the new bytes.
func TestExtendSeenOutside(t *testing.T) {
	bin := cc(t, "extend", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "grow.bin")
	rep := filepath.Join(t.TempDir(), "report")
	cmd, stdin, out := startLines(t, "env", "IOWARP_REPORT="+rep, bin, p)
	const step = 3<<20 + 7
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(stdin, "%d\n", step)
		out.expect("ok")
		st, err := os.Stat(p)
		if err != nil || st.Size() != int64(i*step) {
			t.Fatalf("stat after %d extends: %v %v, want size %d", i, st, err, i*step)
		}
		tail, err := exec.Command("tail", "-c", "5", p).Output()
		want := strings.Repeat(string(rune('a'+i-1)), 5)
		if err != nil || string(tail) != want {
			t.Fatalf("tail -c 5 after %d extends: %q %v, want %q", i, tail, err, want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	requireFastWrites(t, parseReport(t, rep), 4*step)
}

// TestNewDataDurable: a shim writes new pages (fast path), fsyncs, and the
// daemon is killed -9: the backing file holds the bytes and the size.
func TestNewDataDurable(t *testing.T) {
	bin := cc(t, "extend", "gcc")
	setup(t)
	dir, back, d := startOwnDaemon(t)
	p := filepath.Join(dir, "n.bin")
	rep := filepath.Join(t.TempDir(), "report")
	cmd, stdin, out := startLines(t, "env", "IOWARP_REPORT="+rep, bin, p)
	const n = 5<<20 + 3
	fmt.Fprintf(stdin, "%d\nsync\n", n)
	out.expect("ok")
	out.expect("synced")
	d.Process.Signal(syscall.SIGKILL)
	d.Wait()
	stdin.Close()
	cmd.Wait()
	got, err := os.ReadFile(filepath.Join(back, "n.bin"))
	if err != nil || len(got) != n || bytes.Count(got, []byte{'a'}) != n {
		t.Fatalf("backing after fsync + kill -9: %d bytes (want %d), %d 'a', err %v", len(got), n, bytes.Count(got, []byte{'a'}), err)
	}
	requireFastWrites(t, parseReport(t, rep), n)
}

// TestLeaseFullTier: a shim burst larger than the RAM tier: the lease is
// never more than the room left, so the writer falls back to the kernel
// path when it is spent; nothing is lost and the tier's use never passes
// its capacity (iowarp stat while it runs).
func TestLeaseFullTier(t *testing.T) {
	setup(t)
	base := t.TempDir()
	dir, back, ctl := filepath.Join(base, "mnt"), filepath.Join(base, "backing"), filepath.Join(base, "ctl")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(back, 0o755)
	d := exec.Command(iowarp, "mount", dir, "--backing", back, "--ram", "16MiB", "--control-dir", ctl)
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Kill()
		d.Wait()
		exec.Command("umount", "-l", dir).Run()
	})
	for i := 0; i < 200 && !mounted(dir); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	const n = 64 << 20
	src, data := randFile(t, t.TempDir(), n)
	done := make(chan Report, 1)
	go func() {
		_, r := run(t, dir, true, nil, "dd", "if="+src, "of=big.bin", "bs=1M", "status=none")
		done <- r
	}()
	var r Report
	for running := true; running; {
		select {
		case r = <-done:
			running = false
		default:
		}
		used, capacity := ramUse(t, dir, ctl)
		if used > capacity {
			t.Fatalf("RAM tier uses %d of %d bytes", used, capacity)
		}
	}
	requireOurs(t, r)
	if r.FastWrite == 0 || r.KernelWrite == 0 || r.FastWrite+r.KernelWrite != n {
		t.Fatalf("want both paths to carry the burst: %+v", r)
	}
	requireSame(t, "on the mount", filepath.Join(dir, "big.bin"), data)
	d.Process.Signal(syscall.SIGTERM)
	d.Wait()
	requireSame(t, "in the backing dir after unmount", filepath.Join(back, "big.bin"), data)
}

// ramTier is the first (RAM) tier as iowarp stat --json reports it.
type ramTier struct {
	Kind     string `json:"kind"`
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
	Blobs    int64  `json:"blobs"`
}

func statRAM(t *testing.T, dir, ctl string) ramTier {
	t.Helper()
	out, err := exec.Command(iowarp, "stat", dir, "--control-dir", ctl, "--json").Output()
	if err != nil {
		t.Fatalf("iowarp stat: %v", err)
	}
	var st struct {
		Pool struct {
			Tiers []ramTier `json:"tiers"`
		} `json:"pool"`
	}
	if err := json.Unmarshal(out, &st); err != nil || len(st.Pool.Tiers) == 0 || st.Pool.Tiers[0].Kind != "ram" {
		t.Fatalf("iowarp stat: %v: %s", err, out)
	}
	return st.Pool.Tiers[0]
}

// ramUse reads the RAM tier's use and capacity from iowarp stat.
func ramUse(t *testing.T, dir, ctl string) (used, capacity int64) {
	r := statRAM(t, dir, ctl)
	return r.Used, r.Capacity
}

// TestLeaseClientKilled: a shim client killed -9 in the middle of a burst
// of new data: the daemon goes on serving the file, and once the kernel
// released the dead client's fd the lease is given back (the RAM tier's
// use is its pages' again).
func TestLeaseClientKilled(t *testing.T) {
	bin := cc(t, "extend", "gcc")
	setup(t)
	dir, _, _ := startOwnDaemon(t)
	ctl := filepath.Join(filepath.Dir(dir), "ctl")
	p := filepath.Join(dir, "k.bin")
	cmd, stdin, out := startLines(t, bin, p)
	fmt.Fprintf(stdin, "%d\n", 4<<20)
	out.expect("ok")
	if _, reserved := leaseOf(t, dir, ctl); reserved <= 0 {
		t.Fatalf("no lease held while the writer runs (used - pages = %d)", reserved)
	}
	fmt.Fprintf(stdin, "%d\n", 1<<30)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	var reserved int64
	for i := 0; i < 200; i++ {
		if _, reserved = leaseOf(t, dir, ctl); reserved == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if reserved != 0 {
		t.Fatalf("the dead client's lease was not given back: %d bytes reserved past the pages", reserved)
	}
	st, err := os.Stat(p)
	if err != nil || st.Size() < 4<<20 {
		t.Fatalf("stat after the kill: %v %v", st, err)
	}
	got, err := os.ReadFile(p)
	if err != nil || int64(len(got)) != st.Size() || bytes.Count(got[:4<<20], []byte{'a'}) != 4<<20 {
		t.Fatalf("read after the kill: %d bytes, err %v", len(got), err)
	}
}

// leaseOf reads the RAM tier from iowarp stat: its blobs and the bytes it
// has reserved past them (leases; pages are 1 MiB).
func leaseOf(t *testing.T, dir, ctl string) (blobs, reserved int64) {
	r := statRAM(t, dir, ctl)
	return r.Blobs, r.Used - r.Blobs<<20
}

// TestVectorFast: readv, writev, preadv, pwritev, preadv2 and pwritev2
// (flags 0) on a new file take the fast path whole: every byte written
// and read moved through shared memory, none through the kernel, and the
// file holds them (a process without the shim reads them).
func TestVectorFast(t *testing.T) {
	bin := cc(t, "vec", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "v.bin")
	out, r := run(t, onMount, true, nil, bin, p)
	if out != "ok\n" {
		t.Fatalf("vec: %s", out)
	}
	const k = 100000
	// The daemon's harvest runs beside shim writers (it never makes them
	// fall back to the kernel): every byte is fast.
	if r.FastWrite != 6*k || r.KernelWrite != 0 || r.FastRead != 9*k || r.KernelRead != 0 {
		t.Fatalf("want 6*%d bytes written and 9*%[1]d read on the fast path: %+v", k, r)
	}
	var want []byte
	for _, c := range "abcbca" {
		want = append(want, bytes.Repeat([]byte{byte(c)}, k)...)
	}
	requireSame(t, "without the shim", p, want)
}

// TestAppendAtomic: O_APPEND writers with the shim attached (their
// appends take the kernel path, where the daemon reserves each range in
// the shared size against shims: bufferpool/files, claimAppend) and
// without it append to one file at once: every line lands whole, none
// lost or overlapped.
func TestAppendAtomic(t *testing.T) {
	bin := cc(t, "appendx", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "log")
	const n = 2000
	type res struct {
		out string
		r   Report
		err error
	}
	start := func(tag string, shim bool) chan res {
		c := make(chan res, 1)
		go func() {
			rep := filepath.Join(t.TempDir(), "report")
			cmd := exec.Command(bin, p, tag, strconv.Itoa(n))
			if shim {
				cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
			}
			out, err := cmd.Output()
			var r Report
			if shim && err == nil {
				r = parseReport(t, rep)
			}
			c <- res{string(out), r, err}
		}()
		return c
	}
	cs := []chan res{start("s1", true), start("s2", true), start("k1", false)}
	for i, c := range cs {
		x := <-c
		if x.err != nil || x.out != "ok\n" {
			t.Fatalf("appender %d: %q %v", i, x.out, x.err)
		}
		if i < 2 {
			requireOurs(t, x.r)
		}
	}
	data, err := os.ReadFile(p)
	if err != nil || len(data) != 3*n*100 {
		t.Fatalf("log: %d bytes, want %d: %v", len(data), 3*n*100, err)
	}
	seen := map[string]bool{}
	for off := 0; off < len(data); off += 100 {
		line := data[off : off+100]
		if line[99] != '\n' || bytes.IndexByte(line[:99], '\n') >= 0 {
			t.Fatalf("line at %d torn: %q", off, line)
		}
		key := string(bytes.TrimRight(line[:99], "."))
		if seen[key] {
			t.Fatalf("line %q twice", key)
		}
		seen[key] = true
	}
	if len(seen) != 3*n {
		t.Fatalf("%d distinct lines, want %d", len(seen), 3*n)
	}
}
