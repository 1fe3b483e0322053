package fusefs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// toErrno is the one place where an error of the file layer becomes the
// errno of a FUSE reply. An errno wrapped anywhere in the chain passes
// through; the sentinels of the file layer map to their errno; anything
// else is logged (once per distinct message) and answered with EIO, so
// that an unexpected failure is never reported as success.
func toErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno) && errno != 0:
		return errno
	case errors.Is(err, files.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	unknown.log(err)
	return syscall.EIO
}

// unknownErrors logs each distinct unknown error message once, so that a
// failing backing store does not flood the log with one line per request.
type unknownErrors struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// maxSeen bounds the memory of the de-duplication set; past it the set
// starts over (a message may then be logged again).
const maxSeen = 1024

var unknown unknownErrors

func (u *unknownErrors) log(err error) {
	msg := err.Error()
	u.mu.Lock()
	_, dup := u.seen[msg]
	if !dup {
		if u.seen == nil || len(u.seen) >= maxSeen {
			u.seen = make(map[string]struct{})
		}
		u.seen[msg] = struct{}{}
	}
	u.mu.Unlock()
	if !dup {
		logrus.WithError(err).WithField("type", fmt.Sprintf("%T", err)).
			Error("fusefs: unexpected error from the file layer, answering EIO")
	}
}

// panicHandler recovers a panic in any FUSE handler (go-fuse calls it from
// its request loop): the stack is logged and the request answered EIO.
func panicHandler(v any) fuse.Status {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	logrus.WithField("panic", fmt.Sprint(v)).WithField("stack", string(buf)).
		Error("fusefs: panic in FUSE handler, answering EIO")
	return fuse.EIO
}
