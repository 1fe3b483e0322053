package posixtest

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// open records the outcome of open(2) and returns the fd (-1 on error).
func (r *rec) open(label, name string, flags int, mode uint32) int {
	fd, err := unix.Open(r.p(name), flags|unix.O_CLOEXEC, mode)
	r.do("open "+label+" "+name, err)
	if err != nil {
		return -1
	}
	r.t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// mustOpen is open that stops the case on failure.
func (r *rec) mustOpen(label, name string, flags int, mode uint32) int {
	fd, err := unix.Open(r.p(name), flags|unix.O_CLOEXEC, mode)
	r.must("open "+label+" "+name, err)
	r.t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// writeFile creates name with data (a prerequisite, not recorded unless it
// fails).
func (r *rec) writeFile(name string, data []byte) {
	if err := os.WriteFile(r.p(name), data, 0o644); err != nil {
		r.must("write file "+name, err)
	}
}

func (r *rec) pwrite(fd int, data []byte, off int64) {
	n, err := unix.Pwrite(fd, data, off)
	r.logf("pwrite %d@%d: n=%d %s", len(data), off, n, errName(err))
}

func (r *rec) write(fd int, data []byte) {
	n, err := unix.Write(fd, data)
	r.logf("write %d: n=%d %s", len(data), n, errName(err))
}

// pread records what pread returned: the count and the bytes (quoted when
// short, digested otherwise).
func (r *rec) pread(fd int, n int, off int64) []byte {
	buf := make([]byte, n)
	got, err := unix.Pread(fd, buf, off)
	if got < 0 {
		got = 0
	}
	r.logf("pread %d@%d: n=%d %s %s", n, off, got, errName(err), show(buf[:got]))
	return buf[:got]
}

func show(b []byte) string {
	if len(b) <= 64 {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// statLine is the portable part of a stat result.
func statLine(st *unix.Stat_t) string {
	s := fmt.Sprintf("type=%s perm=%04o nlink=%d uid=%d gid=%d", typeName(st.Mode), st.Mode&0o7777, st.Nlink, st.Uid, st.Gid)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		s += fmt.Sprintf(" size=%d", st.Size)
	}
	return s
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "reg"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "lnk"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "sock"
	case unix.S_IFCHR:
		return "chr"
	case unix.S_IFBLK:
		return "blk"
	}
	return fmt.Sprintf("mode%o", mode&unix.S_IFMT)
}

func (r *rec) lstat(name string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Lstat(r.p(name), &st)
	if err != nil {
		r.logf("lstat %s: %s", name, errName(err))
		return st, false
	}
	r.logf("lstat %s: %s", name, statLine(&st))
	return st, true
}

func (r *rec) stat(name string) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Stat(r.p(name), &st)
	if err != nil {
		r.logf("stat %s: %s", name, errName(err))
		return st, false
	}
	r.logf("stat %s: %s", name, statLine(&st))
	return st, true
}

func (r *rec) fstat(label string, fd int) (unix.Stat_t, bool) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	if err != nil {
		r.logf("fstat %s: %s", label, errName(err))
		return st, false
	}
	r.logf("fstat %s: %s", label, statLine(&st))
	return st, true
}

// readAll records the whole content of name.
func (r *rec) readAll(name string) []byte {
	b, err := os.ReadFile(r.p(name))
	r.logf("read %s: %s len=%d %s", name, errName(err), len(b), show(b))
	return b
}

// pattern is n deterministic bytes that differ per seed.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
