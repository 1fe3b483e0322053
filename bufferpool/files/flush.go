package files

import (
	"sync"
	"time"
)

// flusher drains dirty files to the backing store with a bounded set of
// workers. A file is queued at most once; a write while it is being
// written back queues it again.
type flusher struct {
	fs *FS

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []*file
	queued   map[*file]bool
	inflight int
	deferred int // files waiting out flushDelay
	stopped  bool

	wg sync.WaitGroup
}

func newFlusher(fs *FS, workers int) *flusher {
	fl := &flusher{fs: fs, queued: make(map[*file]bool)}
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
	if fl.stopped || fl.queued[f] {
		return
	}
	fl.queued[f] = true
	fl.queue = append(fl.queue, f)
	fl.cond.Signal()
}

func (fl *flusher) run() {
	defer fl.wg.Done()
	for {
		fl.mu.Lock()
		for len(fl.queue) == 0 && !fl.stopped {
			fl.cond.Wait()
		}
		if fl.stopped {
			fl.mu.Unlock()
			return
		}
		f := fl.queue[0]
		fl.queue[0] = nil
		fl.queue = fl.queue[1:]
		delete(fl.queued, f)
		fl.inflight++
		fl.mu.Unlock()

		deferred, err := f.writeBackPages(false, false, true)

		fl.mu.Lock()
		fl.inflight--
		fl.mu.Unlock()
		if err != nil {
			// The pages stay dirty; retry later. fsync reports the error.
			fl.fs.logf("write-back of %v failed (will retry): %v", f.key, err)
			time.AfterFunc(time.Second, func() { fl.enqueue(f) })
		} else if deferred {
			fl.deferFile(f)
		} else {
			fl.fs.retireIfOver(f)
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
	return int64(len(fl.queue) + fl.inflight + fl.deferred)
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
