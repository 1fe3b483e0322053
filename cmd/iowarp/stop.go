package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/control"
)

// waitStopped waits for the daemon pid, sent SIGTERM, to exit (at most
// timeout; 0 = no bound), showing the drain on w from its statistics
// (the control socket at sock answers until the end of the drain).
func waitStopped(w io.Writer, sock string, pid int, timeout time.Duration) error {
	start := time.Now()
	var p *progress
	var total, written int64
	for syscall.Kill(pid, 0) == nil {
		if timeout > 0 && time.Since(start) > timeout {
			return fmt.Errorf("pid %d still draining after %v", pid, timeout)
		}
		var st files.Stats
		if control.CallWithin(sock, "stats", &st, time.Second) == nil {
			if p == nil {
				total = st.DirtyBytes
				p = newProgress(w, fmt.Sprintf("drain (pid %d)", pid), total)
			}
			written = max(written, total-st.DirtyBytes)
			total = max(total, written+st.DirtyBytes)
			p.Update(written, total)
		}
		time.Sleep(drainEvery)
	}
	if p != nil {
		p.Update(total, total)
		p.Finish()
	}
	logrus.Infof("pid %d drained %s and exited in %v", pid, runtime.FormatSize(total),
		time.Since(start).Round(time.Millisecond))
	return nil
}
