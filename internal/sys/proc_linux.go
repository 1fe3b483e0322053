package sys

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// PidAlive reports whether a process with this pid exists in the caller's pid
// namespace and has not exited: kill(pid, 0) succeeds (EPERM means it exists
// but belongs to someone else) and /proc/PID/stat does not show a zombie. A
// recycled pid is indistinguishable from the original process; callers that
// break locks of dead owners accept that.
func PidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := unix.Kill(pid, 0); err != nil && err != unix.EPERM {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// pid (comm) STATE ...; comm may contain ')' so take the last one.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	switch stat[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// SchedYield gives the CPU to another runnable thread on this core, if any
// (sched_yield). Spin loops call it so that a peer process queued behind the
// spinner on a machine with few cores gets to run.
func SchedYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
