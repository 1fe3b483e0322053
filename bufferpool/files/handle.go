package files

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Open opens (and with O_CREAT creates, owned by c) a regular file.
// O_TRUNC, O_EXCL, O_APPEND are honoured; O_DIRECT is accepted (the pool
// is the cache the application bypasses the kernel's page cache into).
func (fs *FS) Open(p string, flags int, mode uint32, c Cred) (*Handle, unix.Stat_t, error) {
	if fs.closed.Load() {
		return nil, unix.Stat_t{}, ErrClosed
	}
	a, err := fs.resolve(p)
	if err != nil {
		return nil, unix.Stat_t{}, pathErr("open", p, err)
	}
	fd, writable, created, err := openBacking(a, flags, mode, c, fs.isRoot)
	a.close()
	if err != nil {
		return nil, unix.Stat_t{}, pathErr("open", p, err)
	}
	view, err := fs.openRemote(p, flags) // remote.go
	if err != nil {
		unix.Close(fd)
		return nil, unix.Stat_t{}, pathErr("open", p, err)
	}
	f, stale, err := fs.attach(fd, writable, view)
	if err != nil {
		return nil, unix.Stat_t{}, pathErr("open", p, err)
	}
	f.setName(p)
	f.setCompress(p)
	stale = f.useRemote(view) || stale
	h := &Handle{f: f, flags: flags, stale: stale}
	f.learnOpen(p) // learned.go
	fs.stats.openFiles.Add(1)
	if flags&unix.O_TRUNC != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY && !created && f.size.Load() != 0 {
		if err := f.truncate(0); err != nil {
			h.Release()
			return nil, unix.Stat_t{}, pathErr("open O_TRUNC", p, err)
		}
	}
	st, err := h.Getattr()
	if err != nil {
		h.Release()
		return nil, st, pathErr("open", p, err)
	}
	return h, st, nil
}

// openBacking opens the backing file read-write (the write-back needs it
// whatever the caller asked for; the kernel already checked permissions),
// creating it when asked.
func openBacking(a at, flags int, mode uint32, c Cred, chown bool) (fd int, writable, created bool, err error) {
	const base = unix.O_CLOEXEC | unix.O_NOFOLLOW
	if flags&unix.O_CREAT != 0 {
		fd, err = unix.Openat(a.dir, a.name, base|unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, mode&0o7777)
		if err == nil {
			if err := ownFd(fd, mode&0o7777, a.dir, c, chown); err != nil {
				unix.Close(fd)
				return -1, false, false, err
			}
			return fd, true, true, nil
		}
		if err != unix.EEXIST || flags&unix.O_EXCL != 0 {
			return -1, false, false, err
		}
	}
	fd, err = unix.Openat(a.dir, a.name, base|unix.O_RDWR, 0)
	if err == nil {
		return fd, true, false, nil
	}
	if (err == unix.EACCES || err == unix.EPERM || err == unix.EROFS || err == unix.ETXTBSY) && flags&unix.O_ACCMODE == unix.O_RDONLY {
		fd, err = unix.Openat(a.dir, a.name, base|unix.O_RDONLY, 0)
		return fd, false, false, err
	}
	return -1, false, false, err
}

