package posixtest

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// dirent is one entry parsed from getdents64.
type dirent struct {
	name string
	typ  uint8
	off  int64
}

// getdents reads entries from a directory fd with a buffer of bufSize
// bytes, calling getdents64 at most calls times (0 = until the end).
func getdents(fd, bufSize, calls int) ([]dirent, error) {
	var out []dirent
	buf := make([]byte, bufSize)
	for i := 0; calls == 0 || i < calls; i++ {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return out, err
		}
		if n == 0 {
			break
		}
		for b := buf[:n]; len(b) > 0; {
			reclen := int(b[16]) | int(b[17])<<8
			off := int64(0)
			for k := 7; k >= 0; k-- {
				off = off<<8 | int64(b[8+k])
			}
			name := b[19:reclen]
			name = name[:bytes.IndexByte(name, 0)]
			out = append(out, dirent{name: string(name), typ: b[18], off: off})
			b = b[reclen:]
		}
	}
	return out, nil
}

func names(ds []dirent) []string {
	var s []string
	for _, d := range ds {
		s = append(s, d.name)
	}
	sort.Strings(s)
	return s
}

func readdirSeekdir(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	for i := range 60 {
		r.writeFile(fmt.Sprintf("d/file-%02d-with-a-longer-name", i), nil)
	}
	r.must("mkdir d/sub", unix.Mkdir(r.p("d/sub"), 0o755))
	r.must("symlink d/lnk", unix.Symlink("x", r.p("d/lnk")))
	fd := r.mustOpen("DIRECTORY", "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	all, err := getdents(fd, 1<<16, 0)
	r.logf("getdents all: %d entries %s", len(all), errName(err))
	r.logf("names: %v", names(all))
	types := map[string]uint8{}
	for _, d := range all {
		types[d.name] = d.typ
	}
	r.logf("d_type: sub=%d lnk=%d file=%d .=%d", types["sub"], types["lnk"], types["file-00-with-a-longer-name"], types["."])
	_, err = unix.Seek(fd, 0, unix.SEEK_SET)
	r.do("rewind", err)
	first, err := getdents(fd, 1024, 1)
	r.logf("first batch: >0=%v %s", len(first) > 0, errName(err))
	pos, err := unix.Seek(fd, 0, unix.SEEK_CUR)
	r.logf("telldir: %s equals last d_off=%v", errName(err), len(first) > 0 && pos == first[len(first)-1].off)
	restA, _ := getdents(fd, 1024, 0)
	_, err = unix.Seek(fd, pos, unix.SEEK_SET)
	r.do("seekdir saved", err)
	restB, _ := getdents(fd, 1024, 0)
	r.logf("rest after seekdir equal: %v count=%d", fmt.Sprint(names(restA)) == fmt.Sprint(names(restB)), len(restA)+len(first))
	// Seek to each entry's own offset resumes right after it.
	mid := restA[len(restA)/2]
	_, err = unix.Seek(fd, mid.off, unix.SEEK_SET)
	r.do("seekdir mid", err)
	tail, _ := getdents(fd, 1024, 0)
	want := 0
	for i, d := range restA {
		if d.name == mid.name {
			want = len(restA) - i - 1
		}
	}
	r.logf("tail after mid: %v", len(tail) == want)
	r.writeFile("d/created-after-opendir", nil)
	r.must("unlink d/file-00", unix.Unlink(r.p("d/file-00-with-a-longer-name")))
	_, err = unix.Seek(fd, 0, unix.SEEK_SET)
	r.do("rewind", err)
	again, _ := getdents(fd, 4096, 0)
	r.logf("after rewind: %d entries, new=%v removed=%v", len(again),
		contains(again, "created-after-opendir"), contains(again, "file-00-with-a-longer-name"))
	r.must("mkdir e", unix.Mkdir(r.p("e"), 0o755))
	fe := r.mustOpen("DIRECTORY", "e", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	empty, err := getdents(fe, 4096, 0)
	r.logf("empty dir: %v %s", names(empty), errName(err))
	return r.out
}

func contains(ds []dirent, name string) bool {
	for _, d := range ds {
		if d.name == name {
			return true
		}
	}
	return false
}

func statfsCase(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	var st unix.Statfs_t
	r.do("statfs", unix.Statfs(dir, &st))
	sane := st.Bsize > 0 && st.Blocks > 0 && st.Bfree <= st.Blocks && st.Bavail <= st.Bfree && st.Namelen >= 255
	r.logf("sane: %v", sane)
	if !sane {
		t.Errorf("statfs not sane: %+v", st)
	}
	r.writeFile("f", nil)
	fd := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	var fst unix.Statfs_t
	r.do("fstatfs", unix.Fstatfs(fd, &fst))
	r.logf("fstatfs bsize equal: %v", fst.Bsize == st.Bsize)
	return r.out
}

// locks: flock and OFD locks conflict between open file descriptions of
// the same file; classic POSIX locks of one process do not.
func locks(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", make([]byte, 100))
	f1 := r.mustOpen("RDWR 1", "f", unix.O_RDWR, 0)
	f2 := r.mustOpen("RDWR 2", "f", unix.O_RDWR, 0)
	r.do("flock 1 EX", unix.Flock(f1, unix.LOCK_EX|unix.LOCK_NB))
	r.do("flock 2 EX|NB", unix.Flock(f2, unix.LOCK_EX|unix.LOCK_NB))
	r.do("flock 2 SH|NB", unix.Flock(f2, unix.LOCK_SH|unix.LOCK_NB))
	r.do("flock 1 UN", unix.Flock(f1, unix.LOCK_UN))
	r.do("flock 2 SH|NB", unix.Flock(f2, unix.LOCK_SH|unix.LOCK_NB))
	r.do("flock 1 SH|NB", unix.Flock(f1, unix.LOCK_SH|unix.LOCK_NB))
	r.do("flock 1 EX|NB", unix.Flock(f1, unix.LOCK_EX|unix.LOCK_NB))
	r.do("flock 2 UN", unix.Flock(f2, unix.LOCK_UN))
	r.do("flock 1 UN", unix.Flock(f1, unix.LOCK_UN))

	lk := func(typ int16, start, n int64) *unix.Flock_t {
		return &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	}
	r.do("OFD_SETLK 1 W [0,10)", unix.FcntlFlock(uintptr(f1), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 10)))
	r.do("OFD_SETLK 2 W [5,15)", unix.FcntlFlock(uintptr(f2), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 5, 10)))
	r.do("OFD_SETLK 2 W [10,20)", unix.FcntlFlock(uintptr(f2), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 10, 10)))
	q := lk(unix.F_WRLCK, 0, 100)
	r.do("OFD_GETLK 2", unix.FcntlFlock(uintptr(f2), unix.F_OFD_GETLK, q))
	r.logf("conflict: type=%d start=%d len=%d", q.Type, q.Start, q.Len)
	r.do("OFD_SETLK 1 UN", unix.FcntlFlock(uintptr(f1), unix.F_OFD_SETLK, lk(unix.F_UNLCK, 0, 10)))
	r.do("OFD_SETLK 2 W [5,15)", unix.FcntlFlock(uintptr(f2), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 5, 10)))
	r.do("OFD_SETLK 2 UN", unix.FcntlFlock(uintptr(f2), unix.F_OFD_SETLK, lk(unix.F_UNLCK, 0, 0)))
	// Process-associated locks of one process never conflict.
	r.do("SETLK 1 W [0,10)", unix.FcntlFlock(uintptr(f1), unix.F_SETLK, lk(unix.F_WRLCK, 0, 10)))
	r.do("SETLK 2 W [0,10)", unix.FcntlFlock(uintptr(f2), unix.F_SETLK, lk(unix.F_WRLCK, 0, 10)))
	// ... but do with an OFD lock on the same range.
	r.do("OFD_SETLK 2 W [0,10)", unix.FcntlFlock(uintptr(f2), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 10)))
	r.do("SETLK 1 UN", unix.FcntlFlock(uintptr(f1), unix.F_SETLK, lk(unix.F_UNLCK, 0, 0)))
	fr := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.do("SETLK RDONLY fd W", unix.FcntlFlock(uintptr(fr), unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 1)))
	return r.out
}

