package files

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// learnDirs are the directories a daemon keeps across restarts: the
// backing store and the file tier (which holds the histories).
type learnDirs struct{ backing, nvme string }

func newLearnDirs(t testing.TB) learnDirs {
	t.Helper()
	dir := t.TempDir()
	d := learnDirs{backing: filepath.Join(dir, "backing"), nvme: filepath.Join(dir, "nvme")}
	if err := os.Mkdir(d.backing, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d learnDirs) history() string { return filepath.Join(d.nvme, "history") }

// start starts a daemon's pool and FS on d (a restart: nothing of an
// earlier one is in the pool); stop (also at cleanup) closes both.
func (d learnDirs) start(t testing.TB, placement string, tweak func(*Options)) (fs *FS, stop func()) {
	t.Helper()
	opts := Options{Backing: d.backing, PageSize: testPage, Readahead: 8 * testPage, HistoryDir: d.history()}
	if tweak != nil {
		tweak(&opts)
	}
	return d.startSized(t, placement, 256*testPage, 256*testPage, opts)
}

// startSized is start with tiers of ram and file bytes and opts as given.
func (d learnDirs) startSized(t testing.TB, placement string, ram, file int64, opts Options) (fs *FS, stop func()) {
	t.Helper()
	pool, err := bufferpool.New(bufferpool.Config{
		Tiers: []bufferpool.TierConfig{
			{Name: "ram", Kind: bufferpool.KindRAM, Capacity: ram},
			{Name: "nvme", Kind: bufferpool.KindFile, Dir: d.nvme, Capacity: file},
		},
		Placement:         placement,
		OrganizerInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, err = New(pool, opts)
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if !done {
			done = true
			fs.Close()
			pool.Close()
		}
	}
	t.Cleanup(stop)
	return fs, stop
}

// learnJob reads pages of name in order, one page at a time, checking
// the bytes; with settle it lets the prefetch finish what it queued
// before each read (so a hit does not depend on the scheduler).
func learnJob(t *testing.T, fs *FS, name string, data []byte, order []int, settle bool) {
	t.Helper()
	h, _, err := fs.Open(name, unix.O_RDONLY, 0, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	buf := make([]byte, testPage)
	for _, p := range order {
		if settle {
			waitPrefetch(t, fs)
		}
		n, err := h.ReadAt(buf, int64(p)*testPage)
		if err != nil || n != testPage || !bytes.Equal(buf, data[p*testPage:(p+1)*testPage]) {
			t.Fatalf("read page %d: %d, %v (bytes equal: %v)", p, n, err, bytes.Equal(buf[:n], data[p*testPage:p*testPage+n]))
		}
	}
}

// randomOrder is a permutation of n pages (fixed by seed) in which the
// read-ahead sees no pattern: no page follows the one before it, none is
// page 0 first, no stride repeats.
func randomOrder(seed int64, n int) []int {
	rng := rand.New(rand.NewSource(seed))
	for {
		o := rng.Perm(n)
		if patternFree(o) {
			return o
		}
	}
}

func patternFree(o []int) bool {
	if len(o) > 0 && o[0] == 0 {
		return false
	}
	for k := 1; k < len(o); k++ {
		if o[k] == o[k-1]+1 || (k > 1 && o[k]-o[k-1] == o[k-1]-o[k-2]) {
			return false
		}
	}
	return true
}

func waitPrefetch(t *testing.T, fs *FS) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fs.prefetch.inflight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("prefetch never went idle")
		}
		time.Sleep(time.Millisecond)
	}
}

