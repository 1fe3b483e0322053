package sys

import "golang.org/x/sys/unix"

// PidAlive reports whether a process with this pid exists in the caller's pid
// namespace (kill(pid, 0)). EPERM means it exists but belongs to someone else,
// which still counts as alive. A recycled pid is indistinguishable from the
// original process; callers that break locks of dead owners accept that.
func PidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}
