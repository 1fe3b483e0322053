package files

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Stage-in, stage-out and evict: what a job script asks of the pool
// before and after its run (`iowarp stage-in`, `stage-out`, `evict`).
//
// StageIn reads files from the backing store into the pool, clean, as the
// read-ahead does (stageAheadLocked, under the file's backingMu, installed
// only if the page is still absent): a write racing with it wins. It never
// evicts anything to make room: once no tier has room for another page it
// stops and says so (StageReport.Full), so a stage-in never pushes out the
// data of a job that is running. StageOut writes dirty pages back and
// fsyncs them (and with drop, evicts the files' pages afterwards). Evict
// drops clean pages only; dirty ones stay until they are written back.

// ErrScratch: a scratch mount has no backing store to stage from or to.
var ErrScratch = errors.New("files: scratch mode has no backing store")

// StageReport is where a stage-in, stage-out or evict stands (the
// progress while it runs, the result at the end).
type StageReport struct {
	Files     int   `json:"files"`      // regular files found
	FilesDone int   `json:"files_done"` // of them, finished
	Bytes     int64 `json:"bytes"`      // to move: their size (stage-in), their dirty bytes (stage-out)
	Done      int64 `json:"done"`       // of Bytes, moved (or found already resident)
	Resident  int64 `json:"resident"`   // stage-in: of Done, bytes that were in the pool already
	Full      bool  `json:"full"`       // stage-in stopped: no tier has room without evicting
	Dropped   int64 `json:"dropped"`    // bytes freed from the pool (evict, stage-out --drop)
	DirtyLeft int64 `json:"dirty_left"` // evict: dirty bytes kept (not on the backing store yet)
	// Failed lists the first maxStageFailures "path: error"; FailedCount
	// is how many files failed.
	Failed      []string `json:"failed,omitempty"`
	FailedCount int      `json:"failed_count"`
}

const (
	maxStageFailures = 16
	stageChunk       = 16 // pages per unit of stage-in work
	stageEvery       = 200 * time.Millisecond
)

// stageState is a StageReport updated by many workers.
type stageState struct {
	files, filesDone      atomic.Int64
	bytes, done, resident atomic.Int64
	dropped, dirtyLeft    atomic.Int64
	full                  atomic.Bool
	inflight              atomic.Int64 // pages being staged in by the workers
	mu                    sync.Mutex
	failed                []string
	failedCount           int
}

func (s *stageState) fail(p string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failedCount++
	if len(s.failed) < maxStageFailures {
		s.failed = append(s.failed, fmt.Sprintf("%s: %v", p, err))
	}
}

func (s *stageState) report() StageReport {
	s.mu.Lock()
	failed := append([]string(nil), s.failed...)
	n := s.failedCount
	s.mu.Unlock()
	return StageReport{Files: int(s.files.Load()), FilesDone: int(s.filesDone.Load()), Bytes: s.bytes.Load(),
		Done: s.done.Load(), Resident: s.resident.Load(), Full: s.full.Load(), Dropped: s.dropped.Load(),
		DirtyLeft: s.dirtyLeft.Load(), Failed: failed, FailedCount: n}
}

// reportEvery calls progress with s's report every stageEvery until stop
// is closed; before is called first each time (nil: nothing).
func (s *stageState) reportEvery(progress func(StageReport), before func(), stop <-chan struct{}) {
	if progress == nil {
		return
	}
	t := time.NewTicker(stageEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if before != nil {
				before()
			}
			progress(s.report())
		}
	}
}

// walkFiles calls fn for every regular file at or below each of paths
// (mount-relative), with its size; symlinks are not followed. A path that
// cannot be read is reported to fail.
func (fs *FS) walkFiles(ctx context.Context, paths []string, fn func(p string, size int64), fail func(string, error)) {
	for _, p := range paths {
		st, err := fs.Lstat(p)
		if err != nil {
			fail(p, err)
			continue
		}
		fs.walkOne(ctx, p, st.Mode&unix.S_IFMT, st.Size, fn, fail)
	}
}

