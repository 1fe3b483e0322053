package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/iowarp/iowarp/internal/units"
	"github.com/schollz/progressbar/v3"
)

// Progress of the operations that can take more than a second (the drain,
// stage-in and stage-out, export, assimilate --eager). On a terminal it is
// one line that updates (progressbar); elsewhere (a pipe, a Slurm log, the
// daemon's log file) a plain line every progressInterval, so that a log
// shows the operation moving without a line per update:
//
//	stage-in: 96.0MiB of 1.0GiB (9%), 48.0MiB/s, 928.0MiB left, ETA 19s

// defaultProgressEvery is the interval of the plain lines; env
// IOWARP_PROGRESS_INTERVAL (a Go duration) overrides it.
const defaultProgressEvery = 5 * time.Second

func progressInterval() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("IOWARP_PROGRESS_INTERVAL")); err == nil && d > 0 {
		return d
	}
	return defaultProgressEvery
}

// progress reports how far one operation is. Safe for concurrent use.
type progress struct {
	desc  string
	every time.Duration
	start time.Time
	// line writes a plain line (nil: on a terminal, the bar does it).
	line func(string)

	mu          sync.Mutex
	bar         *progressbar.ProgressBar
	total, done int64
	last        time.Time // of the last plain line
}

// newProgress reports on w: a bar if w is a terminal, else plain lines.
func newProgress(w io.Writer, desc string, total int64) *progress {
	p := &progress{desc: desc, every: progressInterval(), start: time.Now(), total: total}
	p.last = p.start
	if isTerminal(w) {
		p.bar = newBar(total, desc, w)
	} else {
		p.line = func(s string) { fmt.Fprintln(w, s) }
	}
	return p
}

// newLogProgress reports with a bar on tty when it is a terminal, else as
// lines through logf (the daemon's log).
func newLogProgress(tty io.Writer, desc string, total int64, logf func(string)) *progress {
	p := newProgress(tty, desc, total)
	if p.bar == nil {
		p.line = logf
	}
	return p
}

// Update sets how much of total is done (total may change: more dirty
// data arrived during a drain).
func (p *progress) Update(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.total = done, max(total, done)
	if p.bar != nil {
		if p.bar.GetMax64() != p.total {
			p.bar.ChangeMax64(p.total)
		}
		p.bar.Set64(done)
		return
	}
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.line(p.lineLocked(now))
	}
}

// Add adds n to what is done.
func (p *progress) Add(n int64) {
	p.mu.Lock()
	done, total := p.done+n, p.total
	p.mu.Unlock()
	p.Update(done, total)
}

// lineLocked is the plain line: done of total, the mean rate since the
// start, what is left and when it should be done at that rate.
func (p *progress) lineLocked(now time.Time) string {
	pct := 100
	if p.total > 0 {
		pct = int(100 * p.done / p.total)
	}
	secs := now.Sub(p.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(p.done) / secs
	}
	left := p.total - p.done
	eta := "unknown"
	if rate > 0 {
		eta = (time.Duration(float64(left) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("%s: %s of %s (%d%%), %s/s, %s left, ETA %s", p.desc, units.FormatSize(p.done),
		units.FormatSize(p.total), pct, units.FormatSize(int64(rate)), units.FormatSize(left), eta)
}

// Finish ends the bar (its line stays on the terminal, ended by a
// newline); plain lines say nothing more: the caller's summary follows.
func (p *progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
	}
}
