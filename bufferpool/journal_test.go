package bufferpool

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

const (
	crashEnv   = "IOWARP_BUFFERPOOL_CRASH_DIR"
	compactEnv = "IOWARP_BUFFERPOOL_COMPACT"
)

// journalConfig is a pool whose RAM tier holds two 4 KiB pages, over a
// journaled file tier in dir.
func journalConfig(dir string, journal bool) Config {
	return Config{
		OrganizerInterval: -1, JournalInterval: -1, Seed: 1, Journal: journal,
		Tiers: []TierConfig{
			{Name: "ram", Kind: KindRAM, Capacity: 2 * 4096},
			{Name: "nvme", Kind: KindFile, Dir: dir, Capacity: 1 << 20},
		},
	}
}

// TestCrashChild is the daemon that dies: run by crashPool in a child
// process, it leaves dirty pages on the file tier, journals them and
// kills itself with SIGKILL.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by crashPool")
	}
	if os.Getenv(compactEnv) != "" {
		compactAt = 0 // every pass compacts
	}
	journalBatch = 2 // several lock holds per bucket and pass
	p, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// a: pages 0, 1 in RAM (lost), 2..5 on the file tier; 3 written back;
	// 4 rewritten after the last journal pass; size cuts page 5 at 100.
	a := mustBucket(t, p, "a", 4096)
	a.SetJournalTag([]byte("A"), 0)
	var v3 uint64
	for i := range int64(6) {
		v, err := a.WritePage(i, 0, fill(4096, byte(i)), nil)
		must(err)
		if i == 3 {
			v3 = v
		}
	}
	a.SetSharedSize(5*4096 + 100)
	if !a.MarkClean(3, v3) {
		t.Fatal("MarkClean")
	}
	// b: four pages on the file tier, truncated to 4096+10.
	b := mustBucket(t, p, "b", 4096)
	b.SetJournalTag([]byte("B"), 0)
	for i := range int64(4) {
		_, err := b.WritePage(i, 0, fill(4096, byte(10+i)), nil)
		must(err)
	}
	b.SetSharedSize(4 * 4096)
	must(p.SyncJournal())
	must(b.Truncate(4096 + 10))
	b.SetSharedSize(4096 + 10)
	// c: journaled, then deleted.
	c := mustBucket(t, p, "c", 4096)
	c.SetJournalTag([]byte("C"), 4096)
	_, err = c.WritePage(0, 0, fill(4096, 30), nil)
	must(err)
	must(p.SyncJournal())
	must(p.DeleteBucket("c"))
	if st := p.Stats().Tiers[1]; st.Journaled != 5 {
		t.Fatalf("%d pages journaled, want 5", st.Journaled)
	}
	_, err = a.WritePage(4, 0, []byte("changed"), nil)
	must(err)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// crashPool runs TestCrashChild on a file tier in a new directory and
// returns the directory; compact makes its every journal pass compact
// the journal.
func crashPool(t *testing.T, compact ...bool) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	if len(compact) > 0 && compact[0] {
		cmd.Env = append(cmd.Env, compactEnv+"=1")
	}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("crash child: %v\n%s", err, out)
	}
	return dir
}

// replayed is what a ReplayOpener was given.
type replayed struct {
	files map[string]*replayedFile
}

type replayedFile struct {
	size  int64
	pages map[int64][]byte
	done  bool
}

func (r *replayed) open(f *ReplayFile) (ReplaySink, error) {
	rf := &replayedFile{size: f.Size, pages: make(map[int64][]byte)}
	r.files[string(f.Tag)] = rf
	return rf, nil
}

func (rf *replayedFile) WritePage(i int64, data []byte) error {
	rf.pages[i] = bytes.Clone(data)
	return nil
}

func (rf *replayedFile) Close(err error) error { rf.done = err == nil; return err }