func (fs *FS) walkOne(ctx context.Context, p string, kind uint32, size int64, fn func(string, int64), fail func(string, error)) {
	if ctx.Err() != nil {
		return
	}
	switch kind {
	case unix.S_IFREG:
		fn(p, size)
	case unix.S_IFDIR:
		ents, err := fs.ReadDir(p)
		if err != nil {
			fail(p, err)
			return
		}
		for _, e := range ents {
			child := path.Join(p, e.Name)
			var sz int64
			if e.Mode == unix.S_IFREG {
				st, err := fs.Lstat(child)
				if err != nil {
					fail(child, err)
					continue
				}
				sz = st.Size
			}
			fs.walkOne(ctx, child, e.Mode, sz, fn, fail)
		}
	}
}

// stageJob is a run of pages of one open file.
type stageJob struct {
	h           *Handle
	p           string
	first, last int64 // pages [first, last)
	left        *atomic.Int64
}

// StageIn pulls the files at or below paths (mount-relative; "" is the
// whole mount) from the backing store into the pool with workers
// goroutines (0 = Options.Flushers), calling progress (may be nil) a few
// times a second. It stops when ctx is done or the pool is full (Full).
// Failures of single files are in the report; the error is for the whole
// operation (scratch mode, ctx).
func (fs *FS) StageIn(ctx context.Context, paths []string, workers int, progress func(StageReport)) (StageReport, error) {
	if fs.scratch {
		return StageReport{}, ErrScratch
	}
	if workers <= 0 {
		workers = fs.opts.Flushers
	}
	var s stageState
	stop := make(chan struct{})
	go s.reportEvery(progress, nil, stop)
	defer close(stop)
	work, cancel := context.WithCancel(ctx) // cancelled too when the pool is full
	defer cancel()
	if len(paths) == 0 {
		paths = []string{""}
	}
	var list []string
	fs.walkFiles(work, paths, func(p string, size int64) {
		list = append(list, p)
		s.files.Add(1)
		s.bytes.Add(size)
	}, s.fail)
	jobs := make(chan stageJob)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				fs.stageJob(work, cancel, j, &s)
			}
		}()
	}
	fs.feedStage(work, list, jobs, &s)
	close(jobs)
	wg.Wait()
	return s.report(), ctx.Err()
}

// feedStage opens each file and hands its pages to the workers in runs of
// stageChunk; the last run to finish releases the handle.
func (fs *FS) feedStage(ctx context.Context, list []string, jobs chan<- stageJob, s *stageState) {
	for _, p := range list {
		if ctx.Err() != nil || s.full.Load() {
			return
		}
		h, _, err := fs.Open(p, unix.O_RDONLY, 0, Cred{})
		if err != nil {
			s.fail(p, err)
			continue
		}
		n := (h.f.backingSize.Load() + fs.ps - 1) / fs.ps
		if n == 0 {
			h.Release()
			s.filesDone.Add(1)
			continue
		}
		left := new(atomic.Int64)
		left.Store((n + stageChunk - 1) / stageChunk)
		for i := int64(0); i < n; i += stageChunk {
			select {
			case jobs <- stageJob{h: h, p: p, first: i, last: min(i+stageChunk, n), left: left}:
			case <-ctx.Done():
				for range (n - i + stageChunk - 1) / stageChunk {
					finishJob(stageJob{h: h, left: left}, s)
				}
				return
			}
		}
	}
}

// stageJob stages the pages of j that are absent, while there is room.
func (fs *FS) stageJob(ctx context.Context, full context.CancelFunc, j stageJob, s *stageState) {
	defer finishJob(j, s)
	f := j.h.f
	size := f.backingSize.Load()
	for i := j.first; i < j.last; i++ {
		if ctx.Err() != nil {
			return
		}
		n := max(0, min(fs.ps, size-i*fs.ps))
		if f.bucket.HasPage(i) {
			s.resident.Add(n)
			s.done.Add(n)
			continue
		}
		// Room for this page and every other worker's page in flight,
		// in the pool as a whole: workers that each saw one free page
		// would together stage in more than fits, and the organizer would
		// make room by evicting what they had staged.
		if !fs.totalRoomFor(fs.ps * s.inflight.Add(1)) {
			s.inflight.Add(-1)
			s.full.Store(true)
			full()
			return
		}
		_, ok := f.stageAhead(i)
		s.inflight.Add(-1)
		if !ok && !f.bucket.HasPage(i) {
			s.fail(j.p, fmt.Errorf("stage in page %d: not installed", i))
			return
		}
		s.done.Add(n)
	}
}

