package posixtest

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// deepTree: every namespace operation works on entries whose path from the
// case's directory is 4095 bytes and more than 8 KiB long (pjdfstest's
// */03 cases). Path system calls refuse paths of PATH_MAX or more, so the
// case goes down with *at calls relative to directory fds, as pjdfstest
// does; a file system must bound only a component (NAME_MAX).
func deepTree(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	top := r.openDirAt(unix.AT_FDCWD, dir, "case dir")
	fd, depth := top, 0
	for level := 1; level <= 41; level++ {
		name := fmt.Sprintf("%03d-%s", level, strings.Repeat("d", 196))
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			r.must(fmt.Sprintf("mkdirat level %d", level), err)
		}
		fd = r.openDirAt(fd, name, fmt.Sprintf("level %d", level))
		depth += len(name) + 1
		switch level {
		case 20: // a file name that ends the path at 4095 bytes
			r.deepOps(top, fd, strings.Repeat("f", unix.PathMax-1-depth), depth)
		case 41: // past 8 KiB
			r.deepOps(top, fd, "f", depth)
		}
	}
	return r.out
}

// openDirAt opens directory name in dirfd (a prerequisite, recorded only
// when it fails).
func (r *rec) openDirAt(dirfd int, name, label string) int {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.must("open dir "+label, err)
	}
	r.t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// fstatat records the portable attributes of name in dirfd.
func (r *rec) fstatat(label string, dirfd int, name string, flags int) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, flags)
	if err != nil {
		r.logf("fstatat %s: %s", label, errName(err))
		return
	}
	r.logf("fstatat %s: %s", label, statLine(&st))
}

// proc names an entry of dirfd by a short path, for the calls that have
// no *at form (truncate, xattrs).
func proc(dirfd int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(dirfd) + "/" + name
}

// deepOps runs create, stat, chmod, chown, utimens, truncate, rename,
// link, symlink, mkfifo, mkdir/rmdir, readdir and unlink in dirfd, which
// is depth bytes below top; f is the file's name.
func (r *rec) deepOps(top, dirfd int, f string, depth int) {
	r.logf("at depth %d, file path %d bytes", depth, depth+len(f))
	fd, err := unix.Openat(dirfd, f, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o640)
	r.must("openat O_CREAT|O_EXCL", err)
	r.write(fd, []byte("deep data"))
	r.fstat("created", fd)
	unix.Close(fd)
	r.fstatat("file", dirfd, f, unix.AT_SYMLINK_NOFOLLOW)
	r.do("fchmodat 0600", unix.Fchmodat(dirfd, f, 0o600, 0))
	r.do("fchownat 1:2", unix.Fchownat(dirfd, f, 1, 2, unix.AT_SYMLINK_NOFOLLOW))
	ts := []unix.Timespec{{Sec: 1_000_000_000}, {Sec: 1_100_000_000}}
	r.do("utimensat", unix.UtimesNanoAt(dirfd, f, ts, unix.AT_SYMLINK_NOFOLLOW))
	var st unix.Stat_t
	if unix.Fstatat(dirfd, f, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		r.logf("mtime %d", st.Mtim.Sec)
	}
	r.do("truncate 4 (by /proc path)", unix.Truncate(proc(dirfd, f), 4))
	fd, err = unix.Openat(dirfd, f, unix.O_RDWR|unix.O_CLOEXEC, 0)
	r.must("openat O_RDWR", err)
	r.do("ftruncate 3", unix.Ftruncate(fd, 3))
	r.pread(fd, 16, 0)
	unix.Close(fd)
	r.fstatat("file", dirfd, f, unix.AT_SYMLINK_NOFOLLOW)
	r.do("renameat f r", unix.Renameat(dirfd, f, dirfd, "r"))
	r.fstatat("old name", dirfd, f, unix.AT_SYMLINK_NOFOLLOW)
	r.do("linkat r l", unix.Linkat(dirfd, "r", dirfd, "l", 0))
	r.fstatat("link", dirfd, "l", unix.AT_SYMLINK_NOFOLLOW)
	r.do("symlinkat s -> r", unix.Symlinkat("r", dirfd, "s"))
	buf := make([]byte, 64)
	n, err := unix.Readlinkat(dirfd, "s", buf)
	r.logf("readlinkat s: %s %q", errName(err), buf[:max(n, 0)])
	r.fstatat("symlink followed", dirfd, "s", 0)
	r.do("mknodat fifo p", unix.Mknodat(dirfd, "p", unix.S_IFIFO|0o644, 0))
	r.fstatat("fifo", dirfd, "p", unix.AT_SYMLINK_NOFOLLOW)
	r.do("mkdirat sub", unix.Mkdirat(dirfd, "sub", 0o750))
	r.fstatat("sub", dirfd, "sub", unix.AT_SYMLINK_NOFOLLOW)
	r.do("unlinkat sub AT_REMOVEDIR", unix.Unlinkat(dirfd, "sub", unix.AT_REMOVEDIR))
	r.do("renameat l to the top", unix.Renameat(dirfd, "l", top, "up"))
	r.do("renameat it back down", unix.Renameat(top, "up", dirfd, "l"))
	r.readdirAt(dirfd)
	for _, name := range []string{"r", "l", "s", "p"} {
		r.do("unlinkat "+name, unix.Unlinkat(dirfd, name, 0))
	}
	r.readdirAt(dirfd)
}

// readdirAt records the sorted names of directory dirfd (subdirectories
// of the walk left out).
func (r *rec) readdirAt(dirfd int) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	r.must("open . for readdir", err)
	d := os.NewFile(uintptr(fd), "dir")
	defer d.Close()
	names, err := d.Readdirnames(-1)
	var kept []string
	for _, n := range names {
		if len(n) < 100 {
			kept = append(kept, n)
		}
	}
	sort.Strings(kept)
	r.logf("readdir: %s %v", errName(err), kept)
}
