package fusefs

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// statOutside is stat(1) of p in another process: size and mtime (ns).
func statOutside(t *testing.T, p string) (size, mtime int64) {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%s %.9Y", p).Output()
	if err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	f := strings.Fields(string(out))
	size, _ = strconv.ParseInt(f[0], 10, 64)
	sec, nsec, _ := strings.Cut(f[1], ".")
	s, _ := strconv.ParseInt(sec, 10, 64)
	ns, _ := strconv.ParseInt(nsec, 10, 64)
	return size, s*1e9 + ns
}

// TestWritebackCacheAttrs: with the kernel's writeback cache, small writes
// held in the page cache still show their size to another process at once;
// after close the daemon has the kernel's size and mtime; fsync returns
// with the bytes on the backing store; appends land at the end.
func TestWritebackCacheAttrs(t *testing.T) {
	tm := newTestMountOpts(t, files.Writeback, Options{WritebackCache: true})
	p := filepath.Join(tm.dir, "f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 123
	want := make([]byte, size)
	put := func(off int64, b []byte) {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatalf("pwrite at %d: %v", off, err)
		}
		copy(want[off:], b)
	}
	for i, off := range []int64{1 << 20, 5, 2<<20 + 4090, 12345, size - 7} {
		put(off, bytes.Repeat([]byte{byte('a' + i)}, 7))
	}
	if sz, _ := statOutside(t, p); sz != size {
		t.Fatalf("stat in another process while the pages are dirty: size %d, want %d", sz, size)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(tm.backing, "f")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("backing file after fsync: %d bytes (want %d), equal %v, %v", len(got), size, bytes.Equal(got, want), err)
	}
	put(size-3, []byte("zz"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	sz, mt := statOutside(t, p)
	st, err := tm.fs.Lstat("f")
	if err != nil {
		t.Fatal(err)
	}
	if sz != size || st.Size != size {
		t.Fatalf("after close: size %d through the mount, %d in the daemon, want %d", sz, st.Size, size)
	}
	if dm := st.Mtim.Nano(); dm != mt {
		t.Errorf("after close: mtime %d through the mount, %d in the daemon", mt, dm)
	}

	// The kernel writes one open's dirty pages back through any writable
	// handle of the inode, here the O_APPEND one opened last: the write
	// at 0 must stay at 0.
	r, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte("head"), 0); err != nil {
		t.Fatal(err)
	}
	copy(want, "head")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one", "two"} {
		if _, err := a.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		want = append(want, s...)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tm.fs.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{p, filepath.Join(tm.backing, "f")} {
		if got, err := os.ReadFile(q); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after appends: %d bytes (want %d), %v", q, len(got), len(want), err)
		}
	}
}

// TestWritebackCacheWriteOnly: a write-only open of a file its caller may
// not read stays write-only in the file layer (the shim's grant follows
// it) and bypasses the page cache; a readable one is opened read-write, so
// the kernel can fill partly written pages through it.
func TestWritebackCacheWriteOnly(t *testing.T) {
	for _, c := range []struct {
		name string
		st   unix.Stat_t
		cred files.Cred
		want bool
	}{
		{"root", unix.Stat_t{Mode: 0o200, Uid: 5}, files.Cred{}, true},
		{"owner", unix.Stat_t{Mode: 0o600, Uid: 5}, files.Cred{Uid: 5, Gid: 9}, true},
		{"owner write-only", unix.Stat_t{Mode: 0o266, Uid: 5}, files.Cred{Uid: 5, Gid: 9}, false},
		{"group", unix.Stat_t{Mode: 0o640, Uid: 5, Gid: 9}, files.Cred{Uid: 6, Gid: 9}, true},
		{"group write-only", unix.Stat_t{Mode: 0o624, Uid: 5, Gid: 9}, files.Cred{Uid: 6, Gid: 9}, false},
		{"other", unix.Stat_t{Mode: 0o644, Uid: 5, Gid: 9}, files.Cred{Uid: 6, Gid: 8}, true},
		{"other write-only", unix.Stat_t{Mode: 0o662, Uid: 5, Gid: 9}, files.Cred{Uid: 6, Gid: 8}, false},
	} {
		if got := mayRead(&c.st, c.cred); got != c.want {
			t.Errorf("%s: mayRead = %v, want %v", c.name, got, c.want)
		}
	}
	tm := newTestMountOpts(t, files.Writeback, Options{WritebackCache: true})
	p := filepath.Join(tm.dir, "w")
	// Written behind the kernel, so that it has no page of it cached.
	if err := os.WriteFile(filepath.Join(tm.backing, "w"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A partial-page write through a write-only fd: a kernel that fills
	// whole pages reads the rest of the page through it (6.18's iomap
	// buffered writes track uptodate ranges and need no read).
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("ab"), 3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || string(got) != "012ab56789" {
		t.Fatalf("after a write-only partial write: %q, %v", got, err)
	}
}

// shimProc stands for a process with the shim loaded (a file named
// libiowarp.so mapped, which is what shimLoaded looks for): it writes 'A's
// through the mount, waits while the test writes 'B's behind the kernel
// (as the shim writes the pool), then reads through its fd again.
const shimProc = `
import mmap, os, sys
lib = open(sys.argv[1], "rb")
m = mmap.mmap(lib.fileno(), 0, prot=mmap.PROT_READ)
fd = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"A" * 8192, 0)
print("written", flush=True)
sys.stdin.readline()
print(os.pread(fd, 8192, 0).decode(), flush=True)
os.close(fd)
`

// TestWritebackCacheShimProcess: with the writeback cache, the opens of a
// process with the shim loaded bypass the page cache, so what the shim
// writes into the pool behind the kernel is read back at once and never
// overwritten by pages the kernel held dirty.
func TestWritebackCacheShimProcess(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	tm := newTestMountOpts(t, files.Writeback, Options{WritebackCache: true})
	lib := filepath.Join(t.TempDir(), "libiowarp.so")
	if err := os.WriteFile(lib, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", shimProc, lib, filepath.Join(tm.dir, "f"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Before the unmount (cleanups run last first): a process left
	// holding a file of the mount would keep it busy.
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pw.Close()
	defer pr.Close()
	br := bufio.NewReader(pr)
	if line, err := br.ReadString('\n'); err != nil || line != "written\n" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("shim process: %q %v %s", line, err, out.String())
	}
	h, _, err := tm.fs.Open("f", os.O_RDWR, 0, files.Cred{})
	if err != nil {
		t.Fatal(err)
	}
	bs := bytes.Repeat([]byte("B"), 8192)
	if _, err := h.WriteAt(bs, 0); err != nil {
		t.Fatal(err)
	}
	h.Release()
	stdin.Write([]byte("\n"))
	rest, _ := io.ReadAll(br)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shim process: %v %s", err, out.String())
	}
	if got := strings.TrimSpace(string(rest)); got != string(bs) {
		t.Fatalf("the shim process read back %.8q..., want the B's written behind the kernel", got)
	}
	if err := tm.fs.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{filepath.Join(tm.dir, "f"), filepath.Join(tm.backing, "f")} {
		if got, err := os.ReadFile(q); err != nil || !bytes.Equal(got, bs) {
			t.Fatalf("%s after close: %.8q..., %v", q, got, err)
		}
	}
}