func (rf *replayedFile) pageList() []int64 {
	var out []int64
	for i := range rf.pages {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

func instanceDirs(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "iowarp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestJournalReplay: after kill -9 the next pool hands back exactly the
// dirty pages that were on the file tier, journaled and unchanged since,
// cut at the logged size; not what was written back, truncated, deleted,
// or changed after its record; then the dead pool's files are gone and
// their space counted back.
func TestJournalReplay(t *testing.T) { checkReplay(t, crashPool(t)) }

// TestJournalCompacted: the same crash, with the journal compacted at
// every pass, replays the same.
func TestJournalCompacted(t *testing.T) {
	dir := crashPool(t, true)
	inst := instanceDir(t, dir)
	if _, err := os.Stat(filepath.Join(inst, "journal.next")); err == nil {
		t.Fatal("journal.next left behind")
	}
	b, err := os.ReadFile(filepath.Join(inst, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	recs, rest := tier.ParseJournal(b)
	for _, r := range recs {
		if r.Kind == tier.RecGone {
			t.Fatalf("a compacted journal holds a RecGone: %+v", r)
		}
	}
	if rest != 0 || len(recs) == 0 {
		t.Fatalf("%d records, %d bytes unread", len(recs), rest)
	}
	checkReplay(t, dir)
}

func instanceDir(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "iowarp-*"))
	if len(m) != 1 {
		t.Fatalf("instance directories %v", m)
	}
	return m[0]
}

func checkReplay(t *testing.T, dir string) {
	t.Helper()
	p, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if used := p.Stats().Tiers[1].Used; used <= 0 {
		t.Fatalf("the dead pool's files are not counted against the tier: used %d", used)
	}
	r := &replayed{files: make(map[string]*replayedFile)}
	rep := p.Replay(r.open)
	t.Logf("%+v", rep)
	if rep.Dirs != 1 || rep.Files != 2 || rep.Pages != 4 || rep.Skipped != 1 || rep.Bytes != 4096+100+4096+10 {
		t.Fatalf("report %+v", rep)
	}
	if len(r.files) != 2 || r.files["A"] == nil || r.files["B"] == nil {
		t.Fatalf("files replayed: %v", r.files)
	}
	a, b := r.files["A"], r.files["B"]
	if !a.done || a.size != 5*4096+100 || !slices.Equal(a.pageList(), []int64{2, 5}) {
		t.Fatalf("A: size %d pages %v", a.size, a.pageList())
	}
	wantBytes(t, a.pages[2], fill(4096, 2))
	wantBytes(t, a.pages[5], fill(4096, 5)[:100])
	if !b.done || b.size != 4096+10 || !slices.Equal(b.pageList(), []int64{0, 1}) {
		t.Fatalf("B: size %d pages %v", b.size, b.pageList())
	}
	wantBytes(t, b.pages[0], fill(4096, 10))
	wantBytes(t, b.pages[1], fill(4096, 11)[:10])
	if !strings.Contains(strings.Join(rep.Messages, "\n"), "page 4 of A skipped") {
		t.Fatalf("no message for the changed page: %q", rep.Messages)
	}
	if n := instanceDirs(t, dir); n != 1 {
		t.Fatalf("%d instance directories after replay, want 1 (ours)", n)
	}
	if used := p.Stats().Tiers[1].Used; used != 0 {
		t.Fatalf("used %d after replay", used)
	}
}

// TestJournalCorruptPage: a segment page whose bytes no longer match its
// journal record is skipped with a message, never handed back.
func TestJournalCorruptPage(t *testing.T) {
	dir := crashPool(t)
	segs, _ := filepath.Glob(filepath.Join(dir, "iowarp-*", "seg-*"))
	for _, s := range segs {
		f, err := os.OpenFile(s, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if n, _ := f.ReadAt(b, 2*4096+7); n == 1 && b[0] != 0 {
			b[0] ^= 0xff
			f.WriteAt(b, 2*4096+7)
		}
		f.Close()
	}
	p, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	r := &replayed{files: make(map[string]*replayedFile)}
	rep := p.Replay(r.open)
	if a := r.files["A"]; a == nil || a.pages[2] != nil || a.pages[5] == nil {
		t.Fatalf("A: %+v", a)
	}
	msgs := strings.Join(rep.Messages, "\n")
	if rep.Skipped != 2 || !strings.Contains(msgs, "page 2 of A skipped") || !strings.Contains(msgs, "checksum") {
		t.Fatalf("report %+v", rep)
	}
}

// TestStaleWithoutJournal: a pool without a journal removes the dead
// pool's files at once (scratch mode: nothing to replay).
func TestStaleWithoutJournal(t *testing.T) {
	dir := crashPool(t)
	if n := instanceDirs(t, dir); n != 1 {
		t.Fatalf("%d instance directories left by the crash", n)
	}
	p, err := New(journalConfig(dir, false))
	if err != nil {
		t.Fatal(err)
	}
	if n := instanceDirs(t, dir); n != 1 {
		t.Fatalf("%d instance directories after New, want 1 (ours)", n)
	}
	if used := p.Stats().Tiers[1].Used; used != 0 {
		t.Fatalf("used %d", used)
	}
	p.Close()
	if ents := dirEntries(t, dir); len(ents) != 0 {
		t.Fatalf("left after Close: %v", ents)
	}
}

// TestJournalLiveInstanceUntouched: a second pool on the same directory
// leaves the live one's files alone.
func TestJournalLiveInstanceUntouched(t *testing.T) {
	dir := t.TempDir()
	p1, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	b := mustBucket(t, p1, "a", 4096)
	for i := range int64(4) {
		b.WritePage(i, 0, fill(4096, 1), nil)
	}
	p2, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	if rep := p2.Replay(func(*ReplayFile) (ReplaySink, error) { return nil, fmt.Errorf("no") }); rep.Dirs != 0 {
		t.Fatalf("replayed a live pool: %+v", rep)
	}
	p2.Close()
	got := make([]byte, 4096)
	if _, err := b.ReadPage(3, 0, got, nil); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, got, fill(4096, 1))
}

// TestJournalTagLazy: a tag given by SetJournalTagFunc is computed once,
// when a journal first needs the bucket (a dirty page on the file tier),
// and never for a bucket that puts nothing there (the crash tests replay
// tags set through it: SetJournalTag is SetJournalTagFunc).
func TestJournalTagLazy(t *testing.T) {
	dir := t.TempDir()
	p, err := New(journalConfig(dir, true))
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	tag := func(s string) func() []byte {
		return func() []byte { calls[s]++; return []byte(s) }
	}
	ram := mustBucket(t, p, "ram", 4096)
	ram.SetJournalTagFunc(tag("R"), 0)
	if _, err := ram.WritePage(0, 0, fill(4096, 1), nil); err != nil {
		t.Fatal(err)
	}
	low := mustBucket(t, p, "low", 4096)
	low.SetJournalTagFunc(tag("L"), 0)
	for i := range int64(4) { // the RAM tier holds two pages: some go to the file tier
		if _, err := low.WritePage(i, 0, fill(4096, byte(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if calls["R"]+calls["L"] != 0 {
		t.Fatalf("tags computed before any journal pass: %v", calls)
	}
	for range 2 {
		if err := p.SyncJournal(); err != nil {
			t.Fatal(err)
		}
	}
	if calls["R"] != 0 || calls["L"] != 1 {
		t.Fatalf("tag computations %v, want L once and R never", calls)
	}
	p.Close()
}
