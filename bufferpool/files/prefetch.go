package files

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Read-ahead of cold pages.
//
// Each open handle watches its reads (readAhead.observe). A sequential
// reader (each read starts at or just past where the last one ended, in
// pages) and a strided one (the same positive distance between the last
// three reads) get the pages it will want next staged in by a small pool
// of background workers shared by the whole FS. The window starts at
// raInitPages and doubles each time the reader reaches the second half of
// what was staged ahead, up to Options.Readahead; a read that fits
// neither pattern resets it, so a random reader stages nothing.
//
// A prefetch reads the backing file holding no lock (with O_DIRECT where
// it can: direct.go) and installs the page clean through
// bucket.InstallPageIf, which leaves a page already resident (a dirty one
// included) alone and installs nothing if the backing file changed since
// the read began (file.backingGen; prefetchPage says why that keeps it
// from installing stale bytes). A demand read of a page being read ahead
// waits for it (pfState.waitRead) and then hits; it never reads the page
// a second time.
//
// Bounds: at most prefetchWorkers stage-ins at once, at most
// prefetchDepth of them for one file (taking its pages in the order
// queued, the nearest first), and at most 2×Options.Readahead bytes queued
// or in flight (more is dropped, not waited for). A prefetch starts only
// while some tier has room for the page without evicting anything and no
// writer waits for space: read-ahead never pushes data out of the pool.
// (Another allocation racing for the last room can still make it evict a
// clean page; dirty pages are never evicted by anything.)

// DefaultReadahead is Options.Readahead's default: the largest read-ahead
// window of one open file.
const DefaultReadahead = 32 << 20

const (
	raInitPages     = 2 // first window, in pages
	prefetchWorkers = 8
	// prefetchDepth is how many pages of one file are staged at once:
	// stage-ins read with O_DIRECT (direct.go) get no help from the
	// kernel's readahead, so the device sees this many reads in flight.
	prefetchDepth = 4
)

// prefetcher is the FS's pool of read-ahead workers. Safe for concurrent
// use.
type prefetcher struct {
	fs       *FS
	maxPages int64 // largest window, in pages; 0: read-ahead is off
	maxBytes int64 // bound on bytes queued or being staged

	jobs     chan *file    // files with pages queued (pfState.fifo)
	inflight atomic.Int64  // bytes queued or being staged
	queued   atomic.Uint64 // pages ever queued
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newPrefetcher(fs *FS, readahead int64) *prefetcher {
	p := &prefetcher{fs: fs, stop: make(chan struct{})}
	if readahead <= 0 {
		return p
	}
	p.maxPages = max(readahead/fs.ps, 1)
	p.maxBytes = 2 * p.maxPages * fs.ps
	p.jobs = make(chan *file, 64)
	for range prefetchWorkers {
		p.wg.Add(1)
		go p.run()
	}
	return p
}

// close stops the workers (pages still queued are dropped) and waits for
// the stage-ins in progress.
func (p *prefetcher) close() {
	close(p.stop)
	p.wg.Wait()
}

// run stages in the queued pages of one file after another. A file's
// pages are staged by one worker at a time, in the order queued: the
// nearest first, and the backing file read sequentially (its own
// read-ahead keeps working).
func (p *prefetcher) run() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case f := <-p.jobs:
			p.drain(f)
		}
	}
}

func (p *prefetcher) drain(f *file) {
	for {
		i, ok := f.pf.pop()
		if !ok {
			return
		}
		f.prefetchPage(i)
		p.inflight.Add(-p.fs.ps)
		select {
		case <-p.stop:
			return
		default:
		}
	}
}

// enqueue queues page i of f unless it is resident, already queued, or
// the bounds say no.
func (p *prefetcher) enqueue(f *file, i int64) { p.enqueueAs(f, i, pfQueued) }

// stageBehind queues page i of f to be staged in the background after a
// read of a part of it was served from the backing file (readAround),
// only while the read-ahead is nearly idle (fewer than prefetchDepth pages
// queued or in flight): a random reader's pages come second.
func (p *prefetcher) stageBehind(f *file, i int64) {
	if p.maxPages == 0 || p.inflight.Load() >= prefetchDepth*p.fs.ps {
		return
	}
	p.enqueueAs(f, i, pfBehind)
}

// enqueueAs queues page i in state st (pfQueued, pfBehind,
// pfQueued|pfLearned); false if it
// did not.
func (p *prefetcher) enqueueAs(f *file, i int64, st int) bool {
	if f.bucket.HasPage(i) || !f.pf.queueAs(i, st) {
		return false
	}
	ps := p.fs.ps
	if p.inflight.Add(ps) > p.maxBytes {
		p.inflight.Add(-ps)
		f.pf.forget(i)
		return false
	}
	if st == pfQueued {
		p.queued.Add(1)
	}
	if !f.pf.push(i) {
		return true // enough workers have the file
	}
	select {
	case p.jobs <- f:
	default: // every worker busy and many files waiting: drop the file's queue
		p.inflight.Add(-ps * f.pf.abandon())
	}
	return true
}

