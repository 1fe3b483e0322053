package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The daemon's log never stops the daemon. Its lines go through a
// logSink: a bounded queue drained by one goroutine into stderr or the
// log file. A line that cannot be written (the reader of a pipe is gone:
// `iowarp mount ... | tee log` after tee died; a full disk; a stalled
// pipe) is dropped and counted, never returned as an error and never
// waited for, so a drain in progress keeps going whatever happens to its
// output. SIGPIPE is caught (ignoreSIGPIPE): without that the Go runtime
// kills the process on the first write to a broken stdout or stderr pipe,
// dirty data and all.

// logQueue bounds the lines waiting to be written; more are dropped.
const logQueue = 4096

// logFlushWait bounds how long the exit waits for queued lines.
const logFlushWait = 2 * time.Second

// logSink is an io.Writer for logrus and the standard log package. Safe
// for concurrent use.
type logSink struct {
	done    chan struct{}
	dropped atomic.Uint64 // lines lost since the last line written
	lost    atomic.Uint64 // lines lost in total

	// qmu guards closing lines: Write holds it shared.
	qmu    sync.RWMutex
	lines  chan logEntry
	closed bool

	// mu guards the fields below; the writer goroutine holds it while
	// it writes one line.
	mu    sync.Mutex
	out   io.Writer // stderr, or file
	file  *os.File  // the open log file, nil when out is stderr
	path  string    // the log file ("" = stderr, nothing to reopen)
	stdio bool      // reopen also puts the new file on fds 1 and 2
}

// logEntry is a line to write, or (line nil) a Flush marker to close.
type logEntry struct {
	line    []byte
	flushed chan struct{}
}

// sink is the process's log sink (installed by run).
var sink *logSink

func newLogSink(out io.Writer) *logSink {
	s := &logSink{lines: make(chan logEntry, logQueue), done: make(chan struct{}), out: out}
	go s.writer()
	return s
}

// installLogSink sends logrus and the standard log package (go-fuse's
// debug output) through a new sink on stderr.
func installLogSink() *logSink {
	s := newLogSink(os.Stderr)
	logrus.SetOutput(s)
	log.SetOutput(s)
	return s
}

// Write queues a copy of p. It never fails and never blocks: a line
// that finds the queue full (or the sink closed) is dropped.
func (s *logSink) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	s.qmu.RLock()
	defer s.qmu.RUnlock()
	if s.closed {
		s.drop()
		return len(p), nil
	}
	select {
	case s.lines <- logEntry{line: line}:
	default:
		s.drop()
	}
	return len(p), nil
}

// Flush waits until the lines queued before it are written, at most
// logFlushWait.
func (s *logSink) Flush() {
	e := logEntry{flushed: make(chan struct{})}
	timeout := time.After(logFlushWait)
	s.qmu.RLock()
	if s.closed {
		s.qmu.RUnlock()
		return
	}
	select {
	case s.lines <- e:
	case <-timeout:
	}
	s.qmu.RUnlock()
	select {
	case <-e.flushed:
	case <-timeout:
	}
}

func (s *logSink) drop() {
	s.dropped.Add(1)
	s.lost.Add(1)
}

func (s *logSink) writer() {
	defer close(s.done)
	for e := range s.lines {
		if e.flushed != nil {
			close(e.flushed)
			continue
		}
		s.writeLine(e.line)
	}
}

// writeLine writes one line, first saying how many were lost before it.
func (s *logSink) writeLine(line []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.dropped.Load(); n > 0 {
		note := fmt.Sprintf("%s WARNING %d log lines were lost (the log output failed or fell behind)\n",
			time.Now().Format(time.RFC3339), n)
		if _, err := s.out.Write([]byte(note)); err != nil {
			s.drop()
			return
		}
		s.dropped.Add(-n)
	}
	if _, err := s.out.Write(line); err != nil {
		s.drop()
	}
}

// Lost returns how many lines were dropped in total.
func (s *logSink) Lost() uint64 { return s.lost.Load() }

// UseFile makes the sink write to the file at path (created 0600,
// appended to), which Reopen opens again. With stdio, fds 1 and 2 are
// made to point at it too (a daemon child, whose stdout and stderr are
// the log file: after a rotation, a panic's trace must land in the new
// file as well).
func (s *logSink) UseFile(path string, stdio bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.path, s.stdio = path, stdio
	return s.reopenLocked()
}

// Path is the log file, "" when the log goes to stderr.
func (s *logSink) Path() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.path
}

// Reopen opens the log file again (logrotate has renamed it: the next
// line goes to a new file under the configured name). Without a log file
// it does nothing.
func (s *logSink) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.path == "" {
		return nil
	}
	return s.reopenLocked()
}

func (s *logSink) reopenLocked() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	if s.stdio {
		for _, fd := range []int{1, 2} {
			if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
				f.Close()
				return fmt.Errorf("log file on fd %d: %w", fd, err)
			}
		}
	}
	if s.file != nil {
		s.file.Close()
	}
	s.file, s.out = f, f
	return nil
}

// Close writes what is queued, waiting at most logFlushWait (an output
// that blocks costs that, not a hung exit), and stops the sink; later
// lines are dropped.
func (s *logSink) Close() {
	s.qmu.Lock()
	if s.closed {
		s.qmu.Unlock()
		return
	}
	s.closed = true
	close(s.lines)
	s.qmu.Unlock()
	select {
	case <-s.done:
	case <-time.After(logFlushWait):
	}
}

// ignoreSIGPIPE makes a write to a broken pipe on fd 1 or 2 fail with
// EPIPE instead of killing the process. signal.Notify rather than
// signal.Ignore: an ignored disposition would be inherited by the
// programs the daemon starts (format helpers, umount).
func ignoreSIGPIPE() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
