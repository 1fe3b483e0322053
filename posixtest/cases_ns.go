package posixtest

import (
	"testing"

	"golang.org/x/sys/unix"
)

func renameCases(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("a", []byte("A"))
	r.writeFile("b", []byte("BB"))
	r.do("rename a b (file over file)", unix.Rename(r.p("a"), r.p("b")))
	r.lstat("a")
	r.readAll("b")
	r.must("mkdir d1", unix.Mkdir(r.p("d1"), 0o755))
	r.must("mkdir d2", unix.Mkdir(r.p("d2"), 0o755))
	r.writeFile("d1/x", []byte("x"))
	r.do("rename d1 d2 (dir over empty dir)", unix.Rename(r.p("d1"), r.p("d2")))
	r.lstat("d1")
	r.readAll("d2/x")
	r.must("mkdir d3", unix.Mkdir(r.p("d3"), 0o755))
	r.do("rename d3 d2 (dir over non-empty dir)", unix.Rename(r.p("d3"), r.p("d2")))
	r.do("rename b d3 (file over dir)", unix.Rename(r.p("b"), r.p("d3")))
	r.do("rename d3 b (dir over file)", unix.Rename(r.p("d3"), r.p("b")))
	r.do("rename d2 d2/sub (into itself)", unix.Rename(r.p("d2"), r.p("d2/sub")))
	r.do("rename missing c", unix.Rename(r.p("missing"), r.p("c")))
	r.writeFile("c", []byte("C"))
	r.do("renameat2 NOREPLACE b c", unix.Renameat2(unix.AT_FDCWD, r.p("b"), unix.AT_FDCWD, r.p("c"), unix.RENAME_NOREPLACE))
	r.do("renameat2 NOREPLACE b e", unix.Renameat2(unix.AT_FDCWD, r.p("b"), unix.AT_FDCWD, r.p("e"), unix.RENAME_NOREPLACE))
	r.readAll("e")
	r.do("renameat2 EXCHANGE c e", unix.Renameat2(unix.AT_FDCWD, r.p("c"), unix.AT_FDCWD, r.p("e"), unix.RENAME_EXCHANGE))
	r.readAll("c")
	r.readAll("e")
	r.do("renameat2 EXCHANGE c missing", unix.Renameat2(unix.AT_FDCWD, r.p("c"), unix.AT_FDCWD, r.p("missing"), unix.RENAME_EXCHANGE))
	r.do("rename e d2/e (across dirs)", unix.Rename(r.p("e"), r.p("d2/e")))
	r.readAll("d2/e")
	r.do("rename d2 d4 (dir with children)", unix.Rename(r.p("d2"), r.p("d4")))
	r.readAll("d4/x")
	r.readAll("d4/e")
	r.do("rename c c (same)", unix.Rename(r.p("c"), r.p("c")))
	r.readAll("c")
	return r.out
}

// renameOpenFile: an open fd follows the file through a rename, and a
// file renamed over keeps serving its open fd.
func renameOpenFile(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("a", []byte("AAAA"))
	r.writeFile("b", []byte("BBBB"))
	fa := r.mustOpen("RDWR", "a", unix.O_RDWR, 0)
	fb := r.mustOpen("RDONLY", "b", unix.O_RDONLY, 0)
	r.must("rename a b", unix.Rename(r.p("a"), r.p("b")))
	r.pwrite(fa, []byte("Z"), 0)
	r.readAll("b")
	r.pread(fb, 8, 0)
	r.fstat("renamed-over", fb)
	return r.out
}

