package files

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The health of a file's write-back: what a failing backing store looks
// like from outside (one log line per file and cause, `iowarp stat`), and
// the back-off of the retries.

const (
	// retryMin and retryMax bound the back-off of a failing file's
	// retries: 100 ms, doubling, at most 5 s.
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
	// logEvery rate-limits the "failing" line of one file and cause: a
	// flapping store logs one failing/recovered pair per file and cause
	// in this time at most.
	logEvery = time.Minute
	// maxFailingListed bounds Stats.FailingFiles.
	maxFailingListed = 64
)

// wbHealth is a file's write-back state. Guarded by file.stateMu.
type wbHealth struct {
	err      error                // the last attempt's error; nil while healthy
	cause    string               // errno name (or error text) of err
	since    time.Time            // first failure of the current streak
	attempts int                  // failed attempts in the current streak
	logged   bool                 // a failing line was logged for this streak
	lastLog  map[string]time.Time // time of the last failing line, per cause
}

// FailingFile is a file whose write-back is failing, in Stats.
type FailingFile struct {
	Path       string    `json:"path"`  // the path it was last opened by
	Errno      string    `json:"errno"` // the cause: ENOSPC, EROFS, EIO ...
	Error      string    `json:"error"` // the last attempt's error
	Since      time.Time `json:"since"` // first failure of this streak
	Attempts   int       `json:"attempts"`
	DirtyBytes int64     `json:"dirty_bytes"` // in the pool, not on the backing store
}

// WriteBackInFlight is a write-back still running, in Stats: a backing
// store that hangs (or is merely slow) shows here before anything fails.
type WriteBackInFlight struct {
	Path  string    `json:"path"`
	Since time.Time `json:"since"`
}

// longestWriteBack is the write-back of files running longest, or nil.
func longestWriteBack(files []*file) *WriteBackInFlight {
	var oldest *file
	var t0 int64
	for _, f := range files {
		if t := f.wbStart.Load(); t != 0 && (oldest == nil || t < t0) {
			oldest, t0 = f, t
		}
	}
	if oldest == nil {
		return nil
	}
	return &WriteBackInFlight{Path: oldest.displayName(), Since: time.Unix(0, t0)}
}

// causeOf names the cause of a write-back error: the errno the backing
// store gave, else the text of the innermost error (without the page
// numbers of the wrappers, so that one cause is one cause).
func causeOf(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return errno.Error()
	}
	for inner := errors.Unwrap(err); inner != nil; inner = errors.Unwrap(err) {
		err = inner
	}
	return err.Error()
}

// backoff is the wait before retry number attempts+1.
func backoff(attempts int) time.Duration {
	d := retryMin
	for i := 1; i < attempts && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// setName records the path f was opened by, for logs and stat.
func (f *file) setName(p string) {
	f.stateMu.Lock()
	f.name = p
	f.stateMu.Unlock()
}

// displayName is nameLocked for callers without stateMu.
func (f *file) displayName() string {
	f.stateMu.Lock()
	defer f.stateMu.Unlock()
	return f.nameLocked()
}

func (f *file) nameLocked() string {
	if f.name == "" {
		return "inode " + strconv.FormatUint(f.key.ino, 10)
	}
	return f.name
}

// noteWriteBack records the outcome of a write-back attempt of f: the
// first failure with a cause is logged (rate-limited per cause), the
// recovery too, and a failed file is retried after a back-off.
func (f *file) noteWriteBack(err error) {
	if err == nil {
		f.noteRecovered("write-back of %s works again after %v (%d failed attempts)")
		return
	}
	f.fs.stats.flushErrors.Add(1)
	now, cause := time.Now(), causeOf(err)
	f.stateMu.Lock()
	h := &f.health
	if h.err == nil {
		h.since = now
	}
	fresh := h.err == nil || h.cause != cause
	h.err, h.cause = err, cause
	h.attempts++
	attempts := h.attempts
	logIt := fresh && now.Sub(h.lastLog[cause]) >= logEvery
	if logIt {
		if h.lastLog == nil {
			h.lastLog = make(map[string]time.Time)
		}
		h.lastLog[cause] = now
		h.logged = true
	}
	name := f.nameLocked()
	f.stateMu.Unlock()
	if logIt {
		f.fs.log().WithField("file", name).WithField("cause", cause).Errorf(
			"write-back of %s failing (%s): %v; its dirty data stay in the pool and are retried (every %v at most); fsync reports the error",
			name, cause, err, retryMax)
	}
	f.fs.flusher.retry(f, backoff(attempts))
}

// noteRecovered ends a failing streak of f; format gets the name, the
// streak's duration and its failed attempts.
func (f *file) noteRecovered(format string) {
	f.stateMu.Lock()
	h := &f.health
	if h.err == nil {
		f.stateMu.Unlock()
		return
	}
	logIt, name, took, n := h.logged, f.nameLocked(), time.Since(h.since).Round(time.Millisecond), h.attempts
	h.err, h.cause, h.attempts, h.logged = nil, "", 0, false
	f.stateMu.Unlock()
	if logIt {
		f.fs.log().WithField("file", name).Infof(format, name, took, n)
	}
}

// failure describes f's failing write-back; ok is false while it is
// healthy. It takes no lock a write-back holds, so `iowarp stat` answers
// while the backing store hangs.
func (f *file) failure() (ff FailingFile, ok bool) {
	f.stateMu.Lock()
	h := f.health
	name := f.nameLocked()
	f.stateMu.Unlock()
	if h.err == nil {
		return ff, false
	}
	return FailingFile{Path: name, Errno: h.cause, Error: h.err.Error(), Since: h.since,
		Attempts: h.attempts, DirtyBytes: f.dirtyBytes()}, true
}

// dirtyBytes is the data of f's dirty pages, within its size.
func (f *file) dirtyBytes() int64 {
	ps, size := f.fs.ps, f.size.Load()
	var n int64
	for _, i := range f.bucket.DirtyPages() {
		n += max(0, min(ps, size-i*ps))
	}
	return n
}

// failures lists the files whose write-back is failing (sorted by path,
// at most maxFailingListed), how many there are, and their dirty bytes.
func (fs *FS) failures() (list []FailingFile, n int, stuck int64) {
	return failures(fs.liveFiles())
}

func failures(files []*file) (list []FailingFile, n int, stuck int64) {
	list = []FailingFile{} // [] in JSON, not null
	for _, f := range files {
		if ff, ok := f.failure(); ok {
			n++
			stuck += ff.DirtyBytes
			list = append(list, ff)
		}
	}
	slices.SortFunc(list, func(a, b FailingFile) int { return strings.Compare(a.Path, b.Path) })
	if len(list) > maxFailingListed {
		list = list[:maxFailingListed]
	}
	return list, n, stuck
}
