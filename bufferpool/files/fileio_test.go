package files

import (
	"os"
	"testing"
)

// TestFileIO: each file's counters say what the pool did for it: a cold
// read misses and stages in, a second read hits, written bytes are counted
// and, after fsync, written back; Sub takes the difference.
func TestFileIO(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, noReadahead)
	writeBacking(t, fs, "cold", 4*testPage)
	h := mustOpen(t, fs, "cold", os.O_RDONLY)
	buf := make([]byte, 4*testPage)
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	before := fileIOOf(t, fs, "cold")
	if before.Misses != 4 || before.StagedBytes != 4*testPage || before.BytesRead != 4*testPage {
		t.Fatalf("cold read: %+v", before)
	}
	if _, err := h.ReadAt(buf[:testPage], 0); err != nil {
		t.Fatal(err)
	}
	h.Release()
	d := fileIOOf(t, fs, "cold").Sub(before)
	if d.Hits != 1 || d.Misses != 0 || d.StagedBytes != 0 || d.BytesRead != testPage {
		t.Fatalf("warm read: %+v", d)
	}
	w := mustOpen(t, fs, "new", os.O_CREATE|os.O_RDWR)
	defer w.Release()
	if _, err := w.WriteAt(make([]byte, 3*testPage), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Fsync(false); err != nil {
		t.Fatal(err)
	}
	if c := fileIOOf(t, fs, "new"); c.BytesWritten != 3*testPage || c.WrittenBack != 3*testPage {
		t.Fatalf("written file: %+v", c)
	}
}

func fileIOOf(t *testing.T, fs *testFS, path string) FileIO {
	t.Helper()
	for _, c := range fs.FileIO() {
		if c.Path == path {
			return c
		}
	}
	t.Fatalf("no FileIO of %s in %+v", path, fs.FileIO())
	return FileIO{}
}

// TestFileIOTiers: the hits say which tier served them: with room for 2
// pages in RAM, a file of 4 read twice is served from RAM and from the
// file tier, every hit counted in one of them; the cold read's stage-ins
// are reads of the backing store.
func TestFileIOTiers(t *testing.T) {
	fs := newTestFS(t, Writeback, 2*testPage, 64*testPage, noReadahead)
	writeBacking(t, fs, "f", 4*testPage)
	h := mustOpen(t, fs, "f", os.O_RDONLY)
	defer h.Release()
	buf := make([]byte, 4*testPage)
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	cold := fileIOOf(t, fs, "f")
	if cold.Misses != 4 || cold.StageReads < 1 || cold.StagedBytes != 4*testPage || cold.Hits != 0 {
		t.Fatalf("cold read: %+v", cold)
	}
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	d := fileIOOf(t, fs, "f").Sub(cold)
	if d.Hits != 4 || d.RAMHits+d.FileHits != 4 || d.RAMHits == 0 || d.FileHits == 0 || d.StageReads != 0 {
		t.Fatalf("warm read over two tiers: %+v", d)
	}
}
