package sys

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations (linux/futex.h). The shared (non-PRIVATE) forms are used on
// purpose: the futex word lives in a MAP_SHARED mapping and the waiter and the
// waker may be different processes, which the kernel matches by the backing
// page, not by the virtual address.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// ErrFutexTimeout is returned by FutexWait when the timeout elapsed.
var ErrFutexTimeout = errors.New("futex wait timed out")

// FutexWait sleeps while *addr == val, for at most timeout (<= 0: no limit).
// It returns nil when woken (or on a spurious wake-up), nil as well when *addr
// no longer held val at the time of the call (EAGAIN), ErrFutexTimeout on
// timeout; EINTR is reported as nil so callers simply re-check their
// condition. addr must be 4-byte aligned.
func FutexWait(addr *uint32, val uint32, timeout time.Duration) error {
	var tsp unsafe.Pointer
	var ts unix.Timespec
	if timeout > 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		tsp = unsafe.Pointer(&ts)
	}
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)),
		futexWait, uintptr(val), uintptr(tsp), 0, 0)
	switch errno {
	case 0, unix.EAGAIN, unix.EINTR:
		return nil
	case unix.ETIMEDOUT:
		return ErrFutexTimeout
	default:
		return errno
	}
}

// FutexWake wakes at most n waiters sleeping on addr and returns how many
// were woken.
func FutexWake(addr *uint32, n int) (int, error) {
	r, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)),
		futexWake, uintptr(n), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
