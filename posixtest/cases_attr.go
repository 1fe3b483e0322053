package posixtest

import (
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func chmodChown(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("f"))
	r.do("chmod 0640", unix.Chmod(r.p("f"), 0o640))
	r.lstat("f")
	r.do("chmod 01777", unix.Chmod(r.p("f"), 0o1777))
	r.lstat("f")
	r.do("chown 1234:5678", unix.Chown(r.p("f"), 1234, 5678))
	r.lstat("f")
	r.do("chown -1:42", unix.Chown(r.p("f"), -1, 42))
	r.lstat("f")
	r.do("lchown missing", unix.Lchown(r.p("missing"), 1, 1))
	fd := r.mustOpen("RDWR", "f", unix.O_RDWR, 0)
	r.do("fchmod 0600", unix.Fchmod(fd, 0o600))
	r.do("fchown 7:8", unix.Fchown(fd, 7, 8))
	r.fstat("f", fd)
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("chmod dir 0700", unix.Chmod(r.p("d"), 0o700))
	r.do("chown dir 3:4", unix.Chown(r.p("d"), 3, 4))
	r.lstat("d")
	r.do("symlink", unix.Symlink("f", r.p("l")))
	r.do("lchown symlink 5:6", unix.Lchown(r.p("l"), 5, 6))
	r.lstat("l")
	r.lstat("f")
	// A mode of 0000 is reported as 0000 (by lookup, getattr, the
	// setattr reply and a create), for files and directories alike.
	r.do("fchmod 0000", unix.Fchmod(fd, 0))
	r.fstat("f", fd)
	r.lstat("f")
	r.do("chmod dir 0000", unix.Chmod(r.p("d"), 0))
	r.lstat("d")
	r.do("mkdir d0 0000", unix.Mkdir(r.p("d0"), 0))
	r.lstat("d0")
	r.open("O_CREAT 0000", "f0", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0)
	r.lstat("f0")
	return r.out
}

// suidClear: chown of a regular file clears set-user-ID, and set-group-ID
// when group execute is set, even for root; a write by root keeps them.
func suidClear(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("f"))
	r.writeFile("g", []byte("g"))
	r.do("chmod f 06755", unix.Chmod(r.p("f"), 0o6755))
	r.do("chmod g 06745", unix.Chmod(r.p("g"), 0o6745))
	r.do("chown f 0:0", unix.Chown(r.p("f"), 0, 0))
	r.do("chown g 0:0", unix.Chown(r.p("g"), 0, 0))
	r.lstat("f")
	r.lstat("g")
	r.do("chmod f 06755", unix.Chmod(r.p("f"), 0o6755))
	fd := r.mustOpen("WRONLY", "f", unix.O_WRONLY, 0)
	r.write(fd, []byte("root write"))
	r.do("ftruncate by root", unix.Ftruncate(fd, 3))
	r.lstat("f")
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("chmod d 02775", unix.Chmod(r.p("d"), 0o2775))
	r.do("chown d 0:4242", unix.Chown(r.p("d"), 0, 4242))
	r.lstat("d")
	return r.out
}

// setgidDir: files and directories created in a set-group-ID directory
// take its group; subdirectories inherit the bit.
func setgidDir(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.must("chown d 0:4242", unix.Chown(r.p("d"), 0, 4242))
	r.must("chmod d 02775", unix.Chmod(r.p("d"), 0o2775))
	r.writeFile("d/f", []byte("x"))
	r.do("mkdir d/s", unix.Mkdir(r.p("d/s"), 0o755))
	r.do("symlink d/l", unix.Symlink("f", r.p("d/l")))
	r.do("mkfifo d/p", unix.Mkfifo(r.p("d/p"), 0o644))
	r.lstat("d/f")
	r.lstat("d/s")
	r.lstat("d/l")
	r.lstat("d/p")
	return r.out
}