func rmdirMkdir(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.do("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("mkdir d again", unix.Mkdir(r.p("d"), 0o755))
	r.writeFile("d/f", []byte("f"))
	r.do("rmdir non-empty", unix.Rmdir(r.p("d")))
	r.do("rmdir file", unix.Rmdir(r.p("d/f")))
	r.do("unlink dir", unix.Unlink(r.p("d")))
	r.do("mkdir over file", unix.Mkdir(r.p("d/f"), 0o755))
	r.do("mkdir in missing", unix.Mkdir(r.p("nope/x"), 0o755))
	r.do("mkdir under file", unix.Mkdir(r.p("d/f/x"), 0o755))
	r.do("unlink d/f", unix.Unlink(r.p("d/f")))
	r.do("unlink d/f again", unix.Unlink(r.p("d/f")))
	r.do("rmdir d", unix.Rmdir(r.p("d")))
	r.do("rmdir d again", unix.Rmdir(r.p("d")))
	r.do("mkdir p", unix.Mkdir(r.p("p"), 0o750))
	r.do("mkdir p/s", unix.Mkdir(r.p("p/s"), 0o700))
	r.lstat("p")
	r.lstat("p/s")
	r.do("rmdir p/s/.", unix.Rmdir(r.p("p/s")+"/."))
	return r.out
}

func symlinkCase(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("target", []byte("T"))
	r.do("symlink target l", unix.Symlink("target", r.p("l")))
	r.do("symlink dangling", unix.Symlink("nowhere/x", r.p("dl")))
	r.do("symlink over existing", unix.Symlink("target", r.p("l")))
	for _, n := range []string{"l", "dl", "target"} {
		buf := make([]byte, 256)
		k, err := unix.Readlink(r.p(n), buf)
		if k < 0 {
			k = 0
		}
		r.logf("readlink %s: %q %s", n, buf[:k], errName(err))
	}
	r.lstat("l")
	r.stat("l")
	r.stat("dl")
	r.readAll("l")
	r.open("NOFOLLOW", "l", unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	r.open("PATH|NOFOLLOW", "l", unix.O_PATH|unix.O_NOFOLLOW, 0)
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("symlink ../target d/up", unix.Symlink("../target", r.p("d/up")))
	r.readAll("d/up")
	r.do("rename l d/l2", unix.Rename(r.p("l"), r.p("d/l2")))
	r.readAll("d/l2")
	r.do("unlink d/l2", unix.Unlink(r.p("d/l2")))
	r.lstat("target")
	return r.out
}

func hardLink(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("a", []byte("linked"))
	r.do("link a b", unix.Link(r.p("a"), r.p("b")))
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.do("link a d/c", unix.Link(r.p("a"), r.p("d/c")))
	sa, _ := r.lstat("a")
	sb, _ := r.lstat("b")
	sc, _ := r.lstat("d/c")
	r.logf("same ino: %v %v", sa.Ino == sb.Ino, sa.Ino == sc.Ino)
	fd := r.mustOpen("WRONLY|APPEND", "b", unix.O_WRONLY|unix.O_APPEND, 0)
	r.write(fd, []byte("+"))
	r.readAll("a")
	r.readAll("d/c")
	r.do("unlink a", unix.Unlink(r.p("a")))
	r.lstat("b")
	r.fstat("b", fd)
	r.do("link b b (exists)", unix.Link(r.p("b"), r.p("b")))
	r.do("link d e (dir)", unix.Link(r.p("d"), r.p("e")))
	r.do("link missing x", unix.Link(r.p("missing"), r.p("x")))
	r.do("rename b d/c (same inode)", unix.Rename(r.p("b"), r.p("d/c")))
	r.lstat("b")
	r.lstat("d/c")
	r.do("unlink d/c", unix.Unlink(r.p("d/c")))
	r.lstat("b")
	r.fstat("b", fd)
	return r.out
}

func mknodCase(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.do("mkfifo p", unix.Mkfifo(r.p("p"), 0o640))
	r.lstat("p")
	r.do("mknod sock", unix.Mknod(r.p("s"), unix.S_IFSOCK|0o600, 0))
	r.lstat("s")
	r.do("mknod reg", unix.Mknod(r.p("r"), unix.S_IFREG|0o600, 0))
	r.lstat("r")
	r.do("mkfifo existing", unix.Mkfifo(r.p("p"), 0o640))
	r.open("NONBLOCK|WRONLY fifo without reader", "p", unix.O_WRONLY|unix.O_NONBLOCK, 0)
	fr := r.open("NONBLOCK|RDONLY fifo", "p", unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if fr >= 0 {
		fw := r.open("WRONLY fifo", "p", unix.O_WRONLY, 0)
		if fw >= 0 {
			r.write(fw, []byte("through the pipe"))
			buf := make([]byte, 64)
			n, err := unix.Read(fr, buf)
			r.logf("read fifo: %q %s", buf[:max(n, 0)], errName(err))
		}
	}
	r.do("unlink p", unix.Unlink(r.p("p")))
	return r.out
}