func writeLearnInput(t *testing.T, d learnDirs, name string, pages int) []byte {
	t.Helper()
	data := make([]byte, pages*testPage)
	rand.New(rand.NewSource(int64(pages))).Read(data)
	if err := os.WriteFile(filepath.Join(d.backing, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestLearnedPrefetch: a job reads a file in a random order; after a
// restart the same job's reads find the pages the learned prefetch staged
// in ahead of it, in that order, a window at a time. Without histories
// the same reads miss.
func TestLearnedPrefetch(t *testing.T) {
	const pages = 64
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", pages)
	order := randomOrder(7, pages)

	fs, stop := d.start(t, "", nil)
	learnJob(t, fs, "input", data, order, false)
	if st := fs.Stats().Learned; st.HistoriesSaved != 1 || st.HistoriesLoaded != 0 {
		t.Fatalf("first run: %+v, want one history saved, none loaded", st)
	}
	stop()

	fs, stop = d.start(t, "", nil)
	learnJob(t, fs, "input", data, order, true)
	st := fs.Stats()
	if st.Learned.HistoriesLoaded != 1 {
		t.Fatalf("second run: %+v, want the history loaded", st.Learned)
	}
	if st.Learned.Hits < pages*9/10 || st.Learned.StagedPages < pages*9/10 {
		t.Fatalf("second run: %d of %d reads hit a learned stage-in (%d staged), want >= 90%%; stats %+v",
			st.Learned.Hits, pages, st.Learned.StagedPages, st.Learned)
	}
	if st.PrefetchedPages != 0 {
		t.Fatalf("the read-ahead staged %d pages: the order has a pattern", st.PrefetchedPages)
	}
	if st.ReadMisses > pages/10 {
		t.Fatalf("second run: %d misses of %d reads", st.ReadMisses, pages)
	}
	stop()

	// The same job with histories off misses (the read-ahead finds no
	// pattern in a random order).
	fs, _ = d.start(t, "", func(o *Options) { o.HistoryDir = "" })
	learnJob(t, fs, "input", data, order, true)
	if st := fs.Stats(); st.Learned.Hits != 0 || st.ReadMisses < pages/2 {
		t.Fatalf("without histories: %d learned hits, %d misses of %d reads", st.Learned.Hits, st.ReadMisses, pages)
	}
}

// TestLearnedFollowsReader: the stage-in never runs more than a window
// (Readahead) ahead of the reader's position in the recorded order.
func TestLearnedFollowsReader(t *testing.T) {
	const pages, window = 64, 8
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", pages)
	order := randomOrder(3, pages)
	fs, stop := d.start(t, "", nil)
	learnJob(t, fs, "input", data, order, false)
	stop()

	fs, _ = d.start(t, "", nil)
	h, _, err := fs.Open("input", unix.O_RDONLY, 0, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	buf := make([]byte, testPage)
	for k, p := range order[:pages/2] {
		waitPrefetch(t, fs)
		if got := fs.Stats().Learned.StagedPages; got > uint64(k+window) {
			t.Fatalf("after %d reads %d pages staged, want at most %d", k, got, k+window)
		}
		if _, err := h.ReadAt(buf, int64(p)*testPage); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range order[pages/2+window:] {
		if f := h.f; f.bucket.HasPage(int64(p)) {
			t.Fatalf("page %d, more than a window past the reader, is resident", p)
		}
	}
}

// TestLearnedHistoryInvalidated: a history is replayed only for the
// backing file it was recorded on: a changed size or mtime discards it.
func TestLearnedHistoryInvalidated(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, path string)
	}{
		{"mtime", func(t *testing.T, path string) {
			if err := os.Chtimes(path, time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}},
		{"size", func(t *testing.T, path string) {
			if err := os.Truncate(path, 40*testPage); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := newLearnDirs(t)
			data := writeLearnInput(t, d, "input", 32)
			order := randomOrder(1, 32)
			fs, stop := d.start(t, "", nil)
			learnJob(t, fs, "input", data, order, false)
			stop()
			c.change(t, filepath.Join(d.backing, "input"))
			fs, _ = d.start(t, "", nil)
			h := mustOpenFS(t, fs, "input")
			waitPrefetch(t, fs)
			if st := fs.Stats().Learned; st.HistoriesLoaded != 0 || st.StagedPages != 0 {
				t.Fatalf("changed input: %+v, want nothing replayed", st)
			}
			if hs := histories(t, d); len(hs) != 0 {
				t.Fatalf("the stale history is still there: %v", hs)
			}
			h.Release()
		})
	}
}

func mustOpenFS(t *testing.T, fs *FS, p string) *Handle {
	t.Helper()
	h, _, err := fs.Open(p, unix.O_RDONLY, 0, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func histories(t *testing.T, d learnDirs) []string {
	t.Helper()
	hs, err := filepath.Glob(filepath.Join(d.history(), "*"+historyExt))
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestLearnedHistoryCorrupt: a history that does not parse is ignored
// with one log line, removed, and counted.
func TestLearnedHistoryCorrupt(t *testing.T) {
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", 16)
	order := randomOrder(2, 16)
	fs, stop := d.start(t, "", nil)
	learnJob(t, fs, "input", data, order, false)
	stop()
	hs := histories(t, d)
	if len(hs) != 1 {
		t.Fatalf("histories: %v", hs)
	}
	b, err := os.ReadFile(hs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(hs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	hook := logtest.NewGlobal()
	t.Cleanup(func() { logrus.StandardLogger().ReplaceHooks(make(logrus.LevelHooks)) })
	fs, _ = d.start(t, "", nil)
	learnJob(t, fs, "input", data, order, true)
	if st := fs.Stats().Learned; st.HistoriesDiscarded != 1 || st.HistoriesLoaded != 0 || st.StagedPages != 0 {
		t.Fatalf("corrupt history: %+v", st)
	}
	var lines []string
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "access history") {
			lines = append(lines, e.Message)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "checksum") {
		t.Fatalf("log lines about the history: %q, want one naming the checksum", lines)
	}
}

// TestLearnedHistoryTooLarge: a history file larger than any history
// within the bounds is not read into memory: discarded like a corrupt one.
func TestLearnedHistoryTooLarge(t *testing.T) {
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", 16)
	fs, stop := d.start(t, "", func(o *Options) { o.HistoryPages = 16 })
	if err := os.MkdirAll(d.history(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fs.hist.name("input"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	learnJob(t, fs, "input", data, randomOrder(5, 16), false)
	if st := fs.Stats().Learned; st.HistoriesDiscarded != 1 || st.HistoriesLoaded != 0 {
		t.Fatalf("oversized history: %+v", st)
	}
	stop()
}

// TestLearnedHotPages: pages the last run read more than once are
// installed on the fastest tier even under round-robin placement, which
// puts every other page on the file tier.
func TestLearnedHotPages(t *testing.T) {
	const pages = 32
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", pages)
	order := randomOrder(4, pages)
	hot := map[int]bool{}
	for _, p := range order[:8] {
		hot[p] = true
	}
	job := append(append([]int(nil), order...), order[:8]...) // the first 8 read again
	fs, stop := d.start(t, bufferpool.PlaceRoundRobin, nil)
	learnJob(t, fs, "input", data, job, false)
	stop()

	fs, _ = d.start(t, bufferpool.PlaceRoundRobin, nil)
	h := mustOpenFS(t, fs, "input")
	defer h.Release()
	buf := make([]byte, testPage)
	onFile := 0
	for _, p := range order {
		waitPrefetch(t, fs)
		tier := h.f.bucket.PageTier(int64(p))
		if hot[p] && tier != bufferpool.KindRAM {
			t.Fatalf("hot page %d staged on %q, want the RAM tier", p, tier)
		}
		if !hot[p] && tier == bufferpool.KindFile {
			onFile++
		}
		if _, err := h.ReadAt(buf, int64(p)*testPage); err != nil {
			t.Fatal(err)
		}
	}
	if st := fs.Stats().Learned; st.HotPages != uint64(len(hot)) {
		t.Fatalf("hot pages installed: %d, want %d", st.HotPages, len(hot))
	}
	if onFile == 0 {
		t.Fatal("round robin put no other page on the file tier: the test shows nothing")
	}
}

// TestLearnedBounds: a history keeps at most HistoryPages pages, the
// directory at most HistoryFiles histories, the most recent.
func TestLearnedBounds(t *testing.T) {
	d := newLearnDirs(t)
	bounds := func(o *Options) { o.HistoryPages, o.HistoryFiles = 10, 2 }
	fs, _ := d.start(t, "", bounds)
	var data [3][]byte
	for k, name := range []string{"a", "b", "c"} {
		data[k] = writeLearnInput(t, d, name, 16+k)
		learnJob(t, fs, name, data[k], randomOrder(int64(k), 16), false)
		time.Sleep(10 * time.Millisecond) // distinct mtimes for the pruning order
	}
	hs := histories(t, d)
	if len(hs) != 2 {
		t.Fatalf("%d histories kept, want 2", len(hs))
	}
	for _, want := range []string{"b", "c"} {
		b, err := os.ReadFile(fs.hist.name(want))
		if err != nil {
			t.Fatalf("history of %s: %v", want, err)
		}
		h, err := parseHistory(b, 1<<20)
		if err != nil || len(h.seq) != 10 {
			t.Fatalf("history of %s: %v, %d pages, want 10", want, err, len(h.seq))
		}
	}
}

// TestLearnedNotAfterWrite: a session that wrote the file keeps no
// history of its reads.
func TestLearnedNotAfterWrite(t *testing.T) {
	d := newLearnDirs(t)
	data := writeLearnInput(t, d, "input", 8)
	fs, _ := d.start(t, "", nil)
	h, _, err := fs.Open("input", unix.O_RDWR, 0, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, testPage)
	if _, err := h.ReadAt(buf, 3*testPage); err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(data[:100], 0); err != nil {
		t.Fatal(err)
	}
	h.Release()
	if st := fs.Stats().Learned; st.HistoriesSaved != 0 {
		t.Fatalf("a writing session saved a history: %+v", st)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	h := &history{path: "dir/input.h5", size: 100*testPage + 5, mtime: 1700000000123456789, pageSize: testPage,
		seq: []int64{7, 3, 100, 0, 3, 99}}
	got, err := parseHistory(h.encode(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got.path != h.path || got.size != h.size || got.mtime != h.mtime || got.pageSize != h.pageSize ||
		!slicesEqual(got.seq, h.seq) {
		t.Fatalf("round trip: %+v, want %+v", got, h)
	}
	bad := *h
	bad.seq = []int64{101} // past the size
	if _, err := parseHistory(bad.encode(), 1<<20); err == nil {
		t.Fatal("a page past the size parsed")
	}
	if _, err := parseHistory(h.encode(), 5); err == nil {
		t.Fatal("a history over the bound parsed")
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzParseHistory: a history file is untrusted bytes (a tier directory
// a crash or another program left): an error leaves no result, and what
// parses encodes back to a history that parses the same.
func FuzzParseHistory(f *testing.F) {
	h := &history{path: "a/b", size: 10 * testPage, mtime: 42, pageSize: testPage, seq: []int64{3, 1, 9, 1}}
	f.Add(h.encode())
	enc := h.encode()
	f.Add(enc[:len(enc)-4]) // the body: the fuzz adds its checksum
	f.Add([]byte(historyMagic))
	f.Add(append([]byte(historyMagic), historyVersion, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		// As found, and with a valid checksum: past it, to the fields.
		checkParsedHistory(t, b)
		checkParsedHistory(t, binary.LittleEndian.AppendUint32(append([]byte(nil), b...), crc32.Checksum(b, castagnoli)))
	})
}

func checkParsedHistory(t *testing.T, b []byte) {
	h, err := parseHistory(b, 1<<16)
	if err != nil {
		if h != nil {
			t.Fatalf("error %v with a result", err)
		}
		return
	}
	again, err := parseHistory(h.encode(), 1<<16)
	if err != nil || again.path != h.path || again.size != h.size || again.mtime != h.mtime ||
		again.pageSize != h.pageSize || !slicesEqual(again.seq, h.seq) {
		t.Fatalf("re-encoded history: %+v, %v; want %+v", again, err, h)
	}
}
