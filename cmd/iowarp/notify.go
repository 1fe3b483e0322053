package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/sdnotify"
	"github.com/iowarp/iowarp/internal/units"
)

// The daemon under systemd (contrib/systemd, Type=notify): READY=1 once
// the mount is up, STOPPING=1 when a stop begins, then a STATUS= line
// with the dirty bytes left every drainStatusEvery while it drains, and
// EXTEND_TIMEOUT_USEC while write-back makes progress, so that a long
// but moving drain is not killed at TimeoutStopSec. Without
// $NOTIFY_SOCKET all of it does nothing.

const (
	drainStatusEvery = time.Second
	// drainExtend is how much longer systemd is asked to wait after each
	// sign of progress; a drain that moves nothing for this long is left
	// to TimeoutStopSec (and the config's drain_timeout).
	drainExtend = 30 * time.Second
)

var notifyWarnOnce sync.Once

// notify sends state and warns once if it cannot be sent.
func notify(state string) {
	if err := sdnotify.Notify(state); err != nil {
		notifyWarnOnce.Do(func() { logrus.Warnf("systemd notification: %v", err) })
	}
}

// notifyReady tells the service manager that the daemon serves.
func notifyReady(status string) {
	notify(fmt.Sprintf("READY=1\nMAINPID=%d\n%s", os.Getpid(), sdnotify.Status(status)))
}

// drainStatus reports a drain to the service manager until Close.
type drainStatus struct {
	stop chan struct{}
	done chan struct{}
}

// startDrainStatus sends STOPPING=1 and starts the periodic status of a
// drain to backing; stats reads the file layer. It returns nil (a valid
// receiver of Close) without a service manager.
func startDrainStatus(stats func() files.Stats, backing string) *drainStatus {
	if !sdnotify.Enabled() {
		return nil
	}
	notify("STOPPING=1\n" + sdnotify.Status(drainLine(stats(), backing)))
	s := &drainStatus{stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop(stats, backing)
	return s
}

func (s *drainStatus) loop(stats func() files.Stats, backing string) {
	defer close(s.done)
	t := time.NewTicker(drainStatusEvery)
	defer t.Stop()
	last := stats().FlushedBytes
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		st := stats()
		msg := sdnotify.Status(drainLine(st, backing))
		if st.FlushedBytes != last {
			last = st.FlushedBytes
			msg += fmt.Sprintf("\nEXTEND_TIMEOUT_USEC=%d", drainExtend.Microseconds())
		}
		notify(msg)
	}
}

// drainLine is the STATUS= text of a drain in progress.
func drainLine(st files.Stats, backing string) string {
	if st.Mode == files.Scratch {
		return fmt.Sprintf("stopping: scratch mode, %s dropped", units.FormatSize(st.DirtyBytes))
	}
	return fmt.Sprintf("draining: %s dirty (%d bytes) left to write back to %s, %s written back",
		units.FormatSize(st.DirtyBytes), st.DirtyBytes, backing, units.FormatSize(int64(st.FlushedBytes)))
}

// Close stops the periodic status and sends the final one.
func (s *drainStatus) Close(final string) {
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
	notify(sdnotify.Status(final))
}
