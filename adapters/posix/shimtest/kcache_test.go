package shimtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// ccFlags compiles testdata/name.c with gcc and extra flags.
func ccFlags(t *testing.T, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	src, _ := filepath.Abs(filepath.Join("testdata", name+".c"))
	bin := filepath.Join(t.TempDir(), name)
	args := append(append([]string{}, flags...), "-o", bin, src)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", name, err, out)
	}
	return bin
}

// pattern is byte(i*7+3) for i in [0, n).
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// TestFortified: a program built with -O2 -D_FORTIFY_SOURCE=2 (the default
// of Ubuntu's gcc and of many Spack builds) calls __read_chk,
// __pread_chk, __pread64_chk and __fread_chk, which glibc serves with its internal
// read, past the interposers: the shim interposes them, so the fast path
// carries its reads and writes and the bytes are right, and
// __readlink_chk follows IOWARP_PATHS; a read larger than its buffer
// still aborts the program, as glibc's check does.
func TestFortified(t *testing.T) {
	bin := ccFlags(t, "fortify", "-O2", "-D_FORTIFY_SOURCE=2")
	syms, err := exec.Command("nm", "-D", bin).Output()
	if err != nil {
		t.Skipf("nm: %v", err)
	}
	for _, s := range []string{"__read_chk", "__pread_chk", "__pread64_chk", "__fread_chk", "__readlink_chk"} {
		if !bytes.Contains(syms, []byte(" "+s)) {
			t.Fatalf("the fortified build does not call %s:\n%s", s, syms)
		}
	}
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "f.bin")
	if err := os.WriteFile(p, pattern(1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", filepath.Join(onMount, "l")); err != nil {
		t.Fatal(err)
	}
	fake := "/iowarp-fortify-test"
	env := []string{"IOWARP_PATHS=" + fake + "=" + onMount, "FORTIFY_LINK=" + fake + "/l"}
	out, r := run(t, onMount, true, env, bin, p, "65536")
	if out != "link target\nok\n" {
		t.Fatalf("fortify: %q", out)
	}
	requireOurs(t, r)
	const n = 65536
	if r.FastRead < 16*n || r.FastWrite != n || r.KernelWrite != 0 {
		t.Fatalf("fortified calls: fast read %d write %d, kernel write %d bytes; want >= %d read and %d written fast: %+v",
			r.FastRead, r.FastWrite, r.KernelWrite, 16*n, n, r)
	}
	want := pattern(1 << 20)
	copy(want[128<<10:], bytes.Repeat([]byte{'F'}, n))
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file after the fortified program: %v", err)
	}
	cmd := exec.Command(bin, p, "65537", "overflow")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	out2, err := cmd.CombinedOutput()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGABRT || !bytes.Contains(out2, []byte("buffer overflow detected")) {
		t.Fatalf("a read past the buffer under the shim: %v, %q; want glibc's abort", err, out2)
	}
}

// stopOwnDaemon stops a daemon of startOwnDaemon cleanly (SIGTERM: every
// dirty page is written back, then it unmounts and exits 0).
func stopOwnDaemon(t *testing.T, d *exec.Cmd) {
	t.Helper()
	d.Process.Signal(syscall.SIGTERM)
	if err := d.Wait(); err != nil {
		t.Fatalf("daemon after SIGTERM: %v", err)
	}
}

// TestStalePageCache is issue 9's reproduction, on one fd: an extending
// pwrite of 256 KiB of 'A' (kernel path, fills the page cache), a pwrite
// of 64 KiB of 'B' at 64 KiB (fast path, into the pool behind the cache),
// then copy_file_range(64 KiB -> 192 KiB): the copy holds 'B', and after
// a clean unmount so does the backing file. A second file goes on: a
// shared map, sendfile, stores through a map read back by pread while
// mapped and after munmap, a fast write seen by a new map (stale.c).
func TestStalePageCache(t *testing.T) {
	bin := cc(t, "stale", "gcc")
	setup(t)
	dir, back, d := startOwnDaemon(t)
	three, full := filepath.Join(dir, "three"), filepath.Join(dir, "full")
	// The 'A' write extends the file: IOWARP_NOFASTNEW keeps it on the
	// kernel path (it would be new data in shared memory otherwise).
	out, r := run(t, dir, true, []string{"IOWARP_NOFASTNEW=1"}, bin, three, "3")
	if out != "ok\n" {
		t.Fatalf("stale (three steps): %s", out)
	}
	const k = 64 << 10
	if r.FastWrite != k {
		t.Fatalf("the 'B' write took the fast path for %d bytes, want %d (not the reproduction): %+v", r.FastWrite, k, r)
	}
	out, r = run(t, dir, true, nil, bin, full)
	if out != "ok\n" {
		t.Fatalf("stale: %s", out)
	}
	if r.FastWrite < k {
		t.Fatalf("no fast writes: %+v", r)
	}
	rep := func(s string) []byte {
		var b []byte
		for _, c := range s {
			b = append(b, bytes.Repeat([]byte{byte(c)}, k)...)
		}
		return b
	}
	want := map[string][]byte{"three": rep("ABAB"), "full": rep("WBFB")}
	for name, w := range want {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s on the mount: %q, %v", name, summarize(got), err)
		}
	}
	stopOwnDaemon(t, d)
	for name, w := range want {
		if got, err := os.ReadFile(filepath.Join(back, name)); err != nil || !bytes.Equal(got, w) {
			t.Fatalf("backing %s after a clean unmount: %q, %v", name, summarize(got), err)
		}
	}
}