// roomFor reports whether some tier holds n more bytes without evicting,
// and no writer waits for space.
// totalRoomFor reports whether the tiers together hold n more bytes
// below their limits (and nobody waits for space), for a stage-in that
// must not make the pool evict.
func (fs *FS) totalRoomFor(n int64) bool {
	if fs.spaceWaiters.Load() > 0 {
		return false
	}
	var free int64
	for _, t := range fs.pool.Stats().Tiers {
		limit := t.Capacity
		if t.Ceiling > 0 && t.Ceiling < limit {
			limit = t.Ceiling
		}
		free += max(0, limit-t.Used)
	}
	return free >= n
}

func (fs *FS) roomFor(n int64) bool {
	if fs.spaceWaiters.Load() > 0 {
		return false
	}
	for _, t := range fs.pool.Stats().Tiers {
		limit := t.Capacity
		if t.Ceiling > 0 && t.Ceiling < limit {
			limit = t.Ceiling
		}
		if limit-t.Used >= n {
			return true
		}
	}
	return false
}

// prefetchPage stages page i in if it is still absent, inside the backing
// file, and the pool has room. It reads the backing file holding no lock,
// so demand reads of the pages already staged, and other stage-ins of the
// file, go on meanwhile, and installs the page under the bucket lock only
// if it is still absent and nothing changed the backing file or dropped
// pages since the read began (backingGen: write-back, truncate, fallocate,
// revalidation all change it). A write since made the page resident and
// dirty, and evicting that needs a write-back, which changes backingGen.
// While a write-back of the file runs the page is skipped, not waited for.
func (f *file) prefetchPage(i int64) {
	fs := f.fs
	if f.bucket.HasPage(i) || !fs.roomFor(fs.ps) || f.wbStart.Load() != 0 {
		f.pf.forget(i)
		return
	}
	st, started := f.pf.start(i)
	if !started {
		return
	}
	n, ok := f.stageAhead(i)
	f.pf.finish(i, ok)
	switch {
	case !ok:
	case st == pfBehind:
		fs.stats.stagedBehind.Add(1)
	case st&pfLearned != 0:
		fs.stats.learnedPages.Add(1)
	default:
		fs.stats.prefetched.Add(1)
		fs.stats.prefetchedBytes.Add(uint64(n))
	}
}

// stageAhead reads page i from the backing file and installs it, clean,
// if it is still absent and the backing file did not change meanwhile.
func (f *file) stageAhead(i int64) (n int, ok bool) {
	fs := f.fs
	g := f.backingGen.Load()
	if g&1 != 0 {
		return 0, false // being changed
	}
	f.stateMu.Lock()
	dropped := f.dropped
	f.stateMu.Unlock()
	start := i * fs.ps
	if dropped || start >= f.backingSize.Load() {
		return 0, false
	}
	bp := fs.getPage()
	defer fs.putPage(bp)
	buf := *bp
	n, err := f.stagePage(buf, i)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, false
	}
	clear(buf[n:])
	installed, err := f.installStaged(i, buf, func() bool { return f.backingGen.Load() == g })
	return n, err == nil && installed
}

// Page states in pfState.
const (
	pfQueued  = iota + 1 // queued
	pfReading            // being read from the backing file
	pfStaged             // staged in, not read yet
	// A page staged behind a small miss (readAround): queued, being read.
	// Not read ahead: not counted in the prefetch statistics.
	pfBehind
	pfReadingBehind

	// pfLearned marks a page of the learned prefetch (learned.go) in
	// any of the read-ahead's states (pfQueued, pfReading, pfStaged): its
	// hits are counted apart.
	pfLearned = 1 << 4
)

// pfBase is st without the pfLearned mark.
func pfBase(st int) int { return st &^ pfLearned }

// pfState is a file's read-ahead bookkeeping: the pages queued or
// staged ahead and not read yet. Safe for concurrent use.
type pfState struct {
	n       atomic.Int64 // len(m): the hit path skips mu when 0
	mu      sync.Mutex
	m       map[int64]int
	read    *sync.Cond     // on mu: a page left pfReading
	fifo    []int64        // pages queued, in order
	workers int            // workers that have the file, or it in their queue
	around  map[int64]bool // pages read around once (missedAgain), at most aroundMax
}

// aroundMax bounds pfState.around: past it the set starts again.
const aroundMax = 1024

