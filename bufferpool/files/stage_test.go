package files

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// writeBacking writes size random bytes to the backing file rel.
func writeBacking(t *testing.T, fs *testFS, rel string, size int) []byte {
	t.Helper()
	p := filepath.Join(fs.backing, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	rand.New(rand.NewSource(int64(size))).Read(data)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func tierUse(fs *testFS) (n int64) {
	for _, ts := range fs.pool.Stats().Tiers {
		n += ts.Used
	}
	return n
}

func noReadahead(o *Options) { o.Readahead = -1 }

// TestStageIn: a tree staged in is read without a miss; a second stage-in
// finds it resident; files outside the paths stay out.
func TestStageIn(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, noReadahead)
	want := map[string][]byte{
		"d/a":   writeBacking(t, fs, "d/a", 3*testPage+100),
		"d/e/b": writeBacking(t, fs, "d/e/b", 10*testPage),
		"d/e/z": writeBacking(t, fs, "d/e/z", 0),
	}
	writeBacking(t, fs, "c", testPage)
	var reports []StageReport
	rep, err := fs.StageIn(context.Background(), []string{"d"}, 2, func(r StageReport) { reports = append(reports, r) })
	if err != nil {
		t.Fatal(err)
	}
	total := int64(13*testPage + 100)
	if rep.Files != 3 || rep.FilesDone != 3 || rep.Bytes != total || rep.Done != total || rep.Resident != 0 || rep.Full || rep.FailedCount != 0 {
		t.Fatalf("stage-in report %+v, want 3 files, %d bytes done", rep, total)
	}
	if use := tierUse(fs); use != 14*testPage {
		t.Errorf("tier use %d after the stage-in, want %d (14 pages)", use, 14*testPage)
	}
	before := fs.Stats()
	for p, data := range want {
		h := mustOpen(t, fs, p, os.O_RDONLY)
		if got := readAll(t, h); !bytes.Equal(got, data) {
			t.Errorf("%s: read %d bytes differ from the backing file's %d", p, len(got), len(data))
		}
		h.Release()
	}
	after := fs.Stats()
	if after.ReadMisses != before.ReadMisses || after.ReadHits < before.ReadHits+14 {
		t.Errorf("reads after the stage-in: %d hits, %d misses (before %d, %d): want hits only",
			after.ReadHits, after.ReadMisses, before.ReadHits, before.ReadMisses)
	}
	rep, err = fs.StageIn(context.Background(), []string{"d/e", "d/a"}, 0, nil)
	if err != nil || rep.Resident != total || rep.Done != total {
		t.Errorf("second stage-in: %+v, %v: want everything resident", rep, err)
	}
	if rep, err := fs.StageIn(context.Background(), nil, 0, nil); err != nil || rep.Files != 4 || rep.Done != total+testPage {
		t.Errorf("stage-in of the whole mount: %+v, %v", rep, err)
	}
	if rep, _ := fs.StageIn(context.Background(), []string{"missing"}, 0, nil); rep.FailedCount != 1 {
		t.Errorf("stage-in of a missing path: %+v", rep)
	}
}

// TestStageInFull: a stage-in bigger than the pool stops when no tier has
// room and evicts nothing that was there.
func TestStageInFull(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, noReadahead)
	writeBacking(t, fs, "small", 2*testPage)
	writeBacking(t, fs, "big", 20*testPage)
	if _, err := fs.StageIn(context.Background(), []string{"small"}, 0, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.StageIn(context.Background(), []string{"big"}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Full || rep.Done > 6*testPage || rep.Done < testPage {
		t.Errorf("stage-in of 20 pages into 6 free: %+v, want Full after at most 6 pages", rep)
	}
	if use := tierUse(fs); use > 8*testPage {
		t.Errorf("tier use %d past the capacity %d", use, 8*testPage)
	}
	h := mustOpen(t, fs, "small", os.O_RDONLY)
	defer h.Release()
	for i := range int64(2) {
		if !h.f.bucket.HasPage(i) {
			t.Errorf("page %d of the file staged first was evicted", i)
		}
	}
}

// TestStageOutAndEvict: stage-out leaves nothing dirty and the backing
// files equal; --drop and evict free the tier use; evict keeps dirty pages.
func TestStageOutAndEvict(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, noReadahead)
	data := bytes.Repeat([]byte("checkpoint"), 5*testPage/10)
	for _, p := range []string{"out/a", "out/b"} {
		if err := fs.Mkdir("out", 0o755, Cred{}); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
		h := mustOpen(t, fs, p, os.O_CREATE|os.O_RDWR)
		if _, err := h.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	rep, err := fs.StageOut(context.Background(), []string{"out"}, false, nil)
	if err != nil || rep.Files != 2 || rep.FilesDone != 2 || rep.Done != rep.Bytes {
		t.Fatalf("stage-out: %+v, %v", rep, err)
	}
	if st := fs.Stats(); st.DirtyBytes != 0 {
		t.Errorf("%d bytes dirty after the stage-out", st.DirtyBytes)
	}
	for _, p := range []string{"out/a", "out/b"} {
		if got, _ := os.ReadFile(filepath.Join(fs.backing, p)); !bytes.Equal(got, data) {
			t.Errorf("backing %s: %d bytes, not what was written", p, len(got))
		}
	}
	if use := tierUse(fs); use != 10*testPage {
		t.Fatalf("tier use %d, want 10 pages", use)
	}
	rep, err = fs.Evict(context.Background(), []string{"out/a"})
	if err != nil || rep.Dropped != 5*testPage || rep.DirtyLeft != 0 {
		t.Errorf("evict out/a: %+v, %v", rep, err)
	}
	rep, err = fs.StageOut(context.Background(), nil, true, nil)
	if err != nil || rep.Dropped != 5*testPage {
		t.Errorf("stage-out --drop of everything: %+v, %v", rep, err)
	}
	if use := tierUse(fs); use != 0 {
		t.Errorf("tier use %d after evict and stage-out --drop", use)
	}
	// A dirty page is never evicted.
	h := mustOpen(t, fs, "out/a", os.O_RDWR)
	defer h.Release()
	if _, err := h.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	fs.Evict(context.Background(), nil)
	if got := readAll(t, h); !bytes.Equal(got[:3], []byte("new")) || !bytes.Equal(got[3:], data[3:]) {
		t.Errorf("a write was lost to evict")
	}
}

func TestStageScratch(t *testing.T) {
	fs := newTestFS(t, Scratch, 4*testPage, 4*testPage, nil)
	if _, err := fs.StageIn(context.Background(), nil, 0, nil); !errors.Is(err, ErrScratch) {
		t.Errorf("stage-in in scratch mode: %v", err)
	}
	if _, err := fs.Evict(context.Background(), nil); !errors.Is(err, ErrScratch) {
		t.Errorf("evict in scratch mode: %v", err)
	}
}

// TestStageInRacingWrites: writes during a stage-in of the same file win;
// the pages nobody wrote hold the backing file's bytes.
func TestStageInRacingWrites(t *testing.T) {
	fs := newTestFS(t, Writeback, 256*testPage, 64*testPage, noReadahead)
	const pages = 64
	old := writeBacking(t, fs, "f", pages*testPage)
	h := mustOpen(t, fs, "f", os.O_RDWR)
	defer h.Release()
	newPage := bytes.Repeat([]byte{0xee}, testPage)
	done := make(chan error, 1)
	go func() {
		for i := pages - 1; i >= 0; i -= 2 { // every other page, from the end
			if _, err := h.WriteAt(newPage, int64(i)*testPage); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := fs.StageIn(context.Background(), []string{"f"}, 4, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := readAll(t, h)
	for i := range pages {
		want := old[i*testPage : (i+1)*testPage]
		if (pages-1-i)%2 == 0 {
			want = newPage
		}
		if !bytes.Equal(got[i*testPage:(i+1)*testPage], want) {
			t.Fatalf("page %d: not what was written (or staged)", i)
		}
	}
}
