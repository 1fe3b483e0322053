package posixtest

import (
	"bytes"
	"math/rand"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func openCreatExcl(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("x"))
	r.open("CREAT|EXCL existing", "f", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o644)
	r.open("CREAT|EXCL new", "g", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o640)
	r.lstat("g")
	r.open("CREAT existing", "f", unix.O_CREAT|unix.O_RDWR, 0o600)
	r.lstat("f")
	r.open("RDONLY missing", "missing", unix.O_RDONLY, 0)
	r.open("CREAT in missing dir", "nodir/f", unix.O_CREAT|unix.O_RDWR, 0o644)
	r.open("DIRECTORY on file", "f", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	r.must("mkdir d", unix.Mkdir(r.p("d"), 0o755))
	r.open("WRONLY on dir", "d", unix.O_WRONLY, 0)
	r.open("CREAT on dir", "d", unix.O_CREAT|unix.O_RDWR, 0o644)
	return r.out
}

func openTrunc(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("hello world"))
	fd := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	fw := r.mustOpen("WRONLY|TRUNC", "f", unix.O_WRONLY|unix.O_TRUNC, 0)
	r.fstat("trunc fd", fw)
	r.pread(fd, 100, 0)
	r.write(fw, []byte("abc"))
	r.pread(fd, 100, 0)
	r.readAll("f")
	return r.out
}

// appendPwrite: on Linux pwrite on an O_APPEND fd appends, ignoring the
// offset; a second, non-append fd writes where it is told.
func appendPwrite(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fa := r.mustOpen("CREAT|APPEND", "f", unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND, 0o644)
	fw := r.mustOpen("WRONLY", "f", unix.O_WRONLY, 0)
	r.write(fa, []byte("aaa"))
	r.pwrite(fa, []byte("XX"), 0)
	r.pwrite(fw, []byte("Z"), 0)
	r.write(fa, []byte("bbb"))
	r.pwrite(fw, []byte("YYYYYYYYYYYY"), 2)
	r.write(fa, []byte("c"))
	r.fstat("append fd", fa)
	r.readAll("f")
	return r.out
}

// alignedBuf returns n bytes aligned to 4096 for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)
	return b[off%4096:][:n]
}

func directIO(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fd := r.open("CREAT|DIRECT", "f", unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
	if fd < 0 {
		return r.out
	}
	w := alignedBuf(3 * 4096)
	copy(w, pattern(1, len(w)))
	r.pwrite(fd, w, 4096)
	rb := alignedBuf(4 * 4096)
	n, err := unix.Pread(fd, rb, 0)
	r.logf("direct pread: n=%d %s", n, errName(err))
	if n == 4*4096 && (!bytes.Equal(rb[4096:], w) || !bytes.Equal(rb[:4096], make([]byte, 4096))) {
		t.Errorf("O_DIRECT read back differs")
	}
	r.fstat("direct fd", fd)
	r.readAll("f")
	return r.out
}

func badFdMode(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("data"))
	fr := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.write(fr, []byte("x"))
	r.pwrite(fr, []byte("x"), 0)
	fw := r.mustOpen("WRONLY", "f", unix.O_WRONLY, 0)
	r.pread(fw, 4, 0)
	r.do("ftruncate RDONLY fd", unix.Ftruncate(fr, 0))
	r.readAll("f")
	return r.out
}

func readPastEOF(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", []byte("0123456789"))
	fd := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.pread(fd, 4, 8)
	r.pread(fd, 4, 10)
	r.pread(fd, 4, 1000)
	r.pread(fd, 4, 1<<40)
	buf := make([]byte, 20)
	n, err := unix.Read(fd, buf)
	r.logf("read: n=%d %s", n, errName(err))
	n, err = unix.Read(fd, buf)
	r.logf("read at EOF: n=%d %s", n, errName(err))
	return r.out
}

func sparseWrite(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fd := r.mustOpen("CREAT", "f", unix.O_CREAT|unix.O_RDWR, 0o644)
	r.pwrite(fd, []byte("end"), 3<<20+5)
	r.fstat("f", fd)
	r.pread(fd, 16, 0)
	r.pread(fd, 16, 1<<20-8)
	r.pread(fd, 16, 3<<20)
	b := r.pread(fd, 3<<20+8, 0)
	want := append(make([]byte, 3<<20+5), "end"...)
	if !bytes.Equal(b, want) {
		t.Errorf("sparse file reads back wrong")
	}
	return r.out
}

func truncateGrowShrink(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", bytes.Repeat([]byte("a"), 100))
	r.do("truncate 50", unix.Truncate(r.p("f"), 50))
	r.lstat("f")
	r.do("truncate 5000", unix.Truncate(r.p("f"), 5000))
	r.lstat("f")
	b := r.readAll("f")
	if len(b) == 5000 && (!bytes.Equal(b[:50], bytes.Repeat([]byte("a"), 50)) || !bytes.Equal(b[50:], make([]byte, 4950))) {
		t.Errorf("truncate grow/shrink: wrong content")
	}
	fd := r.mustOpen("RDWR", "f", unix.O_RDWR, 0)
	r.do("ftruncate 2M+3", unix.Ftruncate(fd, 2<<20+3))
	r.fstat("f", fd)
	r.pwrite(fd, []byte("zz"), 1<<20)
	r.do("ftruncate 1M+1", unix.Ftruncate(fd, 1<<20+1))
	r.pread(fd, 8, 1<<20-2)
	r.do("ftruncate 1M+4", unix.Ftruncate(fd, 1<<20+4))
	r.pread(fd, 8, 1<<20-2)
	r.do("truncate -1", unix.Truncate(r.p("f"), -1))
	r.do("truncate missing", unix.Truncate(r.p("missing"), 0))
	return r.out
}

