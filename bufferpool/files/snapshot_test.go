package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// snapRead returns the bytes of file sub of snapshot name.
func snapRead(t *testing.T, fs *testFS, name, sub string) []byte {
	t.Helper()
	e, rd, err := fs.SnapshotEntry(name, sub)
	if err != nil || rd == nil {
		t.Fatalf("snapshot %s entry %s: %v (reader %v)", name, sub, err, rd != nil)
	}
	buf := make([]byte, e.Stat.Size+100)
	n, err := rd.ReadAt(buf, 0)
	if err != nil {
		t.Fatalf("read %s of snapshot %s: %v", sub, name, err)
	}
	return buf[:n]
}

func poolUsed(fs *testFS) int64 {
	var n int64
	for _, ts := range fs.pool.Stats().Tiers {
		n += ts.Used
	}
	return n
}

// TestSnapshotModel: random writes, appends, truncates, punches, write-
// backs and evictions of a few files, with snapshots taken at random
// points; every snapshot reads what the files held when it was taken,
// the live files what a plain model says, and deleting the snapshots
// gives back exactly the bytes their copies held.
func TestSnapshotModel(t *testing.T) {
	fs := newTestFS(t, Writeback, 64<<20, 64<<20, nil)
	rng := rand.New(rand.NewSource(7))
	names := []string{"d/a", "d/b", "d/sub/c"}
	if err := fs.Mkdir("d", 0o755, Cred{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Mkdir("d/sub", 0o700, Cred{}); err != nil {
		t.Fatal(err)
	}
	model := map[string][]byte{}
	hs := map[string]*Handle{}
	for _, n := range names {
		hs[n] = mustOpen(t, fs, n, unix.O_RDWR|unix.O_CREAT)
		model[n] = nil
	}
	defer func() {
		for _, h := range hs {
			h.Release()
		}
	}()
	type snap struct {
		name  string
		files map[string][]byte
	}
	var snaps []snap
	baseline := poolUsed(fs)
	for op := 0; op < 300; op++ {
		n := names[rng.Intn(len(names))]
		h := hs[n]
		switch k := rng.Intn(10); {
		case k < 4: // write somewhere inside or just past the end
			off := rng.Int63n(int64(len(model[n])) + 2*testPage)
			data := make([]byte, 1+rng.Intn(3*testPage))
			rng.Read(data)
			if _, err := h.WriteAt(data, off); err != nil {
				t.Fatalf("op %d write %s: %v", op, n, err)
			}
			if end := off + int64(len(data)); end > int64(len(model[n])) {
				model[n] = append(model[n], make([]byte, end-int64(len(model[n])))...)
			}
			copy(model[n][off:], data)
		case k < 6:
			size := rng.Int63n(int64(len(model[n])) + testPage)
			if _, err := fs.Setattr(n, h, SetAttr{Size: &size}); err != nil {
				t.Fatalf("op %d truncate %s: %v", op, n, err)
			}
			if size < int64(len(model[n])) {
				model[n] = model[n][:size]
			} else {
				model[n] = append(model[n], make([]byte, size-int64(len(model[n])))...)
			}
		case k == 6 && len(model[n]) > 0:
			off := rng.Int63n(int64(len(model[n])))
			ln := 1 + rng.Int63n(2*testPage)
			if err := h.Allocate(off, ln, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE); err != nil {
				t.Fatalf("op %d punch %s: %v", op, n, err)
			}
			clear(model[n][off:min(off+ln, int64(len(model[n])))])
		case k == 7:
			if err := fs.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Evict(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		case k == 8 && len(snaps) < 4:
			name := fmt.Sprintf("s%d", len(snaps))
			in, err := fs.CreateSnapshot(name, "d")
			if err != nil {
				t.Fatal(err)
			}
			if in.Files != 3 || in.Dirs != 2 {
				t.Fatalf("snapshot %s: %+v", name, in)
			}
			s := snap{name, map[string][]byte{}}
			for _, f := range names {
				s.files[f] = bytes.Clone(model[f])
			}
			snaps = append(snaps, s)
		}
		if op%25 != 24 {
			continue
		}
		for _, s := range snaps {
			for _, f := range names {
				got := snapRead(t, fs, s.name, f[len("d/"):])
				if !bytes.Equal(got, s.files[f]) {
					t.Fatalf("op %d: snapshot %s of %s: %d bytes, want %d (first difference at %d)", op, s.name, f,
						len(got), len(s.files[f]), firstDiff(got, s.files[f]))
				}
			}
		}
		for _, f := range names {
			if got := readAll(t, hs[f]); !bytes.Equal(got, model[f]) {
				t.Fatalf("op %d: live %s differs from the model at %d", op, f, firstDiff(got, model[f]))
			}
		}
	}
	if len(snaps) == 0 {
		t.Fatal("no snapshot taken")
	}
	// The snapshots' attributes are the directories' at create.
	if e, _, err := fs.SnapshotEntry(snaps[0].name, "sub"); err != nil || e.Stat.Mode&0o777 != 0o700 || !e.IsDir() {
		t.Fatalf("sub in the snapshot: %v %o", err, e.Stat.Mode)
	}
	var held int64
	for _, in := range fs.Snapshots() {
		held += in.CopiedBytes
	}
	if held == 0 {
		t.Fatal("no page was copied: the model changed nothing a snapshot shared")
	}
	// Give back: exactly the copies' bytes.
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	before := poolUsed(fs)
	for _, s := range snaps {
		if err := fs.DeleteSnapshot(s.name); err != nil {
			t.Fatal(err)
		}
	}
	after := poolUsed(fs)
	if before-after != held {
		t.Fatalf("delete gave back %d bytes, the snapshots held %d (pool used %d -> %d, at start %d)", before-after, held, before, after, baseline)
	}
	if _, _, err := fs.SnapshotEntry(snaps[0].name, ""); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("deleted snapshot still answers: %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSnapshotEdges: names, errors, unlinked files, no room for the
// copies, the shim's grant, export.
func TestSnapshotEdges(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
	h := mustOpen(t, fs, "f", unix.O_RDWR|unix.O_CREAT)
	defer h.Release()
	orig := bytes.Repeat([]byte("x"), 3*testPage)
	if _, err := h.WriteAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", ".x", "a/b", "a\x00"} {
		if _, err := fs.CreateSnapshot(bad, ""); !errors.Is(err, unix.EINVAL) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if _, err := fs.CreateSnapshot("s", "nope"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("missing path: %v", err)
	}
	if _, err := fs.CreateSnapshot("s", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.CreateSnapshot("s", ""); !errors.Is(err, ErrSnapshotExists) {
		t.Errorf("twice: %v", err)
	}
	// No read-write shim map for a file a snapshot shares.
	if _, _, err := h.ShimMaps(true, nil); !errors.Is(err, unix.EBUSY) {
		t.Errorf("read-write shim map of a snapshotted file: %v", err)
	}
	// The copies do not fit (the pool holds 8 pages, the live file 3 and
	// the next write needs 4 copies more than it has room for): the
	// write fails, and the file and the snapshot are unchanged.
	big := bytes.Repeat([]byte("y"), 3*testPage)
	h2 := mustOpen(t, fs, "g", unix.O_RDWR|unix.O_CREAT)
	if _, err := h2.WriteAt(big, 0); err != nil {
		t.Fatal(err)
	}
	h2.Release()
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.CreateSnapshot("t", ""); err != nil {
		t.Fatal(err)
	}
	_, err := h.WriteAt(bytes.Repeat([]byte("z"), 3*testPage), 0)
	if err == nil {
		// Room was found (clean pages evicted): then both snapshots
		// must hold the old bytes.
		t.Log("the copies fitted")
		if got := readAll(t, h); !bytes.Equal(got, bytes.Repeat([]byte("z"), 3*testPage)) {
			t.Fatal("live f does not hold the write")
		}
	} else if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write without room for the copies: %v", err)
	}
	for _, s := range []string{"s", "t"} {
		if got := snapRead(t, fs, s, "f"); !bytes.Equal(got, orig) {
			t.Fatalf("snapshot %s of f changed", s)
		}
	}
	// An unlinked file stays readable in the snapshot.
	if err := fs.Unlink("g"); err != nil {
		t.Fatal(err)
	}
	if got := snapRead(t, fs, "t", "g"); !bytes.Equal(got, big) {
		t.Fatal("unlinked g changed in the snapshot")
	}
	// Export writes the snapshot's bytes and modes.
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := fs.ExportSnapshot("t", dir); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "g")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("exported g: %v", err)
	}
	if _, err := fs.ExportSnapshot("t", dir); !errors.Is(err, unix.ENOTEMPTY) {
		t.Fatalf("export into a non-empty dir: %v", err)
	}
	for _, s := range []string{"s", "t"} {
		if err := fs.DeleteSnapshot(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.DeleteSnapshot("s"); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, _, err := h.ShimMaps(true, nil); err != nil {
		t.Errorf("read-write shim map after the snapshots went: %v", err)
	}
}

// TestSnapshotConcurrent: writers and truncates run while snapshots are
// taken, read and deleted. A snapshot read right after create must stay
// the same, byte for byte, while the writers go on; nothing deadlocks
// (run with -race in make test).
func TestSnapshotConcurrent(t *testing.T) {
	fs := newTestFS(t, Writeback, 64<<20, 64<<20, nil)
	const size = 8 * testPage
	h := mustOpen(t, fs, "f", unix.O_RDWR|unix.O_CREAT)
	defer h.Release()
	if _, err := h.WriteAt(make([]byte, size), 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for w := range 3 {
		go func() {
			rng := rand.New(rand.NewSource(int64(w)))
			buf := make([]byte, testPage/2)
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				rng.Read(buf)
				var err error
				if w == 2 && rng.Intn(8) == 0 {
					sz := rng.Int63n(size)
					_, err = fs.Setattr("f", h, SetAttr{Size: &sz})
				} else {
					_, err = h.WriteAt(buf, rng.Int63n(size))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for round := range 20 {
		name := fmt.Sprintf("c%d", round)
		if _, err := fs.CreateSnapshot(name, ""); err != nil {
			t.Fatal(err)
		}
		first := snapRead(t, fs, name, "f")
		for range 3 {
			if again := snapRead(t, fs, name, "f"); !bytes.Equal(again, first) {
				t.Fatalf("snapshot %s changed under the writers at %d", name, firstDiff(again, first))
			}
		}
		if round%2 == 0 {
			// Deleted under a reader: its reads end with ESTALE.
			_, rd, err := fs.SnapshotEntry(name, "f")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error)
			go func() {
				buf := make([]byte, size)
				for {
					if _, err := rd.ReadAt(buf, 0); err != nil {
						done <- err
						return
					}
				}
			}()
			if err := fs.DeleteSnapshot(name); err != nil {
				t.Fatal(err)
			}
			if err := <-done; !errors.Is(err, unix.ESTALE) {
				t.Fatalf("read of a deleted snapshot: %v, want ESTALE", err)
			}
		}
	}
	close(stop)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotOneFile: a snapshot of a single file, unlinked afterwards:
// it is the snapshot's root, counted as kept by it alone, and exported
// under its name.
func TestSnapshotOneFile(t *testing.T) {
	fs := newTestFS(t, Writeback, 16<<20, 16<<20, nil)
	h := mustOpen(t, fs, "one", unix.O_RDWR|unix.O_CREAT)
	data := bytes.Repeat([]byte("1"), testPage+5)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	h.Release()
	for _, n := range []string{"a", "b"} {
		if _, err := fs.CreateSnapshot(n, "one"); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Unlink("one"); err != nil {
		t.Fatal(err)
	}
	for _, in := range fs.Snapshots() {
		if in.Files != 1 || in.UnlinkedBytes != 2*testPage {
			t.Errorf("snapshot %+v: want 1 file and %d unlinked bytes", in, 2*testPage)
		}
	}
	if got := snapRead(t, fs, "a", ""); !bytes.Equal(got, data) {
		t.Fatal("snapshot of one file")
	}
	dir := filepath.Join(t.TempDir(), "x")
	if _, err := fs.ExportSnapshot("b", dir); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "one")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("exported one: %v", err)
	}
	before := poolUsed(fs)
	fs.DeleteSnapshot("a")
	if poolUsed(fs) != before {
		t.Error("deleting one of two snapshots freed the unlinked file")
	}
	fs.DeleteSnapshot("b")
	if got := before - poolUsed(fs); got != 2*testPage {
		t.Errorf("deleting the last snapshot gave back %d bytes, want %d", got, 2*testPage)
	}
}

// BenchmarkSnapshotOverwrite: overwriting a 4 MiB file (64 KiB pages)
// whole: in place (no snapshot), with a snapshot sharing every page
// (taken before each overwrite and deleted after, outside the timing:
// every page is copied once), and, as the cost of new pages, writing a
// new file of the same size (created and unlinked outside the timing).
func BenchmarkSnapshotOverwrite(b *testing.B) {
	for _, kind := range []string{"in-place", "snapshot", "new-file"} {
		b.Run(kind, func(b *testing.B) {
			fs := newBenchFS(b)
			h, _, err := fs.Open("f", unix.O_RDWR|unix.O_CREAT, 0o644, Cred{})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Release()
			data := make([]byte, 4<<20)
			if _, err := h.WriteAt(data, 0); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for range b.N {
				w := h
				b.StopTimer()
				switch kind {
				case "snapshot":
					if _, err := fs.CreateSnapshot("s", ""); err != nil {
						b.Fatal(err)
					}
				case "new-file":
					if w, _, err = fs.Open("g", unix.O_RDWR|unix.O_CREAT, 0o644, Cred{}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if _, err := w.WriteAt(data, 0); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				switch kind {
				case "snapshot":
					fs.DeleteSnapshot("s")
				case "new-file":
					w.Release()
					fs.Unlink("g")
				}
				b.StartTimer()
			}
		})
	}
}

func newBenchFS(b *testing.B) *FS {
	dir := b.TempDir()
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 64 << 20}}, OrganizerInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	backing := filepath.Join(dir, "backing")
	if err := os.Mkdir(backing, 0o755); err != nil {
		b.Fatal(err)
	}
	fs, err := New(pool, Options{Backing: backing, Mode: Scratch, PageSize: testPage, ScratchDir: filepath.Join(dir, "scratch")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		fs.Close()
		pool.Close()
	})
	return fs
}

// TestSnapshotNoRoom: in scratch mode (nothing can be written back or
// evicted) a pool of 5 pages holds a 3-page file; an overwrite under a
// snapshot needs 3 copies and finds room for 2: it fails with ErrNoSpace
// having changed nothing, and the snapshot and the file read as before.
// Deleting the snapshot lets the same write through.
func TestSnapshotNoRoom(t *testing.T) {
	fs := newTestFS(t, Scratch, 3*testPage, 2*testPage, func(o *Options) { o.NoSpaceWait = 100 * time.Millisecond })
	h := mustOpen(t, fs, "f", unix.O_RDWR|unix.O_CREAT)
	defer h.Release()
	orig := bytes.Repeat([]byte("o"), 3*testPage)
	if _, err := h.WriteAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.CreateSnapshot("s", ""); err != nil {
		t.Fatal(err)
	}
	n, err := h.WriteAt(bytes.Repeat([]byte("n"), 3*testPage), 0)
	if !errors.Is(err, ErrNoSpace) || n != 0 {
		t.Fatalf("overwrite without room for the copies: %d bytes, %v", n, err)
	}
	if got := readAll(t, h); !bytes.Equal(got, orig) {
		t.Fatal("the failed write changed the file")
	}
	if got := snapRead(t, fs, "s", "f"); !bytes.Equal(got, orig) {
		t.Fatal("the failed write changed the snapshot")
	}
	if err := fs.DeleteSnapshot("s"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(bytes.Repeat([]byte("n"), 3*testPage), 0); err != nil {
		t.Fatalf("the write after the snapshot went: %v", err)
	}
}

// TestSnapshotOneInstant: a writer stores counter k in file a, then in
// file b, over and over; every snapshot must hold a = b or a = b+1 (the
// files' data captured at one instant), never b ahead of a, which a
// capture file by file during the walk (a first) would allow.
func TestSnapshotOneInstant(t *testing.T) {
	fs := newTestFS(t, Writeback, 16<<20, 16<<20, nil)
	ha := mustOpen(t, fs, "a", unix.O_RDWR|unix.O_CREAT)
	hb := mustOpen(t, fs, "b", unix.O_RDWR|unix.O_CREAT)
	defer ha.Release()
	defer hb.Release()
	put := func(h *Handle, k uint64) error {
		_, err := h.WriteAt([]byte(fmt.Sprintf("%020d", k)), 0)
		return err
	}
	if err := errors.Join(put(ha, 0), put(hb, 0)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for k := uint64(1); ; k++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := errors.Join(put(ha, k), put(hb, k)); err != nil {
				done <- err
				return
			}
		}
	}()
	for round := range 30 {
		name := fmt.Sprintf("i%d", round)
		if _, err := fs.CreateSnapshot(name, ""); err != nil {
			t.Fatal(err)
		}
		var a, b uint64
		fmt.Sscanf(string(snapRead(t, fs, name, "a")), "%d", &a)
		fmt.Sscanf(string(snapRead(t, fs, name, "b")), "%d", &b)
		if a != b && a != b+1 {
			t.Fatalf("snapshot %s: a=%d b=%d, not one instant", name, a, b)
		}
		fs.DeleteSnapshot(name)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
