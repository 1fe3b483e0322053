// Package sys is the one place where iowarp issues raw Linux system calls
// that golang.org/x/sys/unix does not wrap in a convenient form. Other
// packages call these helpers instead of sprinkling unix.Syscall.
package sys

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// MemfdCreate returns an anonymous shared-memory file (memfd) named name,
// close-on-exec, that accepts seals (SealShrink). The memfd is sparse:
// untouched ranges cost no memory.
func MemfdCreate(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "memfd:"+name), nil
}

// SealShrink forbids, for every process holding the file, making it
// smaller: a client that maps it can then never turn mapped pages into
// SIGBUS for the others. Only memfds take seals (EINVAL otherwise).
func SealShrink(f *os.File) error {
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		return fmt.Errorf("seal %s against shrinking: %w", f.Name(), err)
	}
	return nil
}

// PunchHole releases the storage of [off, off+n) in f, keeping its size.
func PunchHole(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err != nil {
		return fmt.Errorf("punch hole [%d,+%d) in %s: %w", off, n, f.Name(), err)
	}
	return nil
}

// Fallocate reserves [off, off+n) of f (mode 0: may extend the size).
func Fallocate(f *os.File, mode uint32, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), mode, off, n)
}

// RaiseNofile lifts the soft RLIMIT_NOFILE to the hard limit: the daemon
// keeps one segment fd per resident file and one backing fd per open file.
func RaiseNofile() (uint64, error) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	return r.Cur, nil
}

// CloexecDevFuse sets close-on-exec on every /dev/fuse fd of the process.
// go-fuse's direct mount opens /dev/fuse without it, so every program the
// daemon runs (format helpers, umount) inherited the FUSE connection: a
// child still alive after the daemon was killed -9 kept the dead mount's
// connection open, and writers on the mount blocked until it died instead
// of failing at once.
func CloexecDevFuse() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list fds: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// ReopenDirect opens the file open at fd again, read-only with O_DIRECT
// (through /proc/self/fd, so the same inode whatever its name is now).
// It fails where the file system refuses O_DIRECT.
func ReopenDirect(fd int) (*os.File, error) {
	p := "/proc/self/fd/" + strconv.Itoa(fd)
	nfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen fd %d with O_DIRECT: %w", fd, err)
	}
	return os.NewFile(uintptr(nfd), p), nil
}

// CachedBytes is how much of [off, off+n) of the file open at fd is in the
// kernel's page cache (cachestat(2), Linux 6.5), in bytes; an error where
// the kernel lacks cachestat.
func CachedBytes(fd int, off, n int64) (int64, error) {
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(fd), &r, &st, 0); err != nil {
		return 0, fmt.Errorf("cachestat: %w", err)
	}
	return int64(st.Cache) * int64(os.Getpagesize()), nil
}
