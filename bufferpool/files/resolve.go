package files

import (
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Entries of the namespace are reached through a directory fd and one
// name, never by their whole path: a system call takes a path of at most
// PATH_MAX (4096) bytes, while a tree may be deeper (only a component is
// bounded, by NAME_MAX, as on the backing file system itself). The walk
// from the root to the parent directory never follows a symlink, so
// nothing outside the namespace directory is reached even if a directory
// of the backing store was replaced by a symlink behind our back.

// at is an entry named by its parent directory and its name in it.
type at struct {
	dir  int    // fd of the parent directory (O_PATH, or the root's)
	name string // one component, or "." for the root itself
	own  bool   // dir was opened for this entry: close it
}

func (a at) close() {
	if a.own {
		unix.Close(a.dir)
	}
}

// at resolves a validated path r (from rel) to its parent directory and
// last name. The caller calls close.
func (fs *FS) at(r string) (at, error) {
	i := strings.LastIndexByte(r, '/')
	if i < 0 {
		return at{dir: fs.rootFd, name: r}, nil
	}
	fd, err := fs.walk(r[:i])
	if err != nil {
		return at{}, err
	}
	return at{dir: fd, name: r[i+1:], own: true}, nil
}

// at2 resolves both paths of a link or rename; on error nothing is left
// open.
func (fs *FS) at2(a, b string) (at, at, error) {
	ra, err := fs.at(a)
	if err != nil {
		return at{}, at{}, err
	}
	rb, err := fs.at(b)
	if err != nil {
		ra.close()
		return at{}, at{}, err
	}
	return ra, rb, nil
}

// openDir opens directory r (validated) for reading: getdents, fsync.
func (fs *FS) openDir(r string) (int, error) {
	a, err := fs.at(r)
	if err != nil {
		return -1, err
	}
	defer a.close()
	return unix.Openat(a.dir, a.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
}

// walk opens directory d (a validated path, not ".") as an O_PATH fd,
// following no symlink. Each openat2 call resolves at most maxWalk bytes,
// so a path of any length takes len/maxWalk+1 calls; without openat2 (an
// old kernel, a seccomp filter) it opens one component at a time.
func (fs *FS) walk(d string) (int, error) {
	if noOpenat2.Load() {
		return walkComponents(fs.rootFd, d)
	}
	full, cur := d, fs.rootFd
	for d != "" {
		chunk, rest := splitWalk(d)
		fd, err := openBeneath(cur, chunk)
		if (err == unix.ENOSYS || err == unix.EPERM) && !openat2Works(fs.rootFd) {
			noOpenat2.Store(true)
			closeWalk(fs, cur)
			return walkComponents(fs.rootFd, full)
		}
		closeWalk(fs, cur)
		if err != nil {
			return -1, err
		}
		cur, d = fd, rest
	}
	return cur, nil
}

// openBeneath opens directory d below dir with openat2, following no
// symlink. The kernel may answer EAGAIN when a rename races with a
// RESOLVE_BENEATH walk; that is retried a few times.
func openBeneath(dir int, d string) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(dir, d, how)
		if err != unix.EAGAIN || try == 8 {
			return fd, err
		}
	}
}

// maxWalk is the longest path handed to one openat2 (PATH_MAX less the
// terminating NUL).
const maxWalk = unix.PathMax - 1

// noOpenat2 is set once openat2 turned out to be unavailable.
var noOpenat2 atomic.Bool

// splitWalk cuts d after the last component that ends within maxWalk
// bytes. A single component is never longer than NAME_MAX, so chunk is
// never empty.
func splitWalk(d string) (chunk, rest string) {
	if len(d) <= maxWalk {
		return d, ""
	}
	i := strings.LastIndexByte(d[:maxWalk+1], '/')
	return d[:i], d[i+1:]
}

// openat2Works tells an openat2 refused by the kernel or a seccomp
// filter (ENOSYS, EPERM) from one that failed on the path: "." of the
// root can always be opened.
func openat2Works(root int) bool {
	fd, err := unix.Openat2(root, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

func closeWalk(fs *FS, fd int) {
	if fd != fs.rootFd {
		unix.Close(fd)
	}
}

// walkComponents is walk by one openat per component, each with
// O_NOFOLLOW: a symlink fails with ENOTDIR instead of being followed.
func walkComponents(root int, d string) (int, error) {
	cur := root
	for _, name := range strings.Split(d, "/") {
		fd, err := unix.Openat(cur, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != root {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}
