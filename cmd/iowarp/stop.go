package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

// waitStopped waits for the daemon pid, sent SIGTERM, to exit (at most
// timeout; 0 = no bound), showing the drain on w from its statistics
// (the control socket at sock answers until the end of the drain).
func waitStopped(out io.Writer, sock string, pid int, timeout time.Duration) error {
	start := time.Now()
	var p *progress
	var w *drainWatch
	for syscall.Kill(pid, 0) == nil {
		if timeout > 0 && time.Since(start) > timeout {
			return fmt.Errorf("pid %d still draining after %v", pid, timeout)
		}
		var st files.Stats
		if control.CallWithin(sock, "stats", &st, time.Second) == nil {
			if p == nil {
				w = newDrainWatch(st)
				p = newProgress(out, fmt.Sprintf("drain (pid %d)", pid), w.total)
			}
			p.Update(w.next(st))
		}
		time.Sleep(drainEvery)
	}
	var total int64
	if p != nil {
		total = w.total
		p.Update(total, total)
		p.Finish()
	}
	logrus.Infof("pid %d drained %s and exited in %v", pid, units.FormatSize(total),
		time.Since(start).Round(time.Millisecond))
	return nil
}

// drainWatch turns successive statistics into the drain's progress: the
// bytes written back since the first (the write-back counts each range it
// writes, while pages turn clean only once their file is synced) of the
// dirty bytes then, a total that grows if more than that is written.
type drainWatch struct {
	flushed0    uint64
	total, done int64
}

func newDrainWatch(st files.Stats) *drainWatch {
	return &drainWatch{flushed0: st.FlushedBytes, total: st.DirtyBytes}
}

// next returns done and total after st.
func (w *drainWatch) next(st files.Stats) (done, total int64) {
	written := int64(st.FlushedBytes - w.flushed0)
	w.done = max(w.done, written, w.total-st.DirtyBytes)
	w.total = max(w.total, w.done)
	return w.done, w.total
}
