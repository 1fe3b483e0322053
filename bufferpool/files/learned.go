package files

import (
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Learned prefetch: an apriori prefetcher learned from this node's own
// history (Hermes' "apriori" prefetching, without the user writing the
// schedule).
//
// While a file is open its reads are recorded (learnState.note: the
// pages, in order; history.go keeps them when the last handle closes).
// The next session of the same file (same path, backing size and mtime)
// replays them: the pages in the order they were first read are queued
// to the read-ahead's workers (prefetch.go) a window ahead of the reader,
// which is followed by its position in that order (the furthest page of
// it read so far), so the stage-in never runs more than the window ahead
// of what is read. The window is Options.Readahead, the bounds the
// read-ahead's (at most 2 × Readahead queued or in flight, a stage-in only
// while some tier has room without evicting): the learned prefetch never
// pushes anything out of the pool. Pages the last session read more than
// once are installed hot (bufferpool.Bucket.InstallHotPageIf): on the
// fastest tier with room, whatever the placement policy, and scored as
// read that often, so that the organizer's next pass swaps them up where
// that tier was full. That holds for such a page staged in on demand too.
//
// What is recorded is what reaches this layer: reads the shim served from
// shared memory and reads of a FUSE passthrough open do not, so a session
// that recorded less than half of the history it replayed leaves that
// history in place. A session that wrote the file records nothing, nor
// one that read fewer than minHistoryPages pages.
//
// Lock order: learnState.mu → pfState.mu, bucket locks (enqueue).
// Nothing takes learnState.mu holding a lock of the file or the pool.

// minHistoryPages is the shortest session kept: a file read in one page
// has nothing to stage ahead (and a tree of small files would cost a
// history write per file).
const minHistoryPages = 2

// learnState is a file's recording of the session's reads and the replay
// of the last session's. Safe for concurrent use.
type learnState struct {
	mu       sync.Mutex
	sessions int    // open handles of the session: it lasts while > 0
	path     string // the path the session opened the file by
	rec      []int64
	last     int64       // last page recorded; -1: none
	written  atomic.Bool // the session changed the file (any door): its reads say nothing of the next
	loaded   int         // len(seq) of the history replayed (0: none)
	replay   *replayPlan
}

// replayPlan is a loaded history turned into stage-in order.
type replayPlan struct {
	order  []int64       // pages in the order first read
	pos    map[int64]int // page → its index in order
	hot    map[int64]int // pages read more than once → how often
	cursor int           // first index of order the reader has not passed
	issued int           // first index of order not queued yet
}

func newReplayPlan(seq []int64) *replayPlan {
	r := &replayPlan{pos: make(map[int64]int), hot: make(map[int64]int)}
	reads := make(map[int64]int)
	for _, p := range seq {
		reads[p]++
		if _, ok := r.pos[p]; !ok {
			r.pos[p] = len(r.order)
			r.order = append(r.order, p)
		}
	}
	for p, n := range reads {
		if n > 1 {
			r.hot[p] = n
		}
	}
	return r
}

// learning reports whether access histories are on.
func (fs *FS) learning() bool { return fs.hist.dir != "" && fs.prefetch.maxPages > 0 }

// learnOpen starts (or joins) the session of f opened by path p and
// queues the first window of the last session's history.
func (f *file) learnOpen(p string) {
	fs := f.fs
	if !fs.learning() {
		return
	}
	l := &f.learn
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sessions++
	if l.sessions > 1 {
		return
	}
	l.path, l.rec, l.last, l.loaded, l.replay = p, nil, -1, 0, nil
	l.written.Store(false)
	size, mtime, ok := f.backingStamp()
	if !ok {
		return
	}
	h, err := fs.hist.load(p, size, mtime, fs.ps)
	if err != nil {
		fs.stats.historiesBad.Add(1)
		fs.log().WithField("file", p).Warnf("ignored: %v", err)
		return
	}
	if h == nil {
		return
	}
	fs.stats.historiesLoaded.Add(1)
	l.loaded, l.replay = len(h.seq), newReplayPlan(h.seq)
	f.issueLocked()
}

// backingStamp is the backing file's size and mtime (ns); false while the
// pool holds changes not written back (the backing file is not the file).
func (f *file) backingStamp() (size, mtime int64, ok bool) {
	if f.unwritten() {
		return 0, 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &st) != nil {
		return 0, 0, false
	}
	return st.Size, st.Mtim.Nano(), true
}

// learnRead records a read of n bytes at off and moves the replay's
// window along.
func (f *file) learnRead(off int64, n int) {
	if n <= 0 || !f.fs.learning() {
		return
	}
	ps, size := f.fs.ps, f.size.Load()
	if off >= size {
		return
	}
	first, last := off/ps, (min(off+int64(n), size)-1)/ps
	l := &f.learn
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions == 0 {
		return // a read racing with the last close
	}
	for i := first; i <= last; i++ {
		l.noteLocked(i, f.fs.hist.maxPages)
		if r := l.replay; r != nil {
			if k, ok := r.pos[i]; ok && k >= r.cursor {
				r.cursor = k + 1
			}
		}
	}
	if l.replay != nil {
		f.issueLocked()
	}
}

// noteLocked appends page i to the recording (a run of reads of one page
// once), up to max pages.
func (l *learnState) noteLocked(i int64, max int) {
	if i == l.last || l.written.Load() || len(l.rec) >= max {
		return
	}
	l.rec = append(l.rec, i)
	l.last = i
}

// issueLocked queues the replay's pages up to a window past the reader,
// while the read-ahead's bounds take them.
func (f *file) issueLocked() {
	r := f.learn.replay
	p := f.fs.prefetch
	ps := f.fs.ps
	r.issued = max(r.issued, r.cursor) // passed by the reader: too late
	limit := f.backingSize.Load()
	for r.issued < len(r.order) && r.issued < r.cursor+int(p.maxPages) {
		if p.inflight.Load()+ps > p.maxBytes {
			return // the next read tries again
		}
		if i := r.order[r.issued]; i*ps < limit {
			p.enqueueAs(f, i, pfQueued|pfLearned)
		}
		r.issued++
	}
}

// learnWrite marks the session as one that changed the file. It is
// dataChanged's and truncate's call, so it sees every change whatever
// door made it (shim writes when a harvest finds them); lock-free, since
// callers may hold the file's locks.
func (f *file) learnWrite() { f.learn.written.Store(true) }

// hotReads is how often the history replayed read page i, if more than
// once (0: it is not hot).
func (f *file) hotReads(i int64) int {
	if !f.fs.learning() {
		return 0
	}
	f.learn.mu.Lock()
	defer f.learn.mu.Unlock()
	if r := f.learn.replay; r != nil {
		return r.hot[i]
	}
	return 0
}

// installStaged installs page i, clean, staged in from the backing file,
// if absent and valid() (bufferpool.Bucket.InstallPageIf); hot where the
// history says the page is read again.
func (f *file) installStaged(i int64, data []byte, valid func() bool) (bool, error) {
	if n := f.hotReads(i); n > 0 {
		ok, err := f.bucket.InstallHotPageIf(i, data, valid, float64(n))
		if ok {
			f.fs.stats.learnedHot.Add(1)
		}
		return ok, err
	}
	return f.bucket.InstallPageIf(i, data, valid)
}

// learnClose ends f's session when the last handle goes, and keeps what
// it read as the file's history.
func (f *file) learnClose() {
	if !f.fs.learning() {
		return
	}
	l := &f.learn
	l.mu.Lock()
	l.sessions--
	end := l.sessions == 0
	l.mu.Unlock()
	if end {
		f.keepHistory()
	}
}

// keepHistory saves the session's recording as the file's history, ends
// the replay, and starts the next session afresh: at the last close, and
// for a file still open when the FS closes.
func (f *file) keepHistory() {
	fs := f.fs
	l := &f.learn
	l.mu.Lock()
	rec, path, written, loaded := l.rec, l.path, l.written.Load(), l.loaded
	l.rec, l.replay, l.loaded = nil, nil, 0
	l.mu.Unlock()
	if written || len(rec) < minHistoryPages || len(rec) < loaded/2 {
		return
	}
	size, mtime, ok := f.backingStamp()
	if !ok {
		return
	}
	h := &history{path: path, size: size, mtime: mtime, pageSize: fs.ps, seq: rec}
	if err := fs.hist.save(h); err != nil {
		fs.log().WithField("file", path).Warnf("not kept: %v", err)
		return
	}
	fs.stats.historiesSaved.Add(1)
}

func (fs *FS) learnedStats() LearnedStats {
	c := &fs.stats
	return LearnedStats{HistoriesLoaded: c.historiesLoaded.Load(), HistoriesSaved: c.historiesSaved.Load(),
		HistoriesDiscarded: c.historiesBad.Load(), StagedPages: c.learnedPages.Load(), Hits: c.learnedHits.Load(),
		HotPages: c.learnedHot.Load()}
}