// summarize is b as runs: "A*65536 B*65536".
func summarize(b []byte) string {
	var s []string
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] == b[i] {
			j++
		}
		s = append(s, fmt.Sprintf("%q*%d", b[i], j-i))
		i = j
		if len(s) > 16 {
			s = append(s, "...")
			break
		}
	}
	return strings.Join(s, " ")
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestModel runs random operation sequences (model.c: pread/pwrite,
// read/write, preadv2/pwritev2, reads and stores through shared maps,
// fallocate punch and zero, copy_file_range, ftruncate, fsync) through
// the shim on the mount against an in-memory model, one file per seed;
// each file on the mount and, after a clean unmount, on the backing
// directory must equal its model. IOWARP_MODEL_SEEDS and IOWARP_MODEL_OPS
// run more (defaults 20 seeds of 1500 operations).
func TestModel(t *testing.T) {
	bin := cc(t, "model", "gcc")
	setup(t)
	dir, back, d := startOwnDaemon(t)
	seeds, ops := envInt("IOWARP_MODEL_SEEDS", 20), envInt("IOWARP_MODEL_OPS", 1500)
	models := t.TempDir()
	var total Report
	for s := 1; s <= seeds; s++ {
		name := fmt.Sprintf("seed%d", s)
		out, r := run(t, dir, true, nil, bin, filepath.Join(dir, name), strconv.Itoa(s), strconv.Itoa(ops),
			filepath.Join(models, name))
		if out != "ok\n" {
			t.Fatalf("seed %d: %s", s, out)
		}
		total.FastRead += r.FastRead
		total.FastWrite += r.FastWrite
		total.KernelRead += r.KernelRead
		total.KernelWrite += r.KernelWrite
	}
	t.Logf("%d seeds x %d ops: fast read %d write %d, kernel read %d write %d bytes",
		seeds, ops, total.FastRead, total.FastWrite, total.KernelRead, total.KernelWrite)
	if total.FastWrite == 0 || total.FastRead == 0 {
		t.Fatalf("the fast path carried nothing: %+v", total)
	}
	compareModels := func(where string) {
		t.Helper()
		for s := 1; s <= seeds; s++ {
			name := fmt.Sprintf("seed%d", s)
			want, _ := os.ReadFile(filepath.Join(models, name))
			got, err := os.ReadFile(filepath.Join(where, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("seed %d in %s: %d bytes, model %d: %v (first difference at %d)", s, where, len(got), len(want), err, firstDiff(got, want))
			}
		}
	}
	compareModels(dir)
	stopOwnDaemon(t, d)
	compareModels(back)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMapAcrossProcesses: a process under the shim stores through a
// shared map (no msync); another process under the shim reads the file
// (its fast path would read the pool, which the stores have not reached)
// and sees the stores, then writes, and the map sees the write. Once the
// map is gone, a new process reads on the fast path again.
func TestMapAcrossProcesses(t *testing.T) {
	bin := cc(t, "mapx", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "x.bin")
	fill(t, p, 1<<20, '.')
	// The reader opens first: its handshake would otherwise write the
	// map's pages back (the daemon drops the inode's cache at a grant).
	reader, rin, rout := startLines(t, bin, "rw", p)
	rout.expect("open")
	mapper, mapIn, mout := startLines(t, bin, "map", p)
	mout.expect("stored")
	io.WriteString(rin, "read\n")
	if line := rout.line(); line != "X" {
		t.Fatalf("a second process read %q: the stores through the first one's map were not seen", line)
	}
	if err := reader.Wait(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(mapIn, "check\n")
	mout.expect("ok")
	io.WriteString(mapIn, "done\n")
	if err := mapper.Wait(); err != nil {
		t.Fatal(err)
	}
	out, r := run(t, onMount, true, nil, bin, "rw", p, "-")
	if out != "stale\n" || r.FastRead != 64<<10 {
		t.Fatalf("after the map is gone: %q (want the 'Y' page, so not all 'X'), fast read %d bytes, want %d: %+v", out, r.FastRead, 64<<10, r)
	}
	want := append(bytes.Repeat([]byte{'Y'}, 4096), bytes.Repeat([]byte{'X'}, 60<<10)...)
	want = append(want, bytes.Repeat([]byte{'.'}, 1<<20-64<<10)...)
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file after both: %s, %v", summarize(got), err)
	}
}

type lineReader struct {
	t *testing.T
	r *bufio.Reader
}

func (l lineReader) line() string {
	l.t.Helper()
	s, err := l.r.ReadString('\n')
	if err != nil {
		l.t.Fatalf("reading a line: %q %v", s, err)
	}
	return strings.TrimSuffix(s, "\n")
}

func (l lineReader) expect(want string) {
	l.t.Helper()
	if got := l.line(); got != want {
		l.t.Fatalf("got %q, want %q", got, want)
	}
}

// startLines starts argv under the shim with pipes for its stdin and
// stdout; it is killed at the end of the test if still running.
func startLines(t *testing.T, argv ...string) (*exec.Cmd, io.WriteCloser, lineReader) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin, lineReader{t, bufio.NewReader(stdout)}
}