// missedAgain records a read around page i and reports whether one was
// recorded before.
func (s *pfState) missedAgain(i int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.around[i] {
		delete(s.around, i)
		return true
	}
	if s.around == nil || len(s.around) >= aroundMax {
		s.around = make(map[int64]bool)
	}
	s.around[i] = true
	return false
}

// push appends page i to the queue; true if the file must be handed to a
// worker (none has it).
func (s *pfState) push(i int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fifo = append(s.fifo, i)
	if s.workers >= prefetchDepth || s.workers >= len(s.fifo) {
		return false
	}
	s.workers++
	return true
}

// pop returns the next queued page; false (and the file is with one
// worker less) when there is none.
func (s *pfState) pop() (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fifo) == 0 {
		s.workers--
		if s.workers == 0 {
			s.fifo = nil
		}
		return 0, false
	}
	i := s.fifo[0]
	s.fifo = s.fifo[1:]
	return i, true
}

// abandon drops every queued page and returns how many; the worker the
// file was to be handed to (push said true) does not get it.
func (s *pfState) abandon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(len(s.fifo))
	for _, i := range s.fifo {
		if st := pfBase(s.m[i]); st == pfQueued || st == pfBehind {
			delete(s.m, i)
		}
	}
	s.fifo = nil
	s.workers--
	s.n.Store(int64(len(s.m)))
	return n
}

// start moves page i from queued to reading and returns the state it was
// queued in (pfQueued, pfBehind: by stageBehind, or pfQueued|pfLearned);
// false if it is not queued any more (a demand read took it).
func (s *pfState) start(i int64) (st int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st = s.m[i]
	switch pfBase(st) {
	case pfQueued:
		s.m[i] = pfReading | st&pfLearned
		return st, true
	case pfBehind:
		s.m[i] = pfReadingBehind
		return st, true
	}
	return 0, false
}

// finish ends the read of page i: staged if ok, else forgotten; and
// wakes the demand reads waiting for it.
func (s *pfState) finish(i int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[i] == pfReadingBehind {
		delete(s.m, i)
		s.n.Store(int64(len(s.m)))
	}
	if st := s.m[i]; pfBase(st) == pfReading {
		if ok {
			s.m[i] = pfStaged | st&pfLearned
		} else {
			delete(s.m, i)
			s.n.Store(int64(len(s.m)))
		}
	}
	if s.read != nil {
		s.read.Broadcast()
	}
}

// waitRead waits while page i is being read ahead; reports whether it
// waited (the page may be resident now).
func (s *pfState) waitRead(i int64) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	waited := false
	for st := pfBase(s.m[i]); st == pfReading || st == pfReadingBehind; st = pfBase(s.m[i]) {
		if s.read == nil {
			s.read = sync.NewCond(&s.mu)
		}
		s.read.Wait()
		waited = true
	}
	return waited
}

// queueAs marks page i queued in state st; false if it already is (or
// is staged).
func (s *pfState) queueAs(i int64, st int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[int64]int)
	}
	if s.m[i] != 0 {
		return false
	}
	s.m[i] = st
	s.n.Store(int64(len(s.m)))
	return true
}

// forget drops page i without counting it.
func (s *pfState) forget(i int64) { s.take(i) }

// take removes page i and returns its state (0: none).
func (s *pfState) take(i int64) int {
	if s.n.Load() == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[i]
	if st != 0 {
		delete(s.m, i)
		s.n.Store(int64(len(s.m)))
	}
	return st
}

// unread counts the pages staged ahead and never read, and forgets all.
func (s *pfState) unread() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, st := range s.m {
		if pfBase(st) == pfStaged {
			n++
		}
	}
	s.m = nil
	s.n.Store(0)
	return n
}

// demandHit is called for every page a read found resident: a page the
// read-ahead brought in (or is bringing in: the read waited for it)
// counts as a prefetch hit.
func (f *file) demandHit(i int64) {
	switch st := f.pf.take(i); {
	case st&pfLearned != 0:
		f.fs.stats.learnedHits.Add(1)
	case st != 0 && st < pfBehind:
		f.fs.stats.prefetchHits.Add(1)
	}
}

// demandMiss is called for every page a read had to stage in itself: a
// page staged ahead and gone again was evicted unread.
func (f *file) demandMiss(i int64) {
	if pfBase(f.pf.take(i)) == pfStaged {
		f.fs.stats.prefetchWasted.Add(1)
	}
}

// prefetchDropped counts the pages staged ahead that go with the file
// unread.
func (f *file) prefetchDropped() {
	if f.pf.n.Load() > 0 {
		f.fs.stats.prefetchWasted.Add(f.pf.unread())
	}
}

