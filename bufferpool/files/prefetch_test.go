package files

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// backingFile writes a file of n pages of random bytes straight into the
// backing directory (cold: nothing of it is in the pool).
func backingFile(t *testing.T, fs *testFS, name string, pages int) []byte {
	t.Helper()
	data := make([]byte, pages*testPage)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(fs.backing, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// prefetchIdle reports whether no prefetch is queued or running.
func prefetchIdle(fs *testFS) bool { return fs.prefetch.inflight.Load() == 0 }

func readAt(t *testing.T, h *Handle, off int64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	got, err := h.ReadAt(buf, off)
	if err != nil || got != n {
		t.Fatalf("read %d at %d: %d, %v", n, off, got, err)
	}
	return buf
}

func TestReadAheadDetector(t *testing.T) {
	const ps = 1 << 20
	type read struct {
		off  int64
		n    int
		want raPlan
	}
	cases := []struct {
		name  string
		reads []read
	}{
		{"sequential from 0 grows the window", []read{
			{0, 128 << 10, raPlan{first: 1, count: 2}},
			{128 << 10, 896 << 10, raPlan{}},
			{ps, ps, raPlan{first: 3, count: 3}}, // the marker: grow to 4
			{2 * ps, ps, raPlan{}},
			{3 * ps, ps, raPlan{first: 6, count: 6}}, // grow to 8
			{4 * ps, ps, raPlan{}},
			{5 * ps, ps, raPlan{}},
			{6 * ps, ps, raPlan{first: 12, count: 11}}, // grow to 16
		}},
		{"sequential elsewhere starts at the second read", []read{
			{10 * ps, 4096, raPlan{}},
			{10*ps + 4096, 4096, raPlan{first: 11, count: 2}},
		}},
		{"window capped", []read{
			{0, ps, raPlan{first: 1, count: 2}},
			{ps, ps, raPlan{first: 3, count: 3}},
			{2 * ps, ps, raPlan{}},
			{3 * ps, ps, raPlan{first: 6, count: 2}}, // capped at 4 pages ahead
		}},
		{"random never", []read{
			{37 * ps, 4096, raPlan{}},
			{5 * ps, 4096, raPlan{}},
			{50 * ps, 4096, raPlan{}},
			{12 * ps, 4096, raPlan{}},
			{29 * ps, 4096, raPlan{}},
			{3 * ps, 4096, raPlan{}},
		}},
		{"strided after three reads", []read{
			{ps, 4096, raPlan{}},
			{4 * ps, 4096, raPlan{}},
			{7 * ps, 4096, raPlan{first: 10 * ps, step: 3 * ps, span: 4096, count: 2}},
			{10 * ps, 4096, raPlan{first: 16 * ps, step: 3 * ps, span: 4096, count: 3}},
			{13 * ps, 4096, raPlan{}},
		}},
		{"a repeated read changes nothing", []read{
			{ps, 4096, raPlan{}},
			{4 * ps, 4096, raPlan{}},
			{4 * ps, 4096, raPlan{}},
			{7 * ps, 4096, raPlan{first: 10 * ps, step: 3 * ps, span: 4096, count: 2}},
		}},
		{"a reader that skips what it hit in shared memory stays sequential", []read{
			{0, 4096, raPlan{first: 1, count: 2}},
			{3 * ps, 4096, raPlan{first: 4, count: 4}},
			{8 * ps, 4096, raPlan{first: 9, count: 8}},
			{17 * ps, 4096, raPlan{first: 18, count: 16}},
			{60 * ps, 4096, raPlan{}},
		}},
		{"strided, then sequential", []read{
			{ps, 4096, raPlan{}},
			{4 * ps, 4096, raPlan{}},
			{7 * ps, 4096, raPlan{first: 10 * ps, step: 3 * ps, span: 4096, count: 2}},
			{7*ps + 4096, 4096, raPlan{first: 8, count: 2}},
		}},
		{"random resets a sequential window", []read{
			{0, ps, raPlan{first: 1, count: 2}},
			{40 * ps, 4096, raPlan{}},
			{90 * ps, 4096, raPlan{}},
			{17 * ps, 4096, raPlan{}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r readAhead
			maxPages := int64(32)
			if c.name == "window capped" {
				maxPages = 4
			}
			for k, rd := range c.reads {
				got := r.observe(rd.off, rd.n, ps, maxPages)
				if got.count == 0 && rd.want.count == 0 {
					continue
				}
				if got != rd.want {
					t.Fatalf("read %d (%d bytes at %d): plan %+v, want %+v", k, rd.n, rd.off, got, rd.want)
				}
			}
		})
	}
}

// TestReadAheadSequential: a cold sequential read stages pages ahead
// (counted in Stats), reads them as prefetch hits, and returns the
// backing file's bytes; a random reader queues nothing.
func TestReadAheadSequential(t *testing.T) {
	fs := newTestFS(t, Writeback, 256*testPage, 256*testPage, nil)
	data := backingFile(t, fs, "seq", 64)
	h := mustOpen(t, fs, "seq", os.O_RDONLY)
	defer h.Release()
	const chunk = 16 << 10
	got := append(readAt(t, h, 0, chunk), readAt(t, h, chunk, chunk)...)
	waitFor(t, "pages 1 and 2 staged ahead", func() bool { return fs.bucketHas(h, 1) && fs.bucketHas(h, 2) })
	for off := int64(2 * chunk); off < int64(len(data)); off += chunk {
		got = append(got, readAt(t, h, off, chunk)...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential read differs from the backing file")
	}
	waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
	st := fs.Stats()
	if st.PrefetchedPages < 2 || st.PrefetchHits < 2 || st.PrefetchedBytes != st.PrefetchedPages*testPage {
		t.Fatalf("prefetched %d pages (%d bytes), %d hits: want at least the first window read as hits",
			st.PrefetchedPages, st.PrefetchedBytes, st.PrefetchHits)
	}
	if st.PrefetchHits > st.PrefetchedPages {
		t.Fatalf("%d prefetch hits > %d prefetched pages", st.PrefetchHits, st.PrefetchedPages)
	}

	backingFile(t, fs, "random", 64)
	r := mustOpen(t, fs, "random", os.O_RDONLY)
	defer r.Release()
	before := fs.prefetch.queued.Load()
	for _, p := range []int64{37, 5, 50, 12, 29, 3, 60, 20, 44, 8, 33, 1} {
		readAt(t, r, p*testPage+100, 4096)
	}
	if q := fs.prefetch.queued.Load() - before; q != 0 {
		t.Fatalf("a random reader queued %d pages for read-ahead", q)
	}
}

func (fs *testFS) bucketHas(h *Handle, i int64) bool { return h.f.bucket.HasPage(i) }

// TestReadAheadStrided: three reads at a constant stride stage the next
// targets, and only them.
func TestReadAheadStrided(t *testing.T) {
	fs := newTestFS(t, Writeback, 256*testPage, 256*testPage, nil)
	data := backingFile(t, fs, "strided", 64)
	h := mustOpen(t, fs, "strided", os.O_RDONLY)
	defer h.Release()
	for _, p := range []int64{1, 4, 7} {
		readAt(t, h, p*testPage, 4096)
	}
	waitFor(t, "pages 10 and 13 staged ahead", func() bool { return fs.bucketHas(h, 10) && fs.bucketHas(h, 13) })
	waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
	for _, p := range []int64{2, 3, 5, 6, 8, 9, 11, 12} {
		if fs.bucketHas(h, p) {
			t.Fatalf("page %d, off the stride, was staged in", p)
		}
	}
	if st := fs.Stats(); st.PrefetchedPages != 2 {
		t.Fatalf("strided: %d pages prefetched, want 2", st.PrefetchedPages)
	}
	if got := readAt(t, h, 10*testPage, 4096); !bytes.Equal(got, data[10*testPage:10*testPage+4096]) {
		t.Fatal("prefetched page differs from the backing file")
	}
	if st := fs.Stats(); st.PrefetchHits != 1 {
		t.Fatalf("strided: %d prefetch hits, want 1", st.PrefetchHits)
	}
}

// TestReadAheadRacesWriteAndTruncate: pages being staged ahead while
// another handle overwrites or truncates the file never bring back the
// old bytes.
func TestReadAheadRacesWriteAndTruncate(t *testing.T) {
	fs := newTestFS(t, Writeback, 512*testPage, 512*testPage, nil)
	const pages = 8
	newer := bytes.Repeat([]byte{0xB}, pages*testPage)
	for it := range 30 {
		name := "race" + string(rune('a'+it%26)) + string(rune('0'+it/26))
		backingFile(t, fs, name, pages)
		r := mustOpen(t, fs, name, os.O_RDONLY)
		w := mustOpen(t, fs, name, os.O_RDWR)
		readAt(t, r, 0, 4096)
		readAt(t, r, 4096, 4096) // read-ahead of pages 1 and 2 starts
		want := newer
		if it%2 == 0 {
			if _, err := w.WriteAt(newer[testPage:], testPage); err != nil {
				t.Fatal(err)
			}
			if err := w.Fsync(false); err != nil {
				t.Fatal(err)
			}
			want = append(readAt(t, r, 0, testPage), newer[testPage:]...)
		} else {
			if err := w.f.truncate(0); err != nil {
				t.Fatal(err)
			}
			if err := w.f.truncate(pages * testPage); err != nil {
				t.Fatal(err)
			}
			want = make([]byte, pages*testPage)
		}
		waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
		if got := readAt(t, r, 0, pages*testPage); !bytes.Equal(got, want) {
			t.Fatalf("iteration %d (%s): read after the race differs: a stale page was staged in", it, map[bool]string{true: "overwrite", false: "truncate"}[it%2 == 0])
		}
		r.Release()
		w.Release()
	}
}

// TestReadAheadNeverEvictsForItself: in a pool full of dirty pages the
// read-ahead stages nothing, the dirty pages stay, and the reads are
// still right (served from the backing file).
func TestReadAheadNeverEvictsForItself(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
	store := newFaultStore()
	fs.store = store
	store.set("write", unix.EIO)
	t.Cleanup(func() { store.set("write", nil) }) // before fs.Close: let it drain
	d := mustOpen(t, fs, "dirty", os.O_RDWR|os.O_CREATE)
	defer d.Release()
	if _, err := d.WriteAt(make([]byte, 8*testPage), 0); err != nil {
		t.Fatal(err)
	}
	data := backingFile(t, fs, "cold", 16)
	h := mustOpen(t, fs, "cold", os.O_RDONLY)
	defer h.Release()
	var got []byte
	for off := int64(0); off < int64(len(data)); off += testPage {
		got = append(got, readAt(t, h, off, testPage)...)
	}
	waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
	if !bytes.Equal(got, data) {
		t.Fatal("read from a full pool differs from the backing file")
	}
	st := fs.Stats()
	if fs.prefetch.queued.Load() == 0 {
		t.Fatal("the sequential reader queued no read-ahead: the test proves nothing")
	}
	if st.PrefetchedPages != 0 || st.DirtyBytes != 8*testPage {
		t.Fatalf("full pool: %d pages prefetched, %d dirty bytes left (want 0 and %d)", st.PrefetchedPages, st.DirtyBytes, 8*testPage)
	}
	for _, ts := range st.Pool.Tiers {
		if ts.Used > ts.Capacity || ts.Evicted != 0 {
			t.Fatalf("tier %s: used %d of %d, %d evicted", ts.Name, ts.Used, ts.Capacity, ts.Evicted)
		}
	}
}

// TestReadAheadOff: Options.Readahead < 0 stages nothing ahead.
func TestReadAheadOff(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.Readahead = -1 })
	data := backingFile(t, fs, "seq", 16)
	h := mustOpen(t, fs, "seq", os.O_RDONLY)
	defer h.Release()
	if got := readAll(t, h); !bytes.Equal(got, data) {
		t.Fatal("read differs from the backing file")
	}
	if q := fs.prefetch.queued.Load(); q != 0 || fs.Stats().PrefetchedPages != 0 {
		t.Fatalf("read-ahead off: %d pages queued", q)
	}
}

// TestReadAheadWithPinnedReads reads a cold file the way the FUSE door
// does (ReadPinned, else ReadAt; the pin released after the reply) while
// the read-ahead stages the next pages in: a pinned read holds the
// bucket's read lock, so the read-ahead must not take it again under it
// (a stage-in waiting for the write lock in between deadlocked).
func TestReadAheadWithPinnedReads(t *testing.T) {
	fs := newTestFS(t, Writeback, 512*testPage, 512*testPage, nil)
	const pages = 256
	data := backingFile(t, fs, "pinned", pages)
	h := mustOpen(t, fs, "pinned", os.O_RDONLY)
	defer h.Release()
	const chunk = 16 << 10
	buf := make([]byte, chunk)
	got := make([]byte, 0, len(data))
	for off := int64(0); off < int64(len(data)); off += chunk {
		if fd, fdOff, n, release, ok := h.ReadPinned(off, chunk); ok {
			if _, err := unix.Pread(fd, buf[:n], fdOff); err != nil {
				t.Fatal(err)
			}
			release()
			got = append(got, buf[:n]...)
			continue
		}
		got = append(got, readAt(t, h, off, chunk)...)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read differs from the backing file")
	}
}
