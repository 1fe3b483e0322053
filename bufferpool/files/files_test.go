package files

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

const testPage = 64 << 10

type testFS struct {
	*FS
	pool    *bufferpool.Pool
	backing string
}

func newTestFS(t *testing.T, mode Mode, ram, file int64, tweak func(*Options)) *testFS {
	t.Helper()
	dir := t.TempDir()
	cfg := bufferpool.Config{
		Tiers: []bufferpool.TierConfig{
			{Name: "ram", Kind: bufferpool.KindRAM, Capacity: ram},
			{Name: "nvme", Kind: bufferpool.KindFile, Dir: filepath.Join(dir, "nvme"), Capacity: file},
		},
		OrganizerInterval: -1,
	}
	pool, err := bufferpool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	backing := filepath.Join(dir, "backing")
	if err := os.Mkdir(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Backing: backing, Mode: mode, PageSize: testPage, ScratchDir: filepath.Join(dir, "scratch"), NoSpaceWait: 5 * time.Second}
	if tweak != nil {
		tweak(&opts)
	}
	fs, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fs.Close()
		pool.Close()
	})
	return &testFS{FS: fs, pool: pool, backing: backing}
}

func mustOpen(t *testing.T, fs *testFS, p string, flags int) *Handle {
	t.Helper()
	h, _, err := fs.Open(p, flags, 0o644, Cred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	return h
}

func readAll(t *testing.T, h *Handle) []byte {
	t.Helper()
	st, err := h.Getattr()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, st.Size+100)
	n, err := h.ReadAt(buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

var modes = []Mode{Writeback, Writethrough, Scratch}

// TestModel applies random operations to a file and to a byte slice and
// compares them after every step; after each fsync the backing file must
// equal the model too.
func TestModel(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			fs := newTestFS(t, mode, 4*testPage, 64*testPage, nil)
			rng := rand.New(rand.NewSource(1))
			h := mustOpen(t, fs, "m", os.O_RDWR|os.O_CREATE)
			var model []byte
			for step := 0; step < 400; step++ {
				switch op := rng.Intn(10); {
				case op < 5: // write
					off := rng.Int63n(10 * testPage)
					data := make([]byte, 1+rng.Intn(3*testPage))
					rng.Read(data)
					if _, err := h.WriteAt(data, off); err != nil {
						t.Fatalf("step %d write: %v", step, err)
					}
					if end := off + int64(len(data)); end > int64(len(model)) {
						model = append(model, make([]byte, end-int64(len(model)))...)
					}
					copy(model[off:], data)
				case op < 7: // truncate
					size := rng.Int63n(8 * testPage)
					if _, err := fs.Setattr("m", nil, SetAttr{Size: &size}); err != nil {
						t.Fatalf("step %d truncate: %v", step, err)
					}
					if size < int64(len(model)) {
						model = model[:size]
					} else {
						model = append(model, make([]byte, size-int64(len(model)))...)
					}
				case op < 8: // fsync and compare the backing file
					if err := h.Fsync(false); err != nil {
						t.Fatalf("step %d fsync: %v", step, err)
					}
					if mode != Scratch {
						got, err := os.ReadFile(filepath.Join(fs.backing, "m"))
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, model) {
							t.Fatalf("step %d: backing file differs from model (len %d vs %d)", step, len(got), len(model))
						}
					}
				case op < 9: // reopen
					h.Release()
					h = mustOpen(t, fs, "m", os.O_RDWR)
				default: // demote everything the organizer can
					fs.pool.Organize()
				}
				if got := readAll(t, h); !bytes.Equal(got, model) {
					st, _ := h.Getattr()
					t.Fatalf("step %d: file differs from model (len %d vs %d; fstat %d size %d backing %d)", step, len(got), len(model), st.Size, h.f.size.Load(), h.f.backingSize.Load())
				}
				st, err := fs.Lstat("m")
				if err != nil || st.Size != int64(len(model)) {
					t.Fatalf("step %d: lstat size %d err %v, want %d", step, st.Size, err, len(model))
				}
			}
			h.Release()
		})
	}
}

// TestTruncateDoesNotResurrect: shrink with unflushed data, grow, flush.
func TestTruncateDoesNotResurrect(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	if err := os.WriteFile(filepath.Join(fs.backing, "f"), bytes.Repeat([]byte{'B'}, 3*testPage), 0o644); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, fs, "f", os.O_RDWR)
	defer h.Release()
	h.WriteAt(bytes.Repeat([]byte{'A'}, 2*testPage), 0)
	zero, big := int64(10), int64(3*testPage)
	fs.Setattr("f", h, SetAttr{Size: &zero})
	fs.Setattr("f", h, SetAttr{Size: &big})
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte{'A'}, 10), make([]byte, 3*testPage-10)...)
	if got := readAll(t, h); !bytes.Equal(got, want) {
		t.Fatal("mount view resurrected truncated bytes")
	}
	if got, _ := os.ReadFile(filepath.Join(fs.backing, "f")); !bytes.Equal(got, want) {
		t.Fatal("backing file resurrected truncated bytes")
	}
}