// readAhead is one open handle's access-pattern detector. Safe for
// concurrent use.
type readAhead struct {
	mu      sync.Mutex
	reads   int   // reads seen
	lastOff int64 // start of the last read
	lastEnd int64 // end of the last read
	stride  int64 // distance between the starts of the last two reads
	strided int   // consecutive reads at that stride
	window  int64 // pages; 0: no pattern
	next    int64 // first page (strided: offset) not issued yet
	mark    int64 // first page (offset) of the last batch issued
}

// inPattern reports whether the reads seen so far are sequential or
// strided (a window is open).
func (r *readAhead) inPattern() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.window > 0
}

// raPlan is what observe asks for: count targets from first, each step
// bytes apart and span bytes long (step 0: count consecutive pages from
// page first).
type raPlan struct {
	first, step, span int64
	count             int64
}

// observe records a read of n bytes at off and returns what to stage
// ahead (count 0: nothing).
func (r *readAhead) observe(off int64, n int, ps, maxPages int64) raPlan {
	if n <= 0 || maxPages == 0 {
		return raPlan{}
	}
	end := off + int64(n)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reads > 0 && off == r.lastOff && end == r.lastEnd {
		return raPlan{} // the same read again (ReadPinned missed, ReadAt serves it)
	}
	prev, prevOff := r.lastEnd, r.lastOff
	first := r.reads == 0
	r.reads++
	r.lastOff, r.lastEnd = off, end
	last := (end - 1) / ps
	// Sequential: forward, into the page after the last read's end or
	// into what was staged ahead (the shim reads the staged pages from
	// shared memory, so the next read the daemon sees is past them).
	reach := (prev-1)/ps + 1
	if r.window > 0 && r.stride == 0 {
		reach = max(reach, r.next)
	}
	switch {
	case (first && off == 0) || (!first && off >= prevOff && off/ps <= reach):
		if r.stride != 0 { // the window and marks were a strided reader's (offsets)
			r.window, r.next, r.mark = 0, 0, 0
		}
		r.stride, r.strided = 0, 0
		return r.sequentialLocked(off/ps, last, maxPages)
	case !first && off-prevOff == r.stride && r.stride > 0:
		r.strided++
		return r.stridedLocked(off, maxPages)
	}
	r.stride, r.strided, r.window, r.next, r.mark = 0, 0, 0, 0, 0
	if !first {
		r.stride, r.strided = off-prevOff, 1
	}
	return raPlan{}
}

// sequentialLocked: the read covered pages [p, last]. When the reader
// reaches the first page of the last batch staged ahead (Linux's
// readahead marker), the window doubles and the next batch is issued.
func (r *readAhead) sequentialLocked(p, last, maxPages int64) raPlan {
	switch {
	case r.window == 0 || r.next < p:
		r.window = min(raInitPages, maxPages)
	case last >= r.mark:
		r.window = min(2*r.window, maxPages)
	default:
		return raPlan{}
	}
	from := max(r.next, last+1)
	to := last + 1 + r.window
	r.next, r.mark = to, from
	return raPlan{first: from, count: max(to-from, 0)}
}

// stridedLocked: the read at off is the third (or later) at a constant
// stride; stage the window's next targets not issued yet, the same way
// (next and mark are offsets here).
func (r *readAhead) stridedLocked(off, maxPages int64) raPlan {
	if r.strided < 2 {
		return raPlan{}
	}
	switch {
	case r.window == 0 || r.next <= off:
		r.window = min(raInitPages, maxPages)
	case off >= r.mark:
		r.window = min(2*r.window, maxPages)
	default:
		return raPlan{}
	}
	from := max(r.next, off+r.stride)
	to := off + r.stride*(r.window+1)
	r.next, r.mark = to, from
	return raPlan{first: from, step: r.stride, span: r.lastEnd - off, count: max((to-from)/r.stride, 0)}
}

// readAhead feeds a read of n bytes at off to the handle's detector and
// queues what it asks for. Called with no lock of the file or its bucket
// held (enqueue takes the bucket's read lock).
func (h *Handle) readAhead(off int64, n int) {
	f := h.f
	if f.remote.view.Load() != nil {
		return // pages come from the owner (remote.go)
	}
	p := f.fs.prefetch
	plan := h.ra.observe(off, n, f.fs.ps, p.maxPages)
	if plan.count == 0 {
		return
	}
	ps := f.fs.ps
	limit := f.backingSize.Load()
	for k := range plan.count {
		lo, hi := plan.first+k, plan.first+k
		if plan.step != 0 {
			at := plan.first + k*plan.step
			lo, hi = at/ps, (at+plan.span-1)/ps
		}
		for i := lo; i <= hi; i++ {
			if i*ps >= limit {
				return
			}
			p.enqueue(f, i)
		}
	}
}
