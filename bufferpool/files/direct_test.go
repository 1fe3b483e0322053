package files

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// dropCached writes the backing file name back and drops it from the page
// cache, as a file written long ago is.
func dropCached(t *testing.T, fs *testFS, name string) {
	t.Helper()
	f, err := os.Open(filepath.Join(fs.backing, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// TestStageInDirect: a page the page cache does not hold stages in with
// O_DIRECT, one it holds through the page cache, and both read the
// backing file's bytes (the last page short: the file ends inside it).
func TestStageInDirect(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.Readahead = -1 })
	data := backingFile(t, fs, "cold", 4)
	data = data[:len(data)-1000]
	if err := os.Truncate(filepath.Join(fs.backing, "cold"), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	dropCached(t, fs, "cold")
	warm := backingFile(t, fs, "warm", 2) // just written: in the page cache
	h := mustOpen(t, fs, "cold", os.O_RDONLY)
	defer h.Release()
	if got := readAll(t, h); !bytes.Equal(got, data) {
		t.Fatal("cold file read differs from the backing file")
	}
	st := fs.Stats()
	if st.StagedDirect != uint64(len(data)) {
		t.Fatalf("staged %d bytes with O_DIRECT of a cold file of %d (staged %d in all)", st.StagedDirect, len(data), st.StagedBytes)
	}
	w := mustOpen(t, fs, "warm", os.O_RDONLY)
	defer w.Release()
	if got := readAll(t, w); !bytes.Equal(got, warm) {
		t.Fatal("warm file read differs from the backing file")
	}
	if d := fs.Stats().StagedDirect - st.StagedDirect; d != 0 {
		t.Fatalf("a file in the page cache staged %d bytes with O_DIRECT", d)
	}
}

// TestStageInBuffered: Options.BufferedStageIn reads every stage-in
// through the page cache.
func TestStageInBuffered(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.BufferedStageIn = true })
	data := backingFile(t, fs, "cold", 4)
	dropCached(t, fs, "cold")
	h := mustOpen(t, fs, "cold", os.O_RDONLY)
	defer h.Release()
	if got := readAll(t, h); !bytes.Equal(got, data) {
		t.Fatal("read differs from the backing file")
	}
	if st := fs.Stats(); st.StagedDirect != 0 || st.StagedBytes == 0 {
		t.Fatalf("staged %d bytes, %d with O_DIRECT: want all buffered", st.StagedBytes, st.StagedDirect)
	}
}

// TestStageInOutsideBucketLock: while a demand stage-in waits for the
// backing file, a read of a page already resident is served (the old fill
// path held the bucket's lock across the backing read, and every read of
// the file waited behind it).
func TestStageInOutsideBucketLock(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.Readahead = -1 })
	data := backingFile(t, fs, "f", 4)
	h := mustOpen(t, fs, "f", os.O_RDONLY)
	defer h.Release()
	readAt(t, h, 0, 4096) // page 0 resident
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.f.stageHook = func(off int64) {
		if off == 2*testPage {
			once.Do(func() { close(entered); <-release })
		}
	}
	done := make(chan []byte)
	go func() {
		buf := make([]byte, testPage) // a whole page: staged, not read around
		h.ReadAt(buf, 2*testPage)
		done <- buf
	}()
	<-entered
	if got := readAt(t, h, 100, 4096); !bytes.Equal(got, data[100:4196]) {
		t.Fatal("resident page read wrong")
	}
	close(release)
	if got := <-done; !bytes.Equal(got, data[2*testPage:3*testPage]) {
		t.Fatal("staged page read wrong")
	}
}

// TestStageInRacesWriteBack: a read-ahead that read a page of the
// backing file before a write of the page, its write-back and the page's
// eviction (all before it installed the page) must not install what it
// read: the page's last write is what reads see afterwards. (A demand
// stage-in holds file.mu shared, which the write-back's snapshot waits
// for; the read-ahead holds nothing.)
func TestStageInRacesWriteBack(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	backingFile(t, fs, "f", 4)
	h := mustOpen(t, fs, "f", os.O_RDWR)
	defer h.Release()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.f.stageHook = func(off int64) {
		if off == 2*testPage {
			once.Do(func() { close(entered); <-release })
		}
	}
	readAt(t, h, 0, 4096)
	readAt(t, h, 4096, 4096) // read-ahead of pages 1 and 2
	<-entered                // the old bytes of page 2 are read, not installed
	newer := bytes.Repeat([]byte{0x5A}, testPage)
	if _, err := h.WriteAt(newer, 2*testPage); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(true); err != nil {
		t.Fatal(err)
	}
	h.f.bucket.DeletePage(2) // clean now: as an eviction would
	close(release)
	waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
	if got := readAt(t, h, 2*testPage, testPage); !bytes.Equal(got, newer) {
		t.Fatal("page 2 reads the bytes from before its last write: a stale read-ahead was installed")
	}
}

