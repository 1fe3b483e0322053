// Package leakcheck fails a test binary that leaks file descriptors or
// FUSE mounts. Each package's TestMain runs its tests through Run:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run)) }
//
// Run points TMPDIR (so t.TempDir and os.MkdirTemp("", ...)) at a fresh
// directory of this process, snapshots the open fds (/proc/self/fd) and
// the mounts, runs the tests, and compares. An fd open afterwards that was
// not open before — a regular file, a directory, a socket, a pipe, a
// memfd, /dev/fuse — or a FUSE mount under that directory fails the
// binary (exit status 1) with the list; a leaked mount is then detached,
// so that a failing run leaves none behind.
//
// Not leaks: the fds the Go runtime opens once, lazily (the netpoller's
// epoll and eventfd, pidfds of os/exec), which are ignored by their
// anon_inode type; go-fuse's process-wide splice pipes (its pool is
// emptied before the check) and its /dev/null (opened in the warm-up);
// and fds that are closed a moment after the tests end
// (a server goroutine finishing its teardown): the check garbage-collects
// (closing *os.File values nobody references) and polls for up to
// settleTimeout before it reports what is still open.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iowarp/iowarp/internal/mountinfo"

	"github.com/hanwen/go-fuse/v2/splice"
)

// settleTimeout bounds the wait for fds closed asynchronously.
var settleTimeout = 5 * time.Second

// runtimeFds are the anon_inode kinds the Go runtime itself opens and
// keeps (netpoll) or opens per child process (pidfd).
var runtimeFds = []string{"anon_inode:[eventpoll]", "anon_inode:[eventfd]", "anon_inode:[pidfd]"}

// Run runs tests (m.Run, or a TestMain body that sets up and tears down
// around it) and returns its exit code, or 1 if it leaked.
func Run(tests func() int) int {
	// A short name: Unix socket paths under it must fit in 108 bytes.
	tmp, err := os.MkdirTemp("", "iow")
	if err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
		return 1
	}
	// Like /tmp: tests that run programs as another user need to reach
	// their directories through it.
	if err := os.Chmod(tmp, 0o1777); err != nil {
		fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
		return 1
	}
	oldTmp, hadTmp := os.LookupEnv("TMPDIR")
	os.Setenv("TMPDIR", tmp)
	warmUp()
	before := openFds()
	code := tests()
	leaks := settle(before, tmp)
	restoreEnv(oldTmp, hadTmp)
	os.RemoveAll(tmp)
	if len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: the tests leaked:\n\t%s\n", strings.Join(leaks, "\n\t"))
		return 1
	}
	return code
}

func restoreEnv(v string, ok bool) {
	if ok {
		os.Setenv("TMPDIR", v)
	} else {
		os.Unsetenv("TMPDIR")
	}
}

// warmUp makes the runtime open its netpoller, and go-fuse the /dev/null
// it splices into, now, so that their fds are in the first snapshot.
func warmUp() {
	r, w, err := os.Pipe()
	if err == nil {
		r.SetReadDeadline(time.Now())
		r.Close()
		w.Close()
	}
	if p, err := splice.Get(); err == nil {
		splice.Done(p) // discards into go-fuse's /dev/null
	}
	splice.ClearSplicePool()
}

// settle returns the leaks left once fds closed asynchronously are
// closed, detaching leaked mounts.
func settle(before map[int]string, tmp string) []string {
	deadline := time.Now().Add(settleTimeout)
	for {
		splice.ClearSplicePool() // pipes kept for the next FUSE reply
		runtime.GC()
		runtime.GC() // a finalizer queued by the first may free more
		fds := newFds(before, openFds())
		mounts := fuseMountsUnder(tmp)
		if len(fds)+len(mounts) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, m := range mounts {
				syscall.Unmount(m, syscall.MNT_DETACH)
			}
			return append(fds, prefix("FUSE mount ", mounts)...)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func prefix(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// openFds maps each open fd to what it names (readlink).
func openFds() map[int]string {
	out := map[int]string{}
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, de := range des {
		fd, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + de.Name())
		if err != nil {
			continue // the directory's own fd, closed by now
		}
		out[fd] = target
	}
	return out
}

// newFds lists the fds of now that were not open before (or now name
// something else), but for the runtime's own.
func newFds(before, now map[int]string) []string {
	var out []string
	for fd, target := range now {
		if before[fd] == target || slices.Contains(runtimeFds, target) {
			continue
		}
		out = append(out, fmt.Sprintf("fd %d: %s", fd, target))
	}
	slices.Sort(out)
	return out
}

// fuseMountsUnder lists the FUSE mount points under dir.
func fuseMountsUnder(dir string) []string {
	ms, err := mountinfo.Mounts()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		if strings.HasPrefix(m.FSType, "fuse") && (m.Point == dir || strings.HasPrefix(m.Point, dir+"/")) {
			out = append(out, m.Point)
		}
	}
	return out
}