// TestStageInAndRevalidate: a file written on the backing store by
// "another node" while nobody has it open is seen fresh at the next open.
func TestStageInAndRevalidate(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	p := filepath.Join(fs.backing, "shared")
	os.WriteFile(p, []byte("version one"), 0o644)
	h := mustOpen(t, fs, "shared", os.O_RDONLY)
	if got := string(readAll(t, h)); got != "version one" {
		t.Fatalf("got %q", got)
	}
	h.Release()
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(p, []byte("version two, longer"), 0o644)
	h = mustOpen(t, fs, "shared", os.O_RDONLY)
	defer h.Release()
	if got := string(readAll(t, h)); got != "version two, longer" {
		t.Fatalf("stale read after external change: %q", got)
	}
}

// TestRenameAndUnlinkWhileDirty: data follows the inode, not the name.
func TestRenameAndUnlinkWhileDirty(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, func(o *Options) { o.BackingBandwidth = 1 << 30 })
	h := mustOpen(t, fs, "a", os.O_RDWR|os.O_CREATE)
	h.WriteAt([]byte("payload"), 0)
	if err := fs.Rename("a", "b", 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	h.Release()
	if got, _ := os.ReadFile(filepath.Join(fs.backing, "b")); string(got) != "payload" {
		t.Fatalf("renamed file holds %q", got)
	}
	h = mustOpen(t, fs, "b", os.O_RDWR)
	h.WriteAt([]byte("more"), 7)
	if err := fs.Unlink("b"); err != nil {
		t.Fatal(err)
	}
	if got := string(readAll(t, h)); got != "payloadmore" {
		t.Fatalf("unlinked open file reads %q", got)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatalf("fsync of unlinked file: %v", err)
	}
	h.Release()
	if _, err := fs.Lstat("b"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lstat after unlink: %v", err)
	}
	if n := len(fs.pool.Buckets()); n != 0 {
		t.Fatalf("%d buckets left after the last handle of an unlinked file", n)
	}
}

// TestFullPool: scratch fails with ENOSPC; writeback waits for the drain.
func TestFullPool(t *testing.T) {
	t.Run("scratch", func(t *testing.T) {
		fs := newTestFS(t, Scratch, 4*testPage, 4*testPage, func(o *Options) { o.NoSpaceWait = 200 * time.Millisecond })
		h := mustOpen(t, fs, "big", os.O_RDWR|os.O_CREATE)
		defer h.Release()
		_, err := h.WriteAt(make([]byte, 16*testPage), 0)
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("want ErrNoSpace, got %v", err)
		}
	})
	t.Run("writeback", func(t *testing.T) {
		fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
		data := make([]byte, 32*testPage)
		rand.Read(data)
		h := mustOpen(t, fs, "big", os.O_RDWR|os.O_CREATE)
		defer h.Release()
		for off := 0; off < len(data); off += testPage {
			if _, err := h.WriteAt(data[off:off+testPage], int64(off)); err != nil {
				t.Fatalf("write at %d: %v", off, err)
			}
			for _, ts := range fs.pool.Stats().Tiers {
				if ts.Used > ts.Capacity {
					t.Fatalf("tier %s used %d > capacity %d", ts.Name, ts.Used, ts.Capacity)
				}
			}
		}
		if got := readAll(t, h); !bytes.Equal(got, data) {
			for i := range data {
				if got[i] != data[i] {
					back, _ := os.ReadFile(filepath.Join(fs.backing, "big"))
					t.Fatalf("read back differs at %d (page %d): got %x want %x backing %x; backing len %d", i, i/testPage, got[i:i+8], data[i:i+8], back[i:min(len(back), i+8)], len(back))
				}
			}
		}
		if err := h.Fsync(false); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(fs.backing, "big")); !bytes.Equal(got, data) {
			t.Fatal("backing differs")
		}
	})
}