func ftruncateUnlinked(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fd := r.mustOpen("CREAT", "f", unix.O_CREAT|unix.O_RDWR, 0o644)
	r.write(fd, []byte("0123456789abcdef"))
	r.must("unlink f", unix.Unlink(r.p("f")))
	r.lstat("f")
	r.do("ftruncate 10", unix.Ftruncate(fd, 10))
	r.fstat("unlinked", fd)
	r.pread(fd, 32, 0)
	r.pwrite(fd, []byte("XY"), 20)
	r.fstat("unlinked", fd)
	r.pread(fd, 32, 0)
	r.do("fchmod 600", unix.Fchmod(fd, 0o600))
	r.fstat("unlinked", fd)
	return r.out
}

func unlinkOpenFile(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	data := pattern(7, 300000)
	r.writeFile("f", data)
	fd := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.must("unlink f", unix.Unlink(r.p("f")))
	r.lstat("f")
	r.fstat("unlinked", fd)
	b := r.pread(fd, len(data), 0)
	if !bytes.Equal(b, data) {
		t.Errorf("read of unlinked file differs")
	}
	r.writeFile("f", []byte("new"))
	r.readAll("f")
	r.pread(fd, 16, 0)
	return r.out
}

func fallocate(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fd := r.mustOpen("CREAT", "f", unix.O_CREAT|unix.O_RDWR, 0o644)
	r.write(fd, []byte("abc"))
	r.do("fallocate 0 [0,10000)", unix.Fallocate(fd, 0, 0, 10000))
	r.fstat("f", fd)
	r.pread(fd, 8, 0)
	r.pread(fd, 8, 9996)
	r.do("fallocate KEEP_SIZE [0,20000)", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 20000))
	r.fstat("f", fd)
	r.do("fallocate 0 [5000,+10)", unix.Fallocate(fd, 0, 5000, 10))
	r.fstat("f", fd)
	r.do("fallocate PUNCH|KEEP [1,+1)", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1, 1))
	r.pread(fd, 4, 0)
	r.do("fallocate len 0", unix.Fallocate(fd, 0, 0, 0))
	return r.out
}

// largeRandom writes a 3.5 MiB file (more than three 1 MiB pages) with
// seeded random pwrites straddling page boundaries and reads it back.
func largeRandom(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	const size = 3<<20 + 1<<19
	model := make([]byte, size)
	fd := r.mustOpen("CREAT", "f", unix.O_CREAT|unix.O_RDWR, 0o644)
	rng := rand.New(rand.NewSource(42))
	var failed int
	for i := range 200 {
		n := 1 + rng.Intn(300000)
		off := rng.Int63n(size - int64(n))
		data := pattern(byte(i), n)
		if got, err := unix.Pwrite(fd, data, off); err != nil || got != n {
			failed++
		}
		copy(model[off:], data)
	}
	r.logf("200 random pwrites: %d failed", failed)
	r.do("fsync", unix.Fsync(fd))
	got := r.readAll("f")
	if !bytes.Equal(got, model[:len(got)]) {
		t.Errorf("large file reads back wrong")
	}
	for _, off := range []int64{0, 1<<20 - 3, 2 << 20, size - 10} {
		b := r.pread(fd, 7, off)
		if !bytes.Equal(b, model[off:off+int64(len(b))]) {
			t.Errorf("pread at %d differs", off)
		}
	}
	return r.out
}

func fsyncCase(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	fd := r.mustOpen("CREAT", "f", unix.O_CREAT|unix.O_RDWR, 0o644)
	r.write(fd, []byte("data"))
	r.do("fsync", unix.Fsync(fd))
	r.do("fdatasync", unix.Fdatasync(fd))
	fr := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	r.do("fsync RDONLY fd", unix.Fsync(fr))
	dfd := r.mustOpen("dir", ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	r.do("fsync dir", unix.Fsync(dfd))
	r.do("syncfs", unix.Syncfs(fd))
	return r.out
}

// lseekDataHole: a fully written file is one data extent.
func lseekDataHole(t *testing.T, dir string) Transcript {
	r := newRec(t, dir)
	r.writeFile("f", pattern(3, 10000))
	fd := r.mustOpen("RDONLY", "f", unix.O_RDONLY, 0)
	for _, c := range []struct {
		name   string
		off    int64
		whence int
	}{
		{"DATA 0", 0, unix.SEEK_DATA}, {"HOLE 0", 0, unix.SEEK_HOLE},
		{"DATA 9999", 9999, unix.SEEK_DATA}, {"DATA 10000", 10000, unix.SEEK_DATA},
		{"HOLE 10000", 10000, unix.SEEK_HOLE}, {"END -1", -1, unix.SEEK_END},
		{"SET -1", -1, unix.SEEK_SET},
	} {
		pos, err := unix.Seek(fd, c.off, c.whence)
		r.logf("lseek %s: %d %s", c.name, pos, errName(err))
	}
	return r.out
}