func finishJob(j stageJob, s *stageState) {
	if j.left.Add(-1) == 0 {
		j.h.Release()
		s.filesDone.Add(1)
	}
}

// StageOut writes back the dirty pages of the files at or below paths
// (none: every file of the mount) and syncs them, and with drop evicts
// their pages afterwards. It returns when they are on the backing store,
// ctx is done, or a file's write-back failed (in the report, and as the
// error).
func (fs *FS) StageOut(ctx context.Context, paths []string, drop bool, progress func(StageReport)) (StageReport, error) {
	if fs.scratch {
		return StageReport{}, ErrScratch
	}
	var s stageState
	targets := fs.liveUnder(ctx, paths, &s)
	var total int64
	for _, f := range targets {
		total += f.dirtyBytes()
	}
	s.files.Store(int64(len(targets)))
	s.bytes.Store(total)
	flushed0 := fs.stats.flushed.Load()
	note := func() { s.noteWritten(targets, total, int64(fs.stats.flushed.Load()-flushed0)) }
	stop := make(chan struct{})
	go s.reportEvery(progress, note, stop)
	err := fs.writeBackEach(ctx, targets, drop, &s)
	close(stop)
	note()
	if err == nil {
		err = ctx.Err()
	}
	return s.report(), err
}

// noteWritten sets Done to how much of total is no longer dirty, or was
// written to the backing store (the write-back counts each range as it
// writes it; pages turn clean only once the file is synced), never less
// than before: new writes meanwhile do not make it go back.
func (s *stageState) noteWritten(targets []*file, total, written int64) {
	var dirty int64
	for _, f := range targets {
		dirty += f.dirtyBytes()
	}
	done := max(0, total-dirty, min(written, total))
	for {
		old := s.done.Load()
		if done <= old || s.done.CompareAndSwap(old, done) {
			return
		}
	}
}

// liveUnder returns the file objects of the regular files at or below
// paths (all live files when paths is empty): a file without one has
// nothing in the pool.
func (fs *FS) liveUnder(ctx context.Context, paths []string, s *stageState) []*file {
	if len(paths) == 0 {
		return fs.liveFiles()
	}
	var out []*file
	seen := map[*file]bool{}
	fs.walkFiles(ctx, paths, func(p string, _ int64) {
		st, err := fs.Lstat(p)
		if err != nil {
			s.fail(p, err)
			return
		}
		if f := fs.lookupFile(keyOf(&st)); f != nil && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}, s.fail)
	return out
}

// writeBackEach writes targets back with Options.Flushers goroutines.
func (fs *FS) writeBackEach(ctx context.Context, targets []*file, drop bool, s *stageState) error {
	ch := make(chan *file)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range fs.opts.Flushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range ch {
				if err := f.writeBack(syncFull); err != nil {
					s.fail(f.displayName(), err)
					first.CompareAndSwap(nil, &err)
				} else if drop {
					s.dropped.Add(f.bucket.EvictClean())
					fs.signalSpace()
				}
				s.filesDone.Add(1)
			}
		}()
	}
	for _, f := range targets {
		select {
		case ch <- f:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(ch)
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// Evict drops the clean pages of the files at or below paths (none: every
// file) from the pool; dirty pages stay (DirtyLeft) until written back.
// Scratch mode has nothing to evict to (ErrScratch).
func (fs *FS) Evict(ctx context.Context, paths []string) (StageReport, error) {
	if fs.scratch {
		return StageReport{}, ErrScratch // its pages are the only copy
	}
	var s stageState
	targets := fs.liveUnder(ctx, paths, &s)
	s.files.Store(int64(len(targets)))
	for _, f := range targets {
		s.dropped.Add(f.bucket.EvictClean())
		s.dirtyLeft.Add(f.dirtyBytes())
		s.filesDone.Add(1)
	}
	fs.signalSpace()
	return s.report(), ctx.Err()
}
