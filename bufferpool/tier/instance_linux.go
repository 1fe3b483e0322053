package tier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A file tier keeps the files of one daemon in an instance directory,
// DIR/iowarp-<pid>-<start>/, holding a lock file that the daemon keeps
// flock'ed for its life, its segment files and its journal. A directory
// whose lock nobody holds belongs to a daemon that is gone (killed): its
// files are stale. Open takes the lock of every stale directory it
// finds, so that two daemons never replay or remove the same one, and
// reports them (Device.Stale); the owner replays and removes them.

const (
	instancePrefix = "iowarp-"
	lockName       = "lock"
	// legacyPrefix names the segment files of daemons built before
	// instance directories: always stale.
	legacyPrefix = "iowarp-seg-"
)

// instance is an instance directory and the open fd of its lock file,
// flock'ed exclusively while the instance is held.
type instance struct {
	dir  string
	lock *os.File
}

// newInstance creates and locks this process's instance directory.
func newInstance(dir string) (*instance, error) {
	name := fmt.Sprintf("%s%d-%d", instancePrefix, os.Getpid(), time.Now().UnixNano())
	path := filepath.Join(dir, name)
	if err := os.Mkdir(path, 0o700); err != nil {
		return nil, fmt.Errorf("instance directory: %w", err)
	}
	in, ok, err := lockInstance(path)
	if err != nil || !ok {
		os.RemoveAll(path)
		return nil, fmt.Errorf("lock instance directory %s: %w", path, errors.Join(err, unix.EWOULDBLOCK))
	}
	return in, nil
}

// lockInstance opens and try-locks dir's lock file (creating it): ok is
// false when a live daemon holds it.
func lockInstance(dir string) (*instance, bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return &instance{dir: dir, lock: f}, true, nil
}

// remove deletes the directory and everything in it, then drops the lock.
func (in *instance) remove() error {
	err := os.RemoveAll(in.dir)
	in.lock.Close()
	return err
}

// findStale locks and returns the instance directories under dir that no
// live daemon holds, and removes legacy segment files (a daemon of an
// older build left them; nothing can replay them).
func findStale(dir string) ([]*instance, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	var stale []*instance
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasPrefix(name, legacyPrefix) && e.Type().IsRegular():
			os.Remove(path)
		case strings.HasPrefix(name, instancePrefix) && e.IsDir() && isInstanceName(name):
			if !ownedPrivate(path) {
				continue // not a directory this user's daemon made: never trust it
			}
			in, ok, err := lockInstance(path)
			if err != nil {
				continue // unreadable: leave it alone
			}
			if ok {
				stale = append(stale, in)
			}
		}
	}
	return stale, nil
}

// ownedPrivate reports whether path is owned by this process's user and
// writable by nobody else: a journal someone else could write would let
// them choose what a root daemon writes where.
func ownedPrivate(path string) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return false
	}
	return int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0
}

// isInstanceName reports whether name is iowarp-<pid>-<start>.
func isInstanceName(name string) bool {
	pid, start, ok := strings.Cut(strings.TrimPrefix(name, instancePrefix), "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(pid, 10, 32)
	_, err2 := strconv.ParseUint(start, 10, 64)
	return err1 == nil && err2 == nil
}

// diskUsage is the bytes the files under dir take on disk.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// releaseAll unlocks instance directories without removing them.
func releaseAll(ins []*instance) {
	for _, in := range ins {
		in.lock.Close()
	}
}
