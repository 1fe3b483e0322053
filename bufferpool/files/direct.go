package files

import (
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/sys"
)

// Stage-in with O_DIRECT.
//
// A stage-in reads a whole page of the backing file for the pool to keep.
// Read through the kernel's page cache, every byte is copied out of it
// once more (and cached twice, in the page cache and in the pool); that
// copy out of freshly read page-cache pages is most of a cold read's CPU
// (measured on the 2-core VM: 0.5–0.75 s of CPU per GiB read buffered,
// 0.13 s with O_DIRECT, which also ran faster at one read in flight). So
// a stage-in of a page the page cache does not hold (cachestat) reads it
// with O_DIRECT, through a second, read-only fd on the backing file opened
// on first use; a page the page cache holds (written lately by someone
// else) is read from there. A file system that refuses O_DIRECT, a buffer
// or an offset not aligned to directAlign, or a direct read that fails
// reads buffered. O_DIRECT reads see buffered writes of the same file
// (the kernel writes the range back before it reads), so what is read is
// the same either way.

// directAlign is the alignment O_DIRECT asks of buffers, offsets and
// lengths here (the largest logical block size of common devices).
const directAlign = 4096

// directFd is a file's O_DIRECT fd on its backing file. Safe for
// concurrent use.
type directFd struct {
	// mu is held shared by each read on f and exclusively to open and
	// close it, so the fd number never changes under a read.
	mu     sync.RWMutex
	f      *os.File
	tried  bool // an open was attempted (f nil: it failed, read buffered)
	closed bool // the file is dropped: never open again
}

// readBacking reads len(buf) bytes of the backing file at off (os.File
// ReadAt semantics: io.EOF when short), with O_DIRECT where that works.
func (f *file) readBacking(buf []byte, off int64) (int, error) {
	if f.stageHook != nil {
		defer f.stageHook(off)
	}
	if d := f.fs.stageLatency; d > 0 {
		time.Sleep(d)
	}
	if !f.fs.opts.BufferedStageIn && directOK(buf, off) && !f.pageCached(off, len(buf)) {
		if n, err, ok := f.direct.read(f, buf, off); ok {
			f.fs.stats.stagedDirect.Add(uint64(n))
			return n, err
		}
	}
	return f.backing.ReadAt(buf, off)
}

// pageCached reports whether the page cache holds most of [off, off+n)
// of the backing file (or cachestat cannot tell).
func (f *file) pageCached(off int64, n int) bool {
	c, err := sys.CachedBytes(int(f.backing.Fd()), off, int64(n))
	return err != nil || c >= int64(n)/2
}

// read is one O_DIRECT read; ok false where it could not be done (then
// nothing was read and the caller reads buffered).
func (d *directFd) read(f *file, buf []byte, off int64) (n int, err error, ok bool) {
	d.mu.RLock()
	if !d.tried {
		d.mu.RUnlock()
		d.open(f)
		d.mu.RLock()
	}
	defer d.mu.RUnlock()
	if d.f == nil {
		return 0, nil, false
	}
	n, err = preadDirect(int(d.f.Fd()), buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, false // EINVAL (alignment the device wants), EIO: buffered says
	}
	return n, err, true
}

func (d *directFd) open(f *file) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tried || d.closed {
		return
	}
	d.tried = true
	nf, err := sys.ReopenDirect(int(f.backing.Fd()))
	if err == nil {
		d.f = nf
	}
}

// close closes the fd for good (the file is dropped).
func (d *directFd) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed, d.tried = true, true
	if d.f != nil {
		d.f.Close()
		d.f = nil
	}
}

// preadDirect reads len(buf) bytes at off; a read that ends inside a
// block is the end of the file (a further read there would be unaligned).
func preadDirect(fd int, buf []byte, off int64) (int, error) {
	done := 0
	for done < len(buf) {
		n, err := unix.Pread(fd, buf[done:], off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, err
		}
		if n == 0 {
			break
		}
		done += n
		if n%directAlign != 0 {
			break
		}
	}
	if done < len(buf) {
		return done, io.EOF
	}
	return done, nil
}