// TestBurstAbsorption: with a slow backing store, writes return at pool
// speed and Close drains everything.
func TestBurstAbsorption(t *testing.T) {
	const bw = 4 << 20 // 4 MiB/s backing store
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.BackingBandwidth = bw })
	data := make([]byte, 48*testPage) // 3 MiB: 0.75 s at backing speed
	rand.Read(data)
	h := mustOpen(t, fs, "ckpt", os.O_RDWR|os.O_CREATE)
	start := time.Now()
	for off := 0; off < len(data); off += 128 << 10 {
		h.WriteAt(data[off:off+128<<10], int64(off))
	}
	h.Flush()
	h.Release()
	took := time.Since(start)
	if backingTime := time.Duration(float64(len(data)) / bw * float64(time.Second)); took > backingTime/2 {
		t.Errorf("burst of %d bytes took %v; the backing store alone needs %v", len(data), took, backingTime)
	}
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(fs.backing, "ckpt")); !bytes.Equal(got, data) {
		for i := range data {
			if got[i] != data[i] {
				t.Fatalf("backing differs after sync at %d (len %d vs %d): got %x want %x; pool view equal: %v", i, len(got), len(data), got[i:i+16], data[i:i+16], bytes.Equal(readAll(t, mustOpen(t, fs, "ckpt", os.O_RDONLY)), data))
			}
		}
		t.Fatalf("backing differs after sync: len %d vs %d", len(got), len(data))
	}
	if d := fs.Stats().DirtyBytes; d != 0 {
		t.Fatalf("dirty bytes after sync: %d", d)
	}
}

func TestAppendAndFlags(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	h := mustOpen(t, fs, "log", os.O_WRONLY|os.O_CREATE|os.O_APPEND)
	h.WriteAt([]byte("one\n"), 0)
	h.WriteAt([]byte("two\n"), 0)
	if _, err := h.ReadAt(make([]byte, 4), 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("read on O_WRONLY: %v", err)
	}
	h.Release()
	if _, _, err := fs.Open("log", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644, Cred{}); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("O_EXCL on existing: %v", err)
	}
	h = mustOpen(t, fs, "log", os.O_RDONLY)
	if got := string(readAll(t, h)); got != "one\ntwo\n" {
		t.Fatalf("append: %q", got)
	}
	h.Release()
	h = mustOpen(t, fs, "log", os.O_RDWR|os.O_TRUNC)
	if st, _ := h.Getattr(); st.Size != 0 {
		t.Fatalf("O_TRUNC left size %d", st.Size)
	}
	h.Release()
}

func TestCloseDrains(t *testing.T) {
	dir := t.TempDir()
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 64 * testPage}}, OrganizerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fs, err := New(pool, Options{Backing: dir, PageSize: testPage, BackingBandwidth: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := range 20 {
		name := "f" + string(rune('a'+i))
		data := make([]byte, rand.Intn(3*testPage))
		rand.Read(data)
		want[name] = data
		h, _, err := fs.Open(name, os.O_WRONLY|os.O_CREATE, 0o600, Cred{})
		if err != nil {
			t.Fatal(err)
		}
		h.WriteAt(data, 0)
		h.Flush()
		h.Release()
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: after Close backing differs (err %v)", name, err)
		}
	}
}

func TestBadPaths(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
	for _, p := range []string{"/abs", "../up", "a/../b", "a//b", ".."} {
		if _, err := fs.Lstat(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Lstat(%q) = %v, want EINVAL", p, err)
		}
	}
}

func FuzzParseDirents(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24, 0, 8, 'a', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := parseDirents(b, []DirEntry{{Name: "prior"}})
		if err != nil && out != nil {
			t.Fatal("error with a partial result")
		}
		if err == nil && len(out)-1 > len(b)/19 {
			t.Fatal("more entries than bytes allow")
		}
	})
}

// TestIdleFilesBounded: clean files nobody holds are retired past the
// bound (fds and pages released) and read back from the backing store.
func TestIdleFilesBounded(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.MaxIdleFiles = 3 })
	want := map[string][]byte{}
	for i := range 10 {
		name := "small" + string(rune('0'+i))
		data := bytes.Repeat([]byte{byte('a' + i)}, 1000+i)
		want[name] = data
		h := mustOpen(t, fs, name, os.O_RDWR|os.O_CREATE)
		h.WriteAt(data, 0)
		if err := h.Fsync(false); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	if n := len(fs.pool.Buckets()); n > 3 {
		t.Fatalf("%d buckets cached, bound is 3", n)
	}
	for name, data := range want {
		h := mustOpen(t, fs, name, os.O_RDONLY)
		if got := readAll(t, h); !bytes.Equal(got, data) {
			t.Fatalf("%s reads %q", name, got)
		}
		h.Release()
	}
}

