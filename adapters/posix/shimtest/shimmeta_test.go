package shimtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fstatProc is testdata/fstatw.c running on one file: fstat of its fd on
// request, while the test changes the file from other processes.
type fstatProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startFstat(t *testing.T, bin, file string, env []string) *fstatProc {
	t.Helper()
	cmd := exec.Command(bin, file)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &fstatProc{cmd, in, bufio.NewReader(out)}
	t.Cleanup(func() { p.in.Close(); p.cmd.Process.Kill(); p.cmd.Wait() })
	return p
}

func (p *fstatProc) ask(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		t.Fatal(err)
	}
	l, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return strings.TrimSpace(l)
}

func (p *fstatProc) quit(t *testing.T) {
	t.Helper()
	io.WriteString(p.in, "q\n")
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("fstatw: %v", err)
	}
}

// fstatAnswer is one line of fstatw's "s".
type fstatAnswer struct {
	size, nlink  int64
	mode         uint32
	mtime, ctime int64
	ino, dev     uint64
	uid          uint32
	blksize      int64
	typ          uint32
}

func parseFstat(t *testing.T, l string) fstatAnswer {
	t.Helper()
	var a fstatAnswer
	if _, err := fmt.Sscanf(l, "size=%d mode=%o nlink=%d mtime=%d ctime=%d ino=%d dev=%d uid=%d blksize=%d type=%o",
		&a.size, &a.mode, &a.nlink, &a.mtime, &a.ctime, &a.ino, &a.dev, &a.uid, &a.blksize, &a.typ); err != nil {
		t.Fatalf("fstatw answered %q: %v", l, err)
	}
	return a
}

// kernelStat is stat through the kernel path, asked of the daemon afresh
// (a forced statx), from a process without the shim.
func kernelStat(t *testing.T, p string) fstatAnswer {
	t.Helper()
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_FORCE_SYNC, unix.STATX_BASIC_STATS, &sx); err != nil {
		t.Fatal(err)
	}
	ns := func(ts unix.StatxTimestamp) int64 { return ts.Sec*1e9 + int64(ts.Nsec) }
	return fstatAnswer{size: int64(sx.Size), nlink: int64(sx.Nlink), mode: uint32(sx.Mode) & 0o7777,
		mtime: ns(sx.Mtime), ctime: ns(sx.Ctime), ino: sx.Ino, dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor),
		uid: sx.Uid, blksize: int64(sx.Blksize), typ: uint32(sx.Mode) & unix.S_IFMT}
}