// mmapShared: MAP_SHARED stores are seen by read(2) and writes by write(2)
// are seen in the mapping, and msync'ed data survives close and reopen.
//
// The mapping is only touched from inside system calls (through a pipe),
// never by Go code: a goroutine faulting on a FUSE-backed page outside a
// syscall cannot be stopped by the garbage collector, so when the mount is
// served by the same process the whole process deadlocks (go-fuse's
// "known deadlocks" #3).
func mmapShared(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	const size = 3 * 4096
	r.writeFile("f", make([]byte, size))
	fd := r.mustOpen("RDWR", "f", unix.O_RDWR, 0)
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	r.must("mmap", err)
	defer unix.Munmap(m)
	r.must("store to mapping", toMapping(m[100:], "stored through the mapping"))
	fd2 := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.pread(fd2, 26, 100)
	r.pwrite(fd, []byte("written by pwrite"), 5000)
	got, err := fromMapping(m[5000:5017])
	r.logf("mapping sees pwrite: %q %s", got, errName(err))
	r.do("msync", unix.Msync(m, unix.MS_SYNC))
	r.must("store to mapping", toMapping(m[size-4:], "tail"))
	r.do("msync", unix.Msync(m, unix.MS_SYNC))
	r.do("munmap", unix.Munmap(m))
	b := r.readAll("f")
	if len(b) == size && string(b[100:126]) != "stored through the mapping" {
		t.Errorf("mmap store lost after munmap")
	}
	_, err = unix.Mmap(fd2, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	r.do("mmap RW of RDONLY fd", err)
	ro, err := unix.Mmap(fd2, 0, 8192, unix.PROT_READ, unix.MAP_PRIVATE)
	if r.do("mmap PRIVATE RDONLY", err) {
		got, err := fromMapping(ro[100:106])
		r.logf("private mapping: %q %s", got, errName(err))
		unix.Munmap(ro)
	}
	return r.out
}

// toMapping copies s into the mapped bytes m with read(2) from a pipe, so
// the page fault is taken by the kernel inside the syscall.
func toMapping(m []byte, s string) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, err := unix.Write(p[1], []byte(s)); err != nil {
		return err
	}
	_, err := unix.Read(p[0], m[:len(s)])
	return err
}

// fromMapping copies mapped bytes out with write(2) into a pipe.
func fromMapping(m []byte) (string, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return "", err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, err := unix.Write(p[1], m); err != nil {
		return "", err
	}
	buf := make([]byte, len(m))
	n, err := unix.Read(p[0], buf)
	return string(buf[:max(n, 0)]), err
}