func utimens(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("f"))
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	ts := func(sec, nsec int64) unix.Timespec { return unix.Timespec{Sec: sec, Nsec: nsec} }
	times := func(name string) {
		var st unix.Stat_t
		if err := unix.Lstat(r.p(name), &st); err != nil {
			r.logf("times %s: %s", name, errName(err))
			return
		}
		r.logf("times %s: atime=%d.%09d mtime=%d.%09d", name, st.Atim.Sec, st.Atim.Nsec, st.Mtim.Sec, st.Mtim.Nsec)
	}
	for _, name := range []string{"f", "d"} {
		r.do("utimensat "+name, unix.UtimesNanoAt(unix.AT_FDCWD, r.p(name), []unix.Timespec{ts(1000, 5), ts(2000, 123456789)}, 0))
		times(name)
		r.do("utimensat OMIT atime "+name, unix.UtimesNanoAt(unix.AT_FDCWD, r.p(name), []unix.Timespec{ts(0, unix.UTIME_OMIT), ts(3000, 1)}, 0))
		times(name)
		r.do("utimensat OMIT mtime "+name, unix.UtimesNanoAt(unix.AT_FDCWD, r.p(name), []unix.Timespec{ts(4000, 2), ts(0, unix.UTIME_OMIT)}, 0))
		times(name)
		r.do("utimensat OMIT both "+name, unix.UtimesNanoAt(unix.AT_FDCWD, r.p(name), []unix.Timespec{ts(0, unix.UTIME_OMIT), ts(0, unix.UTIME_OMIT)}, 0))
		times(name)
		before := time.Now().Add(-2 * time.Second)
		r.do("utimensat NOW mtime "+name, unix.UtimesNanoAt(unix.AT_FDCWD, r.p(name), []unix.Timespec{ts(0, unix.UTIME_OMIT), ts(0, unix.UTIME_NOW)}, 0))
		var st unix.Stat_t
		_ = unix.Lstat(r.p(name), &st)
		m := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
		r.logf("mtime now %s: recent=%v atime kept=%v", name, m.After(before) && m.Before(time.Now().Add(2*time.Second)), st.Atim.Sec == 4000)
	}
	r.do("symlink", unix.Symlink("f", r.p("l")))
	r.do("lutimes symlink", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("l"), []unix.Timespec{ts(42, 0), ts(43, 0)}, unix.AT_SYMLINK_NOFOLLOW))
	times("l")
	// A write moves mtime (and ctime) forward.
	r.do("utimensat f old", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), []unix.Timespec{ts(1000, 0), ts(1000, 0)}, 0))
	fd := r.mustOpen("WRONLY", "f", unix.O_WRONLY, 0)
	r.write(fd, []byte("more"))
	var st unix.Stat_t
	r.do("fstat", unix.Fstat(fd, &st))
	r.logf("mtime moved by write: %v", st.Mtim.Sec > 1000)
	r.do("ftruncate", unix.Ftruncate(fd, 1))
	r.do("utimensat f old", unix.UtimesNanoAt(unix.AT_FDCWD, r.p("f"), []unix.Timespec{ts(1000, 0), ts(1000, 0)}, 0))
	r.do("ftruncate", unix.Ftruncate(fd, 0))
	r.do("fstat", unix.Fstat(fd, &st))
	r.logf("mtime moved by ftruncate: %v", st.Mtim.Sec > 1000)
	return r.out
}

func xattrCase(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("f"))
	f := r.p("f")
	get := func(name string, size int) {
		var buf []byte
		if size > 0 {
			buf = make([]byte, size)
		}
		n, err := unix.Getxattr(f, name, buf)
		if size > 0 && err == nil {
			r.logf("getxattr %s [%d]: %q ok", name, size, buf[:n])
			return
		}
		r.logf("getxattr %s [%d]: n=%d %s", name, size, n, errName(err))
	}
	list := func() {
		buf := make([]byte, 4096)
		n, err := unix.Listxattr(f, buf)
		var names []string
		if n > 0 {
			for _, s := range strings.Split(string(buf[:n]), "\x00") {
				if strings.HasPrefix(s, "user.") {
					names = append(names, s)
				}
			}
		}
		sort.Strings(names)
		r.logf("listxattr: %v %s", names, errName(err))
	}
	get("user.a", 64)
	r.do("setxattr user.a", unix.Setxattr(f, "user.a", []byte("value-a"), 0))
	get("user.a", 64)
	get("user.a", 0)
	get("user.a", 3)
	r.do("setxattr CREATE user.a", unix.Setxattr(f, "user.a", []byte("x"), unix.XATTR_CREATE))
	r.do("setxattr REPLACE user.b", unix.Setxattr(f, "user.b", []byte("x"), unix.XATTR_REPLACE))
	r.do("setxattr CREATE user.b", unix.Setxattr(f, "user.b", []byte("bee"), unix.XATTR_CREATE))
	r.do("setxattr REPLACE user.a", unix.Setxattr(f, "user.a", []byte("A2"), unix.XATTR_REPLACE))
	r.do("setxattr empty user.e", unix.Setxattr(f, "user.e", nil, 0))
	get("user.e", 8)
	get("user.a", 64)
	list()
	r.do("removexattr user.a", unix.Removexattr(f, "user.a"))
	r.do("removexattr user.a again", unix.Removexattr(f, "user.a"))
	get("user.a", 64)
	list()
	big := strings.Repeat("v", 4000)
	r.do("setxattr user.big 4000", unix.Setxattr(f, "user.big", []byte(big), 0))
	get("user.big", 0)
	r.do("setxattr no namespace", unix.Setxattr(f, "noprefix", []byte("x"), 0))
	r.do("setxattr missing file", unix.Setxattr(r.p("missing"), "user.a", []byte("x"), 0))
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("setxattr dir", unix.Setxattr(r.p("d"), "user.d", []byte("dir"), 0))
	n, err := unix.Getxattr(r.p("d"), "user.d", make([]byte, 16))
	r.logf("getxattr dir: n=%d %s", n, errName(err))
	r.do("rename f g", unix.Rename(f, r.p("g")))
	n, err = unix.Getxattr(r.p("g"), "user.b", make([]byte, 16))
	r.logf("getxattr after rename: n=%d %s", n, errName(err))
	return r.out
}