// TestFstatCoherent: fstat of an attached fd under the shim, answered from
// the page table while the file's attributes did not change otherwise
// than by shim writes (and asked of the daemon afresh otherwise), agrees
// at once with the kernel path and behaves as
// fstat on tmpfs while other processes change the file: writes through
// the shim that extend it or overwrite it in place, an append through the
// kernel path, chmod, truncate, a hard link, an explicit mtime, and the
// fd's own write. Each change is made to the same file on tmpfs too: the
// size, mode and links must equal tmpfs's, the mtime must move when
// tmpfs's moves (to the explicit time when one is set), and size, mode,
// links and mtime must equal what the daemon answers a process without the
// shim, and so must the inode, device, owner, block size and type. The
// report shows fstat calls served without the kernel.
func TestFstatCoherent(t *testing.T) {
	onMount, onTmpfs := setup(t)
	bin := cc(t, "fstatw", "cc")
	files := map[string]string{"mount": filepath.Join(onMount, "f"), "tmpfs": filepath.Join(onTmpfs, "f")}
	for _, f := range files {
		if err := os.WriteFile(f, make([]byte, 10000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := filepath.Join(t.TempDir(), "report")
	shim := startFstat(t, bin, files["mount"], []string{"LD_PRELOAD=" + lib, "IOWARP_REPORT=" + rep})
	plain := startFstat(t, bin, files["tmpfs"], nil)
	prev := map[string]fstatAnswer{}
	check := func(step string, explicit int64) {
		t.Helper()
		m := parseFstat(t, shim.ask(t, "s"))
		k := kernelStat(t, files["mount"])
		tm := parseFstat(t, plain.ask(t, "s"))
		if m.size != tm.size || m.mode != tm.mode || m.nlink != tm.nlink {
			t.Fatalf("%s: under the shim %+v, on tmpfs %+v", step, m, tm)
		}
		if m.size != k.size || m.mode != k.mode || m.nlink != k.nlink || m.mtime != k.mtime ||
			m.ino != k.ino || m.dev != k.dev || m.uid != k.uid || m.blksize != k.blksize || m.typ != k.typ {
			t.Fatalf("%s: under the shim %+v, the kernel path %+v", step, m, k)
		}
		if m.ctime < m.mtime {
			t.Fatalf("%s: ctime %d before mtime %d", step, m.ctime, m.mtime)
		}
		if explicit != 0 && m.mtime != explicit {
			t.Fatalf("%s: mtime %d, want the one set, %d", step, m.mtime, explicit)
		}
		if p, ok := prev["tmpfs"]; ok && explicit == 0 {
			if moved, movedShim := tm.mtime != p.mtime, m.mtime != prev["mount"].mtime; moved && !movedShim {
				t.Fatalf("%s: mtime moved on tmpfs (%d -> %d), not under the shim (%d)", step, p.mtime, tm.mtime, m.mtime)
			}
		}
		prev["mount"], prev["tmpfs"] = m, tm
	}
	both := func(step string, shimmed bool, argv func(f string) []string) {
		t.Helper()
		for col, f := range files {
			a := argv(f)
			cmd := exec.Command(a[0], a[1:]...)
			if col == "mount" && shimmed {
				cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s on %s: %v\n%s", step, col, err, out)
			}
		}
	}
	check("first", 0)
	for i := 0; i < 5; i++ {
		check("again", 0)
	}
	// A tick of the clock between changes: the mtime of each is new.
	tick := func() { time.Sleep(20 * time.Millisecond) }
	tick()
	both("a shim write that extends the file", true, func(f string) []string {
		return []string{"dd", "if=/dev/zero", "of=" + f, "bs=64k", "count=4", "seek=1", "conv=notrunc", "status=none"}
	})
	check("a shim write that extends the file", 0)
	tick()
	both("a shim write in place", true, func(f string) []string {
		return []string{"dd", "if=/dev/zero", "of=" + f, "bs=4k", "count=1", "conv=notrunc", "status=none"}
	})
	check("a shim write in place", 0)
	tick()
	both("an append through the kernel", false, func(f string) []string {
		return []string{"sh", "-c", "printf 0123456789 >> " + f}
	})
	check("an append through the kernel", 0)
	tick()
	for _, f := range files {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check("chmod", 0)
	tick()
	for _, f := range files {
		if err := os.Truncate(f, 100000); err != nil {
			t.Fatal(err)
		}
	}
	check("truncate", 0)
	for _, f := range files {
		if err := os.Link(f, f+".2"); err != nil {
			t.Fatal(err)
		}
	}
	check("link", 0)
	when := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	for _, f := range files {
		if err := os.Chtimes(f, when, when); err != nil {
			t.Fatal(err)
		}
	}
	check("an explicit mtime", when.UnixNano())
	tick()
	for _, p := range []*fstatProc{shim, plain} {
		if got := p.ask(t, "w 300000 5000"); got != "ok" {
			t.Fatalf("own write: %q", got)
		}
	}
	check("the fd's own write", 0)
	for i := 0; i < 3; i++ {
		check("again", 0)
	}
	shim.quit(t)
	plain.quit(t)
	r := parseReport(t, rep)
	if r.FstatCached == 0 || r.FstatKernel == 0 {
		t.Fatalf("want fstat served from the page table and, after changes, by the kernel: %+v", r)
	}
	t.Logf("fstat: %d from the page table, %d from the kernel", r.FstatCached, r.FstatKernel)
}

// TestMetaCallsAvoided: opens that do no I/O (creates: mdtest's,
// touch's) ask the daemon for no grant, so no page table is
// made, and the is-it-FUSE probe (fstatfs: a STATFS request) is asked once
// for the mount, not per open. The report counts both.
func TestMetaCallsAvoided(t *testing.T) {
	onMount, _ := setup(t)
	const n = 40
	argv := []string{"touch"}
	for i := 0; i < n; i++ {
		argv = append(argv, fmt.Sprintf("f%d", i))
	}
	_, r := run(t, onMount, true, nil, argv...)
	if r.Opens != n {
		t.Fatalf("want %d opens: %+v", n, r)
	}
	if r.Grants != 0 || r.GrantsSkipped != n {
		t.Fatalf("creates without I/O: want no grant and %d skipped: %+v", n, r)
	}
	if r.Statfs > 1 || r.StatfsCached < n-1 {
		t.Fatalf("want one fstatfs for the mount, %d opens answered by the device cache: %+v", n-1, r)
	}
	// I/O attaches at the first call that needs the maps, and stays fast.
	_, r = run(t, onMount, true, nil, "dd", "if=/dev/zero", "of=g", "bs=64k", "count=16", "status=none")
	if r.Grants != 1 || r.FastWrite != 16<<16 || r.KernelWrite != 0 {
		t.Fatalf("a writer: want one grant at its first write and every byte fast: %+v", r)
	}
}