// TestStageInRacesWriters: cold readers, with the read-ahead on, in a
// pool too small for the file (pages are evicted and staged in again all
// the time), while writers overwrite pages, write them back and truncate:
// a stage-in must never install bytes older than the page's last write
// (a read that raced a write-back and an eviction). The file is checked
// against a model after each round.
func TestStageInRacesWriters(t *testing.T) {
	const pages = 24
	fs := newTestFS(t, Writeback, 8*testPage, 4*testPage, nil)
	model := backingFile(t, fs, "race", pages)
	w := mustOpen(t, fs, "race", os.O_RDWR)
	defer w.Release()
	rng := rand.New(rand.NewSource(1))
	for round := range 12 {
		dropCached(t, fs, "race")
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := mustOpen(t, fs, "race", os.O_RDONLY)
				defer h.Release()
				buf := make([]byte, 16<<10)
				for off := int64(r * 4096); off < pages*testPage; off += int64(len(buf)) {
					h.ReadAt(buf, off)
				}
			}()
		}
		for k := range 16 {
			p := rng.Intn(pages)
			b := bytes.Repeat([]byte{byte(round*16 + k + 1)}, testPage/2)
			off := int64(p*testPage + rng.Intn(2)*testPage/2)
			if _, err := w.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			copy(model[off:], b)
			if k%4 == 3 {
				if err := w.Fsync(true); err != nil {
					t.Fatal(err)
				}
			}
		}
		wg.Wait()
		if round%4 == 3 {
			cut := int64(rng.Intn(pages) * testPage)
			if err := w.f.truncate(cut); err != nil {
				t.Fatal(err)
			}
			if err := w.f.truncate(pages * testPage); err != nil {
				t.Fatal(err)
			}
			clear(model[cut:])
		}
		if err := w.Fsync(false); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "read-ahead idle", func() bool { return prefetchIdle(fs) })
		r := mustOpen(t, fs, "race", os.O_RDONLY)
		got := readAll(t, r)
		r.Release()
		if !bytes.Equal(got, model) {
			for p := 0; p < pages; p++ {
				if !bytes.Equal(got[p*testPage:(p+1)*testPage], model[p*testPage:(p+1)*testPage]) {
					t.Fatal(fmt.Sprintf("round %d: page %d differs from the last write: a stale page was staged in", round, p))
				}
			}
		}
	}
}

// TestReadAround: small random reads of a cold file are served from the
// backing file and their pages staged in behind them (not counted as
// read-ahead); a sequential reader stages its pages in and reads none
// around.
func TestReadAround(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	data := backingFile(t, fs, "rnd", 32)
	h := mustOpen(t, fs, "rnd", os.O_RDWR)
	defer h.Release()
	pages := []int64{17, 3, 29, 11}
	for k := range 2 {
		for _, p := range pages {
			off := p*testPage + 512 + int64(k)*8192
			if got := readAt(t, h, off, 4096); !bytes.Equal(got, data[off:off+4096]) {
				t.Fatalf("read around at page %d differs from the backing file", p)
			}
		}
		if k == 0 && fs.Stats().StagedBehind != 0 {
			t.Fatal("a page staged at its first small miss")
		}
	}
	for _, p := range pages {
		waitFor(t, "the page staged behind its second miss", func() bool { return h.f.bucket.HasPage(p) })
	}
	st := fs.Stats()
	if st.ReadAround != 8 || st.StagedBehind != 4 || st.PrefetchedPages != 0 {
		t.Fatalf("read around %d, staged behind %d, prefetched %d: want 8, 4, 0", st.ReadAround, st.StagedBehind, st.PrefetchedPages)
	}
	if got := readAt(t, h, 3*testPage, testPage); !bytes.Equal(got, data[3*testPage:4*testPage]) {
		t.Fatal("page staged behind differs from the backing file")
	}
	// A write into an absent page, then a small read of it: the write wins.
	if _, err := h.WriteAt([]byte("new"), 20*testPage+10); err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, h, 20*testPage+8, 8); !bytes.Equal(got, append(append(data[20*testPage+8:20*testPage+10:20*testPage+10], "new"...), data[20*testPage+13:20*testPage+16]...)) {
		t.Fatalf("read after a write: %q", got)
	}
	s := mustOpen(t, fs, "rnd", os.O_RDONLY)
	defer s.Release()
	before := fs.Stats().ReadAround
	for off := int64(0); off < 8*testPage; off += 4096 {
		readAt(t, s, off, 4096)
	}
	if n := fs.Stats().ReadAround - before; n != 0 {
		t.Fatalf("a sequential reader read %d times around", n)
	}
}

// TestReadAroundNeedsReadAhead: with read-ahead off nothing could stage a
// page behind a small read, so small reads stage their pages in.
func TestReadAroundNeedsReadAhead(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.Readahead = -1 })
	data := backingFile(t, fs, "f", 8)
	h := mustOpen(t, fs, "f", os.O_RDONLY)
	defer h.Release()
	for _, p := range []int64{5, 2, 5} {
		if got := readAt(t, h, p*testPage, 4096); !bytes.Equal(got, data[p*testPage:p*testPage+4096]) {
			t.Fatal("read differs from the backing file")
		}
	}
	if st := fs.Stats(); st.ReadAround != 0 || !h.f.bucket.HasPage(5) {
		t.Fatalf("read around %d times, page 5 resident %v: want staged in", st.ReadAround, h.f.bucket.HasPage(5))
	}
}
