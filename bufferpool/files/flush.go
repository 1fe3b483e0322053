package files

import (
	"sync"
	"time"
)

// flusher drains dirty files to the backing store with a bounded set of
// workers. A file is queued at most once; a write while it is being
// written back queues it again. A file whose write-back failed waits out
// its back-off (noteWriteBack) before it is tried again, whatever is
// written to it meanwhile: a failing store costs a bounded number of
// attempts per second, never a hot loop.
type flusher struct {
	fs *FS

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []*file
	queued   map[*file]bool
	waiting  map[*file]bool // failed files waiting out their back-off
	inflight int
	deferred int // files waiting out flushDelay
	stopped  bool

	wg sync.WaitGroup
}

func newFlusher(fs *FS, workers int) *flusher {
	fl := &flusher{fs: fs, queued: make(map[*file]bool), waiting: make(map[*file]bool)}
	fl.cond = sync.NewCond(&fl.mu)
	for range workers {
		fl.wg.Add(1)
		go fl.run()
	}
	return fl
}

func (fl *flusher) enqueue(f *file) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.stopped || fl.queued[f] || fl.waiting[f] {
		return
	}
	fl.queued[f] = true
	fl.queue = append(fl.queue, f)
	fl.cond.Signal()
}

// retry queues f again after d (its write-back failed). Until then
// enqueue ignores it; a file already waiting keeps its timer.
func (fl *flusher) retry(f *file, d time.Duration) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.stopped || fl.waiting[f] {
		return
	}
	fl.waiting[f] = true
	time.AfterFunc(d, func() {
		fl.mu.Lock()
		delete(fl.waiting, f)
		fl.mu.Unlock()
		fl.enqueue(f)
	})
}

func (fl *flusher) run() {
	defer fl.wg.Done()
	for {
		f, ok := fl.next()
		if !ok {
			return
		}
		deferred, err := f.writeBackPages(wbReq{sync: syncData, background: true})
		fl.mu.Lock()
		fl.inflight--
		fl.mu.Unlock()
		switch {
		case err != nil:
			// The pages stay dirty; noteWriteBack logged the failure
			// and set the retry. fsync reports the error.
		case deferred:
			fl.deferFile(f)
		default:
			fl.fs.retireIfOver(f)
		}
	}
}

// next waits for a file to write back and counts it in flight; false
// once stopped.
func (fl *flusher) next() (*file, bool) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for {
		for len(fl.queue) == 0 && !fl.stopped {
			fl.cond.Wait()
		}
		if fl.stopped {
			return nil, false
		}
		f := fl.queue[0]
		fl.queue[0] = nil
		fl.queue = fl.queue[1:]
		delete(fl.queued, f)
		if !fl.waiting[f] { // else it failed since: its retry timer brings it back
			fl.inflight++
			return f, true
		}
	}
}

// deferFile queues f again after flushDelay. Until then f counts as
// queued, so the writes that keep it busy do not wake a worker each.
func (fl *flusher) deferFile(f *file) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.stopped || fl.queued[f] {
		return
	}
	fl.queued[f] = true
	fl.deferred++
	time.AfterFunc(flushDelay, func() {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		fl.deferred--
		if fl.stopped {
			return
		}
		fl.queue = append(fl.queue, f)
		fl.cond.Signal()
	})
}

// backlog is the number of files queued or being written back.
func (fl *flusher) backlog() int64 {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return int64(len(fl.queue) + fl.inflight + fl.deferred + len(fl.waiting))
}

func (fl *flusher) stop() {
	fl.mu.Lock()
	fl.stopped = true
	fl.cond.Broadcast()
	fl.mu.Unlock()
	fl.wg.Wait()
}

// rateLimiter throttles write-back to a bandwidth (a token bucket with one
// second of burst); nil means unlimited.
type rateLimiter struct {
	mu    sync.Mutex
	rate  float64 // bytes per second
	avail float64
	last  time.Time
}

func newRateLimiter(bps int64) *rateLimiter {
	if bps <= 0 {
		return nil
	}
	return &rateLimiter{rate: float64(bps), last: time.Now()}
}

func (r *rateLimiter) wait(n int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	now := time.Now()
	r.avail = min(r.rate, r.avail+now.Sub(r.last).Seconds()*r.rate)
	r.last = now
	r.avail -= float64(n)
	debt := -r.avail
	r.mu.Unlock()
	if debt > 0 {
		time.Sleep(time.Duration(debt / r.rate * float64(time.Second)))
	}
}
