package shm

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/iowarp/iowarp/internal/sys"
)

// A lock is one 32-bit word in shared memory:
//
//	0                 unlocked
//	pid               held by a process with this pid, nobody sleeping
//	pid | lockWaiters held, and at least one waiter may sleep on the futex
//
// Lock: CAS 0→pid; otherwise spin a bounded number of times, then set
// lockWaiters and FUTEX_WAIT on the word in slices of lockProbe. After each
// slice that timed out, the waiter checks that the owner pid still exists
// (kill(pid, 0)); if not, it takes the lock over with one CAS from the exact
// value it saw, so of several waiters exactly one breaks it. Unlock: swap to
// 0, FUTEX_WAKE one waiter only when lockWaiters was set.
//
// Goroutines of one process share a pid: the word says which process holds
// the lock, not which goroutine, which is all liveness needs.
const (
	lockWaiters = 1 << 31
	lockPidMask = lockWaiters - 1
	lockMaxPid  = 1 << 22 // PID_MAX_LIMIT on 64-bit Linux
	lockSpin    = 64
	lockYield   = 4
	lockProbe   = 20 * time.Millisecond
)

// DefaultLockTimeout bounds how long a lock wait may last while the owner is
// alive. A shared lock held that long is a bug or a hostile process.
const DefaultLockTimeout = 5 * time.Second

var selfPid = uint32(os.Getpid())

// lockWord acquires the lock at w. recovered reports that the lock was taken
// over from a dead owner: what it guarded may be half-updated.
func lockWord(w *uint32, timeout time.Duration) (recovered bool, err error) {
	if atomic.CompareAndSwapUint32(w, 0, selfPid) {
		return false, nil
	}
	if spinLock(w) {
		return false, nil
	}
	return lockSlow(w, timeout)
}

// spinLock tries a bounded number of times, yielding the processor now and
// then so that on a machine with few cores the owner gets to run.
func spinLock(w *uint32) bool {
	for i := 0; i < lockYield; i++ {
		for j := 0; j < lockSpin; j++ {
			if atomic.LoadUint32(w) == 0 && atomic.CompareAndSwapUint32(w, 0, selfPid) {
				return true
			}
		}
		runtime.Gosched()
	}
	return false
}

func lockSlow(w *uint32, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		v := atomic.LoadUint32(w)
		if v == 0 {
			// Keep lockWaiters: others may still sleep.
			if atomic.CompareAndSwapUint32(w, 0, selfPid|lockWaiters) {
				return false, nil
			}
			continue
		}
		owner := v & lockPidMask
		if owner == 0 || owner >= lockMaxPid {
			return false, fmt.Errorf("lock word %#x: %w", v, ErrCorrupt)
		}
		if v&lockWaiters == 0 && !atomic.CompareAndSwapUint32(w, v, v|lockWaiters) {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, fmt.Errorf("held by pid %d: %w", owner, ErrLockTimeout)
		}
		err := sys.FutexWait(w, v|lockWaiters, min(left, lockProbe))
		if err == nil {
			continue
		}
		if err != sys.ErrFutexTimeout {
			return false, fmt.Errorf("futex wait: %w", err)
		}
		if !sys.PidAlive(int(owner)) && atomic.CompareAndSwapUint32(w, v|lockWaiters, selfPid|lockWaiters) {
			return true, nil
		}
	}
}

// unlockWord releases the lock at w.
func unlockWord(w *uint32) {
	if atomic.SwapUint32(w, 0)&lockWaiters != 0 {
		sys.FutexWake(w, 1)
	}
}
