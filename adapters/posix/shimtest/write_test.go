package shimtest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// fill writes n bytes of c to p without the shim (through FUSE: the pages
// end up resident in the pool's RAM tier, where shim writes can hit).
func fill(t *testing.T, p string, n int, c byte) {
	t.Helper()
	if err := os.WriteFile(p, bytes.Repeat([]byte{c}, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteHitsCoherence: pwrite through the shim lands in the pool's
// shared pages (the report shows the fast path carried every byte); while
// the writer still holds its fd, a process without the shim reads the new
// bytes at once (os.ReadFile, cat), sees the right size, and writes other
// bytes that the shim's next read returns at once; fsync puts both on the
// backing file.
func TestWriteHitsCoherence(t *testing.T) {
	bin := cc(t, "coherence", "gcc")
	onMount, _ := setup(t)
	const n = 1 << 20
	p := filepath.Join(onMount, "c.bin")
	fill(t, p, 2*n, '.')
	rep := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(bin, p, "1048576")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "written\n" {
		t.Fatalf("coherence: %q %v; stderr %s", line, err, stderr.String())
	}
	want := append(bytes.Repeat([]byte{'S'}, n), bytes.Repeat([]byte{'.'}, n)...)
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("plain read while the shim writer is attached: %d bytes, %d 'S' (want %d), err %v",
			len(got), bytes.Count(got, []byte{'S'}), n, err)
	}
	if catOut, err := exec.Command("cat", p).Output(); err != nil || !bytes.Equal(catOut, want) {
		t.Fatalf("cat while the shim writer is attached: %d 'S' of %d, err %v", bytes.Count(catOut, []byte{'S'}), len(catOut), err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 2*n {
		t.Fatalf("stat: %v %v", st, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{'P'}, n), n); err != nil {
		t.Fatal(err)
	}
	f.Close()
	io.WriteString(stdin, "go\n")
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("coherence: %v; stderr %s", err, stderr.String())
	}
	if !bytes.Equal(rest, bytes.Repeat([]byte{'P'}, n)) {
		t.Fatalf("the shim read %d 'P' of %d bytes after a plain write, want %d", bytes.Count(rest, []byte{'P'}), len(rest), n)
	}
	r := parseReport(t, rep)
	requireOurs(t, r)
	if r.FastWrite != n || r.KernelWrite != 0 {
		t.Fatalf("write hits: fast %d kernel %d bytes, want all %d on the fast path: %+v", r.FastWrite, r.KernelWrite, n, r)
	}
	if r.FastRead != n {
		t.Fatalf("read after a plain write: fast %d bytes, want %d: %+v", r.FastRead, n, r)
	}
	rel, _ := filepath.Rel(mnt, p)
	b, err := os.ReadFile(filepath.Join(backing, rel))
	want = append(bytes.Repeat([]byte{'S'}, n), bytes.Repeat([]byte{'P'}, n)...)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("backing file after fsync: %d bytes, %d 'S' %d 'P', err %v", len(b), bytes.Count(b, []byte{'S'}), bytes.Count(b, []byte{'P'}), err)
	}
}

// TestTokens: the grant socket refuses a token replayed by another process
// or uid, a read-only open's token presented for a write, and a made-up
// grant; a read-only open gets fds that cannot be mapped or reopened for
// writing; the table cannot be shrunk under the daemon.
func TestTokens(t *testing.T) {
	bin := cc(t, "tokens", "gcc")
	onMount, _ := setup(t)
	ro, rw := filepath.Join(onMount, "ro"), filepath.Join(onMount, "rw")
	fill(t, ro, 1<<20, 'r')
	fill(t, rw, 1<<20, 'w')
	if out, _ := run(t, onMount, false, nil, bin, ro, rw); out != "ok\n" {
		t.Fatalf("tokens: %q", out)
	}
}

// TestWriteThreads: 8 threads write disjoint ranges of one fd through the
// shim and read them back; every byte was a write hit.
func TestWriteThreads(t *testing.T) {
	bin := cc(t, "wthreads", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "w.bin")
	fill(t, p, 2<<20, 0)
	out, r := run(t, onMount, true, nil, bin, p)
	if out != "ok\n" {
		t.Fatalf("wthreads: %q", out)
	}
	if r.FastWrite != 4*(2<<20) || r.KernelWrite != 0 {
		t.Fatalf("8 threads: fast %d kernel %d bytes written, want all %d fast: %+v", r.FastWrite, r.KernelWrite, 4*(2<<20), r)
	}
	got, _ := os.ReadFile(p)
	for off := range got {
		tid := off / (256 << 10)
		if got[off] != byte(off*13+tid+3) {
			t.Fatalf("plain read at %d: %d, want %d", off, got[off], byte(off*13+tid+3))
		}
	}
}

// TestGarbage: a client scribbling over the shared structures of a file it
// may write (page table and segment, writers stuck non-zero; shrinking the
// segment is refused by its seal) damages at most that file: the daemon keeps serving it (locks
// wait for its writers at most a bound) and every other file.
func TestGarbage(t *testing.T) {
	bin := cc(t, "garbage", "gcc")
	onMount, _ := setup(t)
	a, b, c := filepath.Join(onMount, "a"), filepath.Join(onMount, "b"), filepath.Join(onMount, "c")
	fill(t, a, 2<<20, 'a')
	fill(t, b, 2<<20, 'b')
	fill(t, c, 2<<20, 'c')
	cmd := exec.Command(bin, a, b)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "scribbled\n" {
		cmd.Process.Kill()
		t.Fatalf("garbage: %q %v (exit %v)", line, err, cmd.Wait())
	}
	// The scribbler still holds its maps: A keeps working through FUSE.
	f, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("after"), 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 100); err != nil || string(buf) != "after" {
		t.Fatalf("A after the scribbling: %q %v", buf, err)
	}
	f.Close()
	for _, p := range []string{b, c} {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{filepath.Base(p)[0]}, 2<<20)) {
			t.Fatalf("%s changed by a client that may not write it: %v", p, err)
		}
	}
	stdin.Close()
	cmd.Wait()
	if daemon.ProcessState != nil {
		t.Fatal("daemon exited")
	}
	// A new shim writer of A after the scribbler is gone works again.
	fill(t, a, 1<<20, 'n')
	out, r := run(t, onMount, true, nil, "bash", "-c", "printf 'hello' | dd of=a bs=5 count=1 conv=notrunc status=none && head -c 5 a")
	if out != "hello" || r.Opens == 0 {
		t.Fatalf("A after the scribbler: %q %+v", out, r)
	}
}