// TestCacheValid: an open after another node rewrote the backing file
// tells the door to drop its cache.
func TestCacheValid(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	os.WriteFile(filepath.Join(fs.backing, "c"), []byte("one"), 0o644)
	h := mustOpen(t, fs, "c", os.O_RDONLY)
	if h.CacheValid() {
		t.Fatal("first open vouched for a cache it has no history of")
	}
	readAll(t, h)
	h.Release()
	h = mustOpen(t, fs, "c", os.O_RDONLY)
	if !h.CacheValid() {
		t.Fatal("unchanged file reported stale")
	}
	h.Release()
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(filepath.Join(fs.backing, "c"), []byte("two!"), 0o644)
	h = mustOpen(t, fs, "c", os.O_RDONLY)
	defer h.Release()
	if h.CacheValid() {
		t.Fatal("externally changed file reported valid")
	}
}

// TestSetgidDirectory: entries made in a set-group-ID directory take its
// group; new directories keep the bit (as ext4 and tmpfs do).
func TestSetgidDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	root := Cred{}
	if err := fs.Mkdir("d", 0o775, root); err != nil {
		t.Fatal(err)
	}
	gid, mode := uint32(4242), uint32(0o2775)
	if _, err := fs.Setattr("d", nil, SetAttr{Gid: &gid, Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, fs, "d/f", os.O_RDWR|os.O_CREATE)
	h.Release()
	if err := fs.Mkdir("d/s", 0o755, root); err != nil {
		t.Fatal(err)
	}
	f, _ := fs.Lstat("d/f")
	s, _ := fs.Lstat("d/s")
	if f.Gid != gid || s.Gid != gid {
		t.Fatalf("gids %d %d, want %d", f.Gid, s.Gid, gid)
	}
	if s.Mode&0o7777 != 0o2755 || f.Mode&0o7777 != 0o644 {
		t.Fatalf("modes %o %o, want 2755 644", s.Mode&0o7777, f.Mode&0o7777)
	}
}

// TestSequentialWriteNotAmplified: a page filled by many small sequential
// writes is written back about once, not once per write.
func TestSequentialWriteNotAmplified(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	h := mustOpen(t, fs, "seq", os.O_WRONLY|os.O_CREATE)
	defer h.Release()
	chunk := make([]byte, 4096)
	const total = 32 * testPage
	for off := 0; off < total; off += len(chunk) {
		if _, err := h.WriteAt(chunk, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	if got := fs.Stats().FlushedBytes; got > total*3/2 {
		t.Fatalf("wrote back %d bytes for a %d-byte file", got, total)
	}
}

func TestReadPinned(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	h := mustOpen(t, fs, "p", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := make([]byte, testPage+100)
	rand.Read(data)
	h.WriteAt(data, 0)
	for _, c := range []struct {
		off  int64
		n    int
		want int // -1: not served
	}{
		{0, testPage, testPage},
		{10, 100, 100},
		{testPage, testPage, 100}, // clipped at EOF
		{testPage - 10, 20, -1},   // spans two pages
		{testPage + 100, 10, -1},  // at EOF
	} {
		fd, off, n, release, ok := h.ReadPinned(c.off, c.n)
		if !ok {
			if c.want != -1 {
				t.Errorf("ReadPinned(%d,%d) not served", c.off, c.n)
			}
			continue
		}
		got := make([]byte, n)
		m, err := unix.Pread(fd, got, off)
		release()
		if c.want == -1 || n != c.want || m != n || err != nil || !bytes.Equal(got, data[c.off:c.off+int64(n)]) {
			t.Errorf("ReadPinned(%d,%d) = %d bytes (pread %d, %v), want %d", c.off, c.n, n, m, err, c.want)
		}
	}
}

// TestWritableReopenWhileReading: a file first opened read-only (its
// backing file could only be opened O_RDONLY: here a running executable,
// ETXTBSY) and then read-write swaps the backing fd; readers of the first
// handle must neither race with the swap nor fail on the old fd.
func TestWritableReopenWhileReading(t *testing.T) {
	fs := newTestFS(t, Writeback, 8*testPage, 8*testPage, nil)
	exe := filepath.Join(fs.backing, "prog")
	src, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip(err)
	}
	if err := os.WriteFile(exe, src, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	ro := mustOpen(t, fs, "prog", os.O_RDONLY)
	defer ro.Release()
	cmd.Process.Kill()
	cmd.Wait()

	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if _, err := ro.Getattr(); err != nil {
				errc <- err
				return
			}
			if _, err := ro.ReadAt(buf, int64(i%len(src))); err != nil {
				errc <- err
				return
			}
		}
	}()
	time.Sleep(5 * time.Millisecond)
	rw := mustOpen(t, fs, "prog", os.O_RDWR)
	if _, err := rw.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("read through the read-only handle: %v", err)
	}
	if err := rw.Fsync(false); err != nil {
		t.Fatal(err)
	}
	rw.Release()
	got, _ := os.ReadFile(exe)
	if len(got) != len(src) || got[0] != 'x' {
		t.Fatalf("backing file not written back")
	}
}