// ownFd gives a new file in directory parent its caller's owner (when
// chown: the daemon is root) and exact mode.
func ownFd(fd int, mode uint32, parent int, c Cred, chown bool) error {
	c, mode = inherit(parent, c, mode, false)
	if chown {
		if err := unix.Fchown(fd, int(c.Uid), int(c.Gid)); err != nil {
			return fmt.Errorf("chown new file: %w", err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fmt.Errorf("chmod new file: %w", err)
	}
	return nil
}

// Handle is an open file. Safe for concurrent use.
type Handle struct {
	f        *file
	flags    int
	stale    bool
	released atomic.Bool
	// passthrough is set once PassthroughFd handed the kernel the
	// segment: Release ends it.
	passthrough atomic.Bool
	ra          readAhead // its access pattern (prefetch.go)
}

// Flags returns the open flags.
func (h *Handle) Flags() int { return h.flags }

// CacheValid reports whether what a door cached of this file's data
// before this open is still right: false when the open found that the
// backing file was changed by someone else (another node) and dropped the
// pool's pages, or when the file layer has no history of the file (first
// open since start or since the file was retired from the idle cache). Every write that reaches this layer goes through a door,
// so the doors' caches are otherwise coherent.
func (h *Handle) CacheValid() bool { return !h.stale }

// ReadAt reads at off; short at EOF; 0,nil at or past EOF.
func (h *Handle) ReadAt(buf []byte, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	if h.flags&unix.O_ACCMODE == unix.O_WRONLY {
		return 0, unix.EBADF
	}
	h.f.learnRead(off, len(buf))
	h.readAhead(off, len(buf))
	// Read around only where the page can be staged behind (read-ahead
	// on): otherwise a page read in small pieces would never be cached.
	around := h.f.fs.prefetch.maxPages > 0 && !h.ra.inPattern()
	return h.f.readWith(buf, off, around)
}

// WriteAt writes at off, or at EOF atomically if opened O_APPEND.
func (h *Handle) WriteAt(data []byte, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	if h.flags&unix.O_ACCMODE == unix.O_RDONLY {
		return 0, unix.EBADF
	}
	if len(data) == 0 {
		return 0, nil
	}
	n, err := h.f.write(data, off, h.flags&unix.O_APPEND != 0)
	h.f.fs.stats.written.Add(uint64(n))
	h.f.io.written.Add(uint64(n))
	return n, err
}

// WriteInside is WriteAt for a write that must not change the size (the
// shim's writes through runtime/ipc: the kernel caches the size of the
// file): one that would end past it fails with ErrPastEOF, nothing
// written. O_APPEND opens are refused (EBADF) the same way.
func (h *Handle) WriteInside(data []byte, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	if h.flags&unix.O_ACCMODE == unix.O_RDONLY || h.flags&unix.O_APPEND != 0 {
		return 0, unix.EBADF
	}
	if len(data) == 0 {
		return 0, nil
	}
	n, err := h.f.writeMode(data, off, false, true)
	h.f.fs.stats.written.Add(uint64(n))
	h.f.io.written.Add(uint64(n))
	return n, err
}

// Getattr is fstat (works after unlink).
func (h *Handle) Getattr() (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(h.f.backing.Fd()), &st); err != nil {
		return st, err
	}
	h.f.overlay(&st)
	return st, nil
}

// Fsync returns when the file's data (and size; all metadata unless
// datasync) are on the backing store.
func (h *Handle) Fsync(datasync bool) error {
	return h.f.fsync(datasync)
}

// Flush is called on every close(2) of an fd of this handle: starts the
// write-back; waits for it with FlushOnClose.
func (h *Handle) Flush() error {
	fs := h.f.fs
	if fs.scratch || h.flags&unix.O_ACCMODE == unix.O_RDONLY {
		return nil
	}
	h.f.closedRemote()
	if fs.opts.FlushOnClose {
		return h.f.writeBack(syncData)
	}
	if fs.opts.Mode == Writeback {
		fs.flusher.enqueue(h.f)
	}
	return nil
}

// Release is the last close of the handle.
func (h *Handle) Release() error {
	if h.released.Swap(true) {
		return nil
	}
	h.f.fs.stats.openFiles.Add(-1)
	if h.passthrough.Load() {
		h.f.bucket.EndPassthrough()
	}
	h.f.learnClose()
	h.f.release()
	return nil
}

// Allocate is fallocate(2); mode 0 (and KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE,
// ZERO_RANGE) supported, others EOPNOTSUPP.
func (h *Handle) Allocate(off, n int64, mode uint32) error {
	if h.flags&unix.O_ACCMODE == unix.O_RDONLY {
		return unix.EBADF
	}
	return h.f.allocate(off, n, mode)
}

// Lseek handles SEEK_DATA and SEEK_HOLE (the file is reported as one data
// extent up to its size); ENXIO past EOF.
func (h *Handle) Lseek(off int64, whence int) (int64, error) {
	h.f.syncShim()
	size := h.f.size.Load()
	switch whence {
	case unix.SEEK_DATA:
		if off < 0 || off >= size {
			return 0, unix.ENXIO
		}
		return off, nil
	case unix.SEEK_HOLE:
		if off < 0 || off >= size {
			return 0, unix.ENXIO
		}
		return size, nil
	}
	return 0, unix.EINVAL
}

// PassthroughFd hands the kernel the file's RAM-tier segment for a
// read-only open (FUSE passthrough: the kernel reads it as the file, page
// i at i × page size, its length the EOF). It is offered when every page
// of the file is resident in the RAM tier (bufferpool.Bucket.Passthrough),
// or when the segment is already passed through (a second reader joins).
// Until Release the file's pages are pinned there and the segment is kept
// at the file's size (truncate); the fd stays owned by the pool. Only
// read-only handles pass through: a write made there would bypass dirty
// tracking and capacity accounting. The door must not let a writer open
// the file meanwhile (the kernel would send its writes through the
// segment too, see fusefs).
func (h *Handle) PassthroughFd() (int, bool) {
	if h.flags&unix.O_ACCMODE != unix.O_RDONLY || h.released.Load() || h.passthrough.Load() {
		return -1, false
	}
	f := h.f
	f.mu.Lock() // the size is stable
	defer f.mu.Unlock()
	if f.shimmed.Load() {
		return -1, false
	}
	fd, ok := f.bucket.Passthrough(f.size.Load())
	if ok {
		h.passthrough.Store(true)
		f.fs.stats.passthroughOpens.Add(1)
	}
	return fd, ok
}

// setattr applies a through the handle (works after unlink).
func (h *Handle) setattr(a SetAttr) (unix.Stat_t, error) {
	f := h.f
	if a.Size != nil {
		if err := f.truncate(*a.Size); err != nil {
			return unix.Stat_t{}, err
		}
	}
	fd := int(f.backing.Fd())
	if a.Mode != nil {
		if err := unix.Fchmod(fd, *a.Mode&0o7777); err != nil {
			return unix.Stat_t{}, err
		}
	}
	if a.Uid != nil || a.Gid != nil {
		if err := unix.Fchown(fd, idOrKeep(a.Uid), idOrKeep(a.Gid)); err != nil {
			return unix.Stat_t{}, err
		}
	}
	if a.Atime != nil || a.Mtime != nil {
		ts := []unix.Timespec{timespec(a.Atime), timespec(a.Mtime)}
		if err := futimens(fd, ts); err != nil {
			return unix.Stat_t{}, err
		}
		if a.Mtime != nil && !a.Mtime.Omit {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil {
				f.setMtime(timeOf(st.Mtim))
			}
		}
	}
	f.bucket.AttrChanged() // shims' cached fstat (shim.go)
	return h.Getattr()
}

// ReadPinned serves a read of [off, off+n) that lies in one resident page
// without copying: it returns the fd and offset of the page's bytes in its
// tier's segment file, and the length (clipped at EOF), with the page
// pinned until release is called (soon, exactly once). The FUSE door
// splices from there into the kernel. ok is false where the ordinary
// ReadAt must serve the read (EOF, a miss, a span over two pages).
func (h *Handle) ReadPinned(off int64, n int) (fd int, fdOff int64, length int, release func(), ok bool) {
	if off < 0 || n <= 0 || h.flags&unix.O_ACCMODE == unix.O_WRONLY {
		return -1, 0, 0, nil, false
	}
	f := h.f
	size := f.size.Load()
	if off >= size {
		return -1, 0, 0, nil, false
	}
	n = int(min(int64(n), size-off))
	ps := f.fs.ps
	i, po := off/ps, off%ps
	if po+int64(n) > ps {
		return -1, 0, 0, nil, false
	}
	// Before the pin: it holds the bucket's read lock, which the
	// read-ahead must not take again (a stage-in waiting in between for
	// the write lock would deadlock them).
	f.learnRead(off, n)
	h.readAhead(off, n)
	tier := f.bucket.PageTier(i) // not under the pin: its read lock is not reentrant
	fd, fdOff, release, ok = f.bucket.PinPage(i, po, n)
	if !ok {
		return -1, 0, 0, nil, false
	}
	f.fs.stats.hits.Add(1)
	f.fs.stats.bytesRead.Add(uint64(n))
	f.io.hit(tier)
	f.io.read.Add(uint64(n))
	f.demandHit(i)
	return fd, fdOff, n, release, true
}