// startOwnDaemon mounts a second daemon (tests that kill it).
func startOwnDaemon(t *testing.T) (dir, back string, cmd *exec.Cmd) {
	t.Helper()
	base := t.TempDir()
	dir, back = filepath.Join(base, "mnt"), filepath.Join(base, "backing")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(back, 0o755)
	cmd = exec.Command(iowarp, "mount", dir, "--backing", back, "--ram", "256MiB", "--control-dir", filepath.Join(base, "ctl"))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		exec.Command("umount", "-l", dir).Run()
	})
	for i := 0; i < 200 && !mounted(dir); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !mounted(dir) {
		t.Fatal("second daemon did not mount")
	}
	return dir, back, cmd
}

// TestDurability: shim write hits, fsync, then kill -9 of the daemon: the
// backing file holds every byte (fsync harvested the shim's dirty bits
// and wrote them back before it returned).
func TestDurability(t *testing.T) {
	bin := cc(t, "durable", "gcc")
	setup(t)
	dir, back, d := startOwnDaemon(t)
	p := filepath.Join(dir, "d.bin")
	const n = 1 << 20
	fill(t, p, 2*n, '.')
	out, r := run(t, dir, true, nil, bin, p, "1048576")
	if out != "synced\n" {
		t.Fatalf("durable: %q", out)
	}
	d.Process.Signal(syscall.SIGKILL)
	d.Wait()
	if r.FastWrite != n {
		t.Fatalf("fast path carried %d bytes, want %d: %+v", r.FastWrite, n, r)
	}
	got, err := os.ReadFile(filepath.Join(back, "d.bin"))
	want := append(bytes.Repeat([]byte{'D'}, n), bytes.Repeat([]byte{'.'}, n)...)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("backing after fsync + kill -9: %d bytes, %d 'D', err %v", len(got), bytes.Count(got, []byte{'D'}), err)
	}
}