// TestWritePastMaxSize: a write ending past the largest offset the pool
// can hold fails like Linux does for a file too large (EFBIG), not EIO,
// and an offset near MaxInt64 does not overflow into a write.
func TestWritePastMaxSize(t *testing.T) {
	fs := newTestFS(t, Writeback, 8*testPage, 8*testPage, nil)
	h := mustOpen(t, fs, "big", os.O_CREATE|os.O_RDWR)
	defer h.Release()
	for _, off := range []int64{1 << 61, 1<<63 - 2} {
		if _, err := h.WriteAt([]byte("abc"), off); !errors.Is(err, unix.EFBIG) {
			t.Errorf("write at %d: %v, want EFBIG", off, err)
		}
		if _, err := h.WriteInside([]byte("abc"), off); !errors.Is(err, unix.EFBIG) && !errors.Is(err, ErrPastEOF) {
			t.Errorf("write inside at %d: %v, want EFBIG or ErrPastEOF", off, err)
		}
	}
	if st, _ := h.Getattr(); st.Size != 0 {
		t.Errorf("size %d after failed writes", st.Size)
	}
}

// TestFailedTruncateKeepsData: a truncate the backing file refuses
// (immutable: EPERM) fails and leaves the file, dirty pages included,
// as it was (the pool's pages were dropped first).
func TestFailedTruncateKeepsData(t *testing.T) {
	// Just written, the pages stay dirty: the background write-back leaves
	// a file alone for flushDelay while the pool is not under pressure.
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	h := mustOpen(t, fs, "imm", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := bytes.Repeat([]byte("d"), 2*testPage)
	h.WriteAt(data, 0)
	p := filepath.Join(fs.backing, "imm")
	if out, err := exec.Command("chattr", "+i", p).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s", err, out)
	}
	defer exec.Command("chattr", "-i", p).Run()
	zero := int64(0)
	if _, err := fs.Setattr("imm", h, SetAttr{Size: &zero}); err == nil {
		t.Fatal("truncate of an immutable backing file succeeded")
	}
	if got := readAll(t, h); !bytes.Equal(got, data) {
		t.Fatalf("after a failed truncate the file (%d bytes) differs from the %d bytes written", len(got), len(data))
	}
}

// TestDirtyIdleFilesRetiredAfterWriteBack: files released while dirty are
// passed over by the idle bound; once written back they are retired too.
func TestDirtyIdleFilesRetiredAfterWriteBack(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.MaxIdleFiles = 3 })
	for i := range 10 {
		h := mustOpen(t, fs, fmt.Sprintf("dirty%d", i), os.O_RDWR|os.O_CREATE)
		h.WriteAt([]byte("not yet written back"), 0)
		h.Release()
	}
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(fs.pool.Buckets()); n > 3 {
		t.Fatalf("%d buckets cached after the write-back, bound is 3", n)
	}
}

// TestOpenDuringThrottledWriteBack: the first open of an idle file whose
// write-back pass is in progress (throttled by backing_bandwidth, holding
// the file's backing lock for the whole pass) returns before the pass
// ends: a file with data not yet written back is not revalidated against
// the backing file, so the open does not wait for the lock.
func TestOpenDuringThrottledWriteBack(t *testing.T) {
	const bw = 256 << 10
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.BackingBandwidth = bw })
	data := make([]byte, 16*testPage) // 1 MiB: about 3 s past the limiter's 1 s burst
	rand.Read(data)
	h := mustOpen(t, fs, "ckpt", os.O_RDWR|os.O_CREATE)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	h.Flush()
	h.Release() // idle: the next open is a first open, which revalidates
	synced := make(chan error, 1)
	go func() { synced <- fs.Sync() }()
	for fs.Stats().FlushedBytes == 0 {
		select {
		case err := <-synced:
			t.Fatalf("the pass ended (%v) before the test could open during it", err)
		case <-time.After(time.Millisecond):
		}
	}
	opened := make(chan *Handle, 1)
	go func() { opened <- mustOpen(t, fs, "ckpt", os.O_RDONLY) }()
	select {
	case h := <-opened:
		if got := readAll(t, h); !bytes.Equal(got, data) {
			t.Errorf("read during the pass: %d bytes, differ from what was written", len(got))
		}
		h.Release()
	case err := <-synced:
		t.Fatalf("the open waited for the whole write-back pass (sync: %v)", err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
}
