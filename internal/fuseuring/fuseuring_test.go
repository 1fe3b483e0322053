package fuseuring

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dataFile is a read-only regular file served from memory with direct I/O,
// so that every read(2) is one FUSE READ: what is measured and tested is
// the transport, not the page cache.
type dataFile struct {
	fs.Inode
	data []byte
}

var (
	_ fs.NodeOpener    = (*dataFile)(nil)
	_ fs.NodeReader    = (*dataFile)(nil)
	_ fs.NodeGetattrer = (*dataFile)(nil)
)

func (f *dataFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *dataFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	// Into dest, as fusefs does from the pool: over io_uring dest is the
	// ring entry's payload buffer, over /dev/fuse a go-fuse buffer.
	n := copy(dest, f.data[off:])
	return fuse.ReadResultData(dest[:n]), 0
}

func (f *dataFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(f.data))
	return 0
}

type dataRoot struct {
	fs.Inode
	data []byte
}

func (r *dataRoot) OnAdd(ctx context.Context) {
	ch := r.NewPersistentInode(ctx, &dataFile{data: r.data}, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild("data", ch, false)
}

func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// mountData mounts a dataRoot under a temporary directory, over io_uring
// or over /dev/fuse, and unmounts it when the test ends.
func mountData(tb testing.TB, data []byte, uring bool) *Server {
	tb.Helper()
	mode := Off
	if uring {
		mode = On
	}
	s, _, err := mountDataMode(tb, data, mode, Config{})
	if errors.Is(err, ErrUnsupported) {
		tb.Skipf("kernel refuses FUSE over io_uring: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// mountDataMode mounts with the given mode and queue config, returning what
// Mount returned; a mount is unmounted when the test ends.
func mountDataMode(tb testing.TB, data []byte, mode Mode, cfg Config) (*Server, error, error) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("mount(2) needs root")
	}
	if mode != Off {
		if err := Enable(); err != nil {
			tb.Skipf("cannot enable FUSE over io_uring: %v", err)
		}
	}
	dir := tb.TempDir()
	// MaxWrite and the logger as in fusefs: 1 MiB requests, go-fuse's
	// notes (a splice that falls back to a copy) not on stderr.
	opts := fs.Options{MountOptions: fuse.MountOptions{Name: "fuseuringtest", MaxWrite: 1 << 20,
		Logger: log.New(io.Discard, "", 0), DirectMountStrict: true}}
	raw := fs.NewNodeFS(&dataRoot{data: data}, &opts)
	s, fallback, err := Mount(dir, raw, opts.MountOptions, mode, cfg)
	if err != nil {
		return nil, fallback, err
	}
	tb.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			tb.Errorf("unmount: %v", err)
		}
	})
	return s, fallback, nil
}

func TestMountReadsOverUring(t *testing.T) {
	data := pattern(3<<20 + 1234)
	rings := ringFds(t)
	s := mountData(t, data, true)
	if !s.Uring() {
		t.Fatal("mounted without io_uring")
	}
	name := filepath.Join(s.dir, "data")
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes over io_uring, want the %d served", len(got), len(data))
	}
	// A second process (another CPU's queue, maybe) with a real program.
	out, err := exec.Command("cat", name).Output()
	if err != nil {
		t.Fatalf("cat: %v", err)
	}
	if !bytes.Equal(out, data) {
		t.Fatalf("cat read %d bytes, want %d", len(out), len(data))
	}
	if _, err := os.Stat(filepath.Join(s.dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of a missing name: %v, want ENOENT", err)
	}
	if s.Served() == 0 {
		t.Fatal("no request was answered over the rings")
	}
	// The mount is where it was asked for, and only there (go-fuse's
	// direct mount once followed /dev/fd/N onto /dev/fuse).
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mounts, []byte(" /dev/fuse ")) || !bytes.Contains(mounts, []byte(" "+s.dir+" ")) {
		t.Fatalf("mount table:\n%s", mounts)
	}
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}
	if n := ringFds(t); n != rings {
		t.Fatalf("%d io_uring instances open after the unmount, %d before the mount", n, rings)
	}
}

// A payload buffer smaller than the kernel's max_payload_sz (max_write is
// 1 MiB) makes every registration fail with EINVAL after INIT negotiated
// io_uring: On fails the mount, Auto unmounts and mounts again over
// /dev/fuse, and the file reads correctly.
func TestAutoFallsBackWhenRegistrationFails(t *testing.T) {
	data := pattern(1<<20 + 7)
	small := Config{Payload: minPayload}
	if _, _, err := mountDataMode(t, data, On, small); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("mode on with a refused registration: %v, want ErrUnsupported", err)
	}
	s, fallback, err := mountDataMode(t, data, Auto, small)
	if err != nil {
		t.Fatalf("mode auto: %v", err)
	}
	if s.Uring() || !errors.Is(fallback, ErrUnsupported) {
		t.Fatalf("mode auto: uring %v, fallback %v; want /dev/fuse and the reason", s.Uring(), fallback)
	}
	got, err := os.ReadFile(filepath.Join(s.dir, "data"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after fallback: %d bytes, %v; want %d", len(got), err, len(data))
	}
	t.Logf("fell back: %v", fallback)
}
