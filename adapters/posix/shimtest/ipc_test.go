package shimtest

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/fusefs"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/fs"
)

// ipcEnv turns the shim's misses through runtime/ipc on.
var ipcEnv = []string{"IOWARP_IPC=1"}

// onBacking writes a file of n random bytes straight into the backing
// directory: the pool has none of its pages, so every first access through
// the mount is a miss.
func onBacking(t *testing.T, onMount, name string, n int) (mountPath string, data []byte) {
	t.Helper()
	data = make([]byte, n)
	rand.New(rand.NewSource(int64(n))).Read(data)
	rel, err := filepath.Rel(mnt, onMount)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, rel, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(onMount, name), data
}

// TestIPCMissRead: cat of a file whose pages are not resident is served
// through runtime/ipc (each miss stages a page in; the rest are hits), not
// through the kernel, and equals the file.
func TestIPCMissRead(t *testing.T) {
	onMount, _ := setup(t)
	p, data := onBacking(t, onMount, "cold.bin", 5<<20+1234)
	out, r := run(t, onMount, true, ipcEnv, "cat", p)
	if !bytes.Equal([]byte(out), data) {
		t.Fatalf("cat through ipc misses: %d bytes, differs from the file", len(out))
	}
	if r.IPCRead == 0 || r.KernelRead != 0 || r.FastRead+r.IPCRead != int64(len(data)) {
		t.Fatalf("ipc did not carry the misses: %+v", r)
	}
	// Default (IOWARP_IPC unset): misses take the kernel path.
	q, _ := onBacking(t, onMount, "cold2.bin", 3<<20)
	if _, r = run(t, onMount, true, nil, "cat", q); r.IPCRead != 0 || r.KernelRead == 0 {
		t.Fatalf("IOWARP_IPC unset: %+v", r)
	}
}

// TestIPCMissWrite: a pwrite inside the file to pages that are not
// resident goes through ipc, a plain cat sees it at once (while the
// writer's fd is open), and fsync puts it on the backing file.
func TestIPCMissWrite(t *testing.T) {
	bin := cc(t, "ipcmiss", "gcc")
	onMount, _ := setup(t)
	p, data := onBacking(t, onMount, "w.bin", 4<<20)
	const off, n = 2<<20 + 100, 5000
	catOut := filepath.Join(t.TempDir(), "cat")
	_, r := run(t, onMount, true, append(ipcEnv, "IPCMISS_OUT="+catOut), bin, "write", p, strconv.Itoa(off), strconv.Itoa(n))
	if r.IPCWrite != n || r.KernelWrite != 0 {
		t.Fatalf("the write did not go through ipc: %+v", r)
	}
	want := append([]byte(nil), data...)
	copy(want[off:], bytes.Repeat([]byte{'#'}, n))
	if got, _ := os.ReadFile(catOut); !bytes.Equal(got, want) {
		t.Fatalf("plain cat right after the ipc write: %d bytes, not what was written", len(got))
	}
	rel, _ := filepath.Rel(mnt, p)
	if got, _ := os.ReadFile(filepath.Join(backing, rel)); !bytes.Equal(got, want) {
		t.Fatalf("backing file after fsync: not what was written")
	}
}

// TestIPCFork: a forked child (which never enters Go) reads a miss on the
// kernel path; the parent then uses ipc; both read the file's bytes.
func TestIPCFork(t *testing.T) {
	bin := cc(t, "ipcmiss", "gcc")
	onMount, _ := setup(t)
	p, data := onBacking(t, onMount, "f.bin", 3<<20)
	rep := filepath.Join(t.TempDir(), "report")
	out, _ := run(t, onMount, false, append(ipcEnv, "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep), bin, "fork", p)
	if out != string(data[1<<20:1<<20+4096])+string(data[2<<20:2<<20+4096]) {
		t.Fatalf("fork: child or parent read the wrong bytes")
	}
	b, _ := os.ReadFile(rep)
	var child, parent string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " child=1 ") {
			child = l
		} else if strings.Contains(l, " child=0 ") {
			parent = l
		}
	}
	if !strings.Contains(child, " ipc_read=0 ") || strings.Contains(child, " kernel_read=0 ") {
		t.Fatalf("child not on the kernel path: %q", child)
	}
	if strings.Contains(parent, " ipc_read=0 ") || !strings.Contains(parent, " kernel_read=0 ") {
		t.Fatalf("parent not on ipc: %q", parent)
	}
}

// TestIPCTokens: the daemon checks what a client sends to fs.pread and
// fs.pwrite: the token of an O_RDONLY open reads but cannot write, and
// cannot be passed off as an O_RDWR one, and a forged token is refused.
func TestIPCTokens(t *testing.T) {
	onMount, _ := setup(t)
	p, data := onBacking(t, onMount, "t.bin", 2<<20)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var capb [fusefs.CapSize]byte
	req := fusefs.Capability{Pid: uint32(os.Getpid())}
	req.Encode(capb[:])
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(fusefs.IocCap), uintptr(unsafe.Pointer(&capb[0]))); e != 0 {
		t.Fatalf("handshake: %v", e)
	}
	c, err := fusefs.DecodeCapability(capb[:])
	if err != nil || c.Grant == 0 {
		t.Fatalf("capability %+v: %v", c, err)
	}
	cl, err := ipc.Dial(ipc.SocketPath(filepath.Join(work, "ctl"), mnt), ipc.DialOptions{SegmentSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	call := func(method string, o fs.ShimOpen, write bool) (int, error) {
		m, err := cl.Resolve(fs.Name, method)
		if err != nil {
			t.Fatal(err)
		}
		w := runtime.NewArgWriter(nil)
		fs.WriteShimOpen(w, o)
		w.I64(4096)
		args, _ := cl.Alloc(len(w.Bytes()))
		copy(args.Bytes(), w.Bytes())
		buf, _ := cl.Alloc(4096)
		defer args.Free()
		defer buf.Free()
		if write {
			res, err := cl.Do(m, args.All(), buf.All(), ipc.Span{})
			return int(res.Value), err
		}
		res, err := cl.Do(m, args.All(), ipc.Span{}, buf.All())
		if err == nil && !bytes.Equal(buf.Bytes()[:res.N], data[4096:4096+res.N]) {
			t.Fatalf("pread through ipc: wrong bytes")
		}
		return res.N, err
	}
	o := fs.ShimOpen{Grant: c.Grant, Ino: c.Ino, AccMode: c.AccMode, Token: c.Token}
	if n, err := call(fs.MPread, o, false); err != nil || n != 4096 {
		t.Fatalf("pread with the O_RDONLY token: %d, %v", n, err)
	}
	if n, err := call(fs.MPwrite, o, true); err == nil || n != 0 {
		t.Fatalf("pwrite with the O_RDONLY token: %d, %v", n, err)
	}
	wide := o
	wide.AccMode = unix.O_RDWR
	if _, err := call(fs.MPwrite, wide, true); !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("pwrite with the O_RDONLY token claimed O_RDWR: %v", err)
	}
	forged := o
	forged.Token[0] ^= 1
	if _, err := call(fs.MPread, forged, false); !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("pread with a forged token: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Fatalf("the file changed")
	}
}
