package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// fileHandle is an open regular file: one files.Handle per FUSE open.
type fileHandle struct {
	h *files.Handle
}

// passthroughHandle is a read-only open that the kernel serves from the
// file's RAM-tier memfd (FUSE passthrough). The file layer pins the file
// in the first tier from the files.Handle.PassthroughFd call (admit)
// until Release. Every such open pins the file itself, because go-fuse
// asks only the first open of an inode for the fd and reuses its backing
// ID for later ones.
type passthroughHandle struct {
	fileHandle
	fd int
}

var _ fs.FilePassthroughFder = (*passthroughHandle)(nil)

// PassthroughFd is the segment's fd; the file layer already pinned it.
func (p *passthroughHandle) PassthroughFd() (int, bool) { return p.fd, true }

// handleOf returns the file layer's handle behind a FUSE file handle, nil
// for none (or a directory handle).
func handleOf(f fs.FileHandle) *files.Handle {
	switch fh := f.(type) {
	case *fileHandle:
		return fh.h
	case *passthroughHandle:
		return fh.h
	}
	return nil
}

// newHandle wraps h and picks the open flags for the kernel: a passthrough
// open (admit decided it) is served by the kernel from the RAM tier;
// O_DIRECT bypasses the page cache (FOPEN_DIRECT_IO), and so does O_APPEND:
// through the page cache the kernel splits a write at its 4 KiB page
// boundaries into several FUSE writes, each of which the file layer places
// at the end on its own (claimAppend), so a shim's append (a CAS on the
// shared size, adapters/posix/fast.c) could land between two halves of one
// line; a direct write is one request up to max_write. The page cache is
// kept across opens only where every writer goes through this mount.
func (n *node) newHandle(ctx context.Context, h *files.Handle, flags uint32, ptFd int) (fs.FileHandle, uint32) {
	if ptFd >= 0 {
		return &passthroughHandle{fileHandle: fileHandle{h: h}, fd: ptFd}, 0
	}
	var fuseFlags uint32
	if flags&(syscall.O_DIRECT|syscall.O_APPEND) != 0 || shimWriting(n) || n.m.uncachedWrite(ctx, h) {
		return &fileHandle{h: h}, fuse.FOPEN_DIRECT_IO
	}
	if n.m.keepCache || (n.m.keepCacheAuto && h.CacheValid()) {
		fuseFlags |= fuse.FOPEN_KEEP_CACHE
	}
	return &fileHandle{h: h}, fuseFlags
}

// admit records the open h of n and decides whether the kernel passes it
// through to the file's RAM-tier segment (Options.Passthrough). The kernel
// puts an inode in one I/O mode at a time: while a passthrough open of it
// exists every other open must be passed through to the same file, and
// none may be while a cached open exists (both fail EIO otherwise). So a
// read-only open is passed through when it is the node's only open and
// the file layer offers the segment (fully resident, no shim map), or
// when the node is passed through already (it joins); a writer is refused
// ETXTBSY while the node is passed through, since its writes would go
// to the segment behind the pool's dirty tracking. The kernel sends
// RELEASE after close(2) has returned, so a writer first waits up to
// ptReleaseWait for the passed-through opens to be released: a program
// that closes its reader and then opens the file for writing is not
// refused. It returns the segment's fd for a passthrough open, -1
// otherwise.
func (n *node) admit(h *files.Handle, flags uint32) (ptFd int, errno syscall.Errno) {
	want := n.m.passthrough.Load() && flags&syscall.O_ACCMODE == syscall.O_RDONLY
	eligible := want && flags&syscall.O_DIRECT == 0 && !shimWriting(n)
	n.openMu.Lock()
	defer n.openMu.Unlock()
	if !want && !n.waitPassthroughGoneLocked() {
		return -1, syscall.ETXTBSY
	}
	if n.open == nil {
		n.open = make(map[*files.Handle]struct{})
	}
	ptFd = -1
	settled := time.Since(n.lastRelease) >= ptSettle
	if n.ptOpens > 0 || (eligible && len(n.open) == 0 && settled) {
		fd, ok := h.PassthroughFd()
		if !ok && n.ptOpens > 0 {
			return -1, syscall.EIO // cannot be: a passed-through segment takes every reader
		}
		if ok {
			ptFd = fd
			if n.ptOpens++; n.ptOpens == 1 {
				n.ptGone = make(chan struct{})
			}
		}
	}
	n.open[h] = struct{}{}
	return ptFd, 0
}

// ptReleaseWait bounds how long a writer's open waits for the RELEASE of
// passed-through opens already closed.
const ptReleaseWait = 200 * time.Millisecond

// ptSettle is how long after a RELEASE of n the kernel may still count
// the released open in the inode's I/O mode: measured, a passthrough open
// answered right after a RELEASE (of either mode) was at times failed EIO
// by the kernel (the mode seems to change when it takes our reply, which
// go-fuse writes after Release returns). So no open is passed through
// within ptSettle of a release of the node, and a cached open waits that
// long after the release of a passed-through one.
const ptSettle = 5 * time.Millisecond

// waitPassthroughGoneLocked waits, dropping openMu meanwhile, until n has
// no passed-through open (and ptSettle has passed since the last one was
// released) or ptReleaseWait is over; it reports whether none is left.
func (n *node) waitPassthroughGoneLocked() bool {
	if n.ptOpens == 0 && time.Since(n.lastPtRelease) >= ptSettle {
		return true
	}
	t := time.NewTimer(ptReleaseWait)
	defer t.Stop()
	for n.ptOpens > 0 {
		gone := n.ptGone
		n.openMu.Unlock()
		select {
		case <-gone:
		case <-t.C:
			n.openMu.Lock()
			return false
		}
		n.openMu.Lock()
	}
	if d := ptSettle - time.Since(n.lastPtRelease); d > 0 {
		n.openMu.Unlock()
		time.Sleep(d)
		n.openMu.Lock()
		return n.ptOpens == 0
	}
	return true
}

// openFile opens p in the file layer. With the writeback cache the kernel
// writes any open's dirty pages back through any writable handle of the
// inode at the offsets it chose, and reads the rest of a partly written
// page through the writer's handle, so (as libfuse's passthrough_ll does)
// a handle is opened without O_APPEND (the kernel places appends at its
// i_size, which it owns) and write-only as read-write where the caller
// may read the file anyway. A write-only open of a file the caller may not
// read stays write-only (the shim's grant follows the handle's access
// mode) and is answered FOPEN_DIRECT_IO: it never reads pages.
func (m *mount) openFile(p string, flags, mode uint32, c files.Cred) (*files.Handle, unix.Stat_t, error) {
	if !m.opts.WritebackCache {
		return m.fs.Open(p, int(flags), mode, c)
	}
	flags &^= syscall.O_APPEND
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		return m.fs.Open(p, int(flags), mode, c)
	}
	h, st, err := m.fs.Open(p, int(flags), mode, c)
	if err != nil || !mayRead(&st, c) {
		return h, st, err
	}
	// Reopen read-write: the first open made (or truncated) the file,
	// the second finds it; both are the caller's.
	rw := flags&^(syscall.O_ACCMODE|syscall.O_CREAT|syscall.O_EXCL|syscall.O_TRUNC) | syscall.O_RDWR
	h2, st2, err := m.fs.Open(p, int(rw), 0, c)
	if err != nil {
		return h, st, nil // keep the write-only open (direct I/O)
	}
	h.Release()
	return h2, st2, nil
}

// uncachedWrite reports whether, under the writeback cache, the open h
// must bypass the page cache: a write-only open (see openFile), or an open
// by a process that has the shim loaded (shimLoaded).
func (m *mount) uncachedWrite(ctx context.Context, h *files.Handle) bool {
	if !m.opts.WritebackCache {
		return false
	}
	if h.Flags()&syscall.O_ACCMODE == syscall.O_WRONLY {
		return true
	}
	c, ok := fuse.FromContext(ctx)
	return ok && shimLoaded(c.Pid)
}

// mayRead approximates the kernel's read permission check on st for c
// (primary group only, root may read anything): false errs on the side of
// a write-only handle.
func mayRead(st *unix.Stat_t, c files.Cred) bool {
	switch {
	case c.Uid == 0:
		return true
	case c.Uid == st.Uid:
		return st.Mode&0o400 != 0
	case c.Gid == st.Gid:
		return st.Mode&0o040 != 0
	}
	return st.Mode&0o004 != 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	flags &^= syscall.O_CREAT | syscall.O_EXCL
	h, st, err := n.m.openFile(p, flags, 0, caller(ctx))
	if err != nil {
		return nil, 0, toErrno(err)
	}
	n.observe(&st)
	ptFd, errno := n.admit(h, flags)
	if errno != 0 {
		h.Release()
		return nil, 0, errno
	}
	fh, fuseFlags := n.newHandle(ctx, h, flags, ptFd)
	if _, pt := fh.(*passthroughHandle); !pt && n.m.omni.helperOpen(ctx) {
		// A format helper of the views (omni.go, helperOpen). A
		// passthrough open never reaches the daemon: kept.
		fuseFlags |= fuse.FOPEN_DIRECT_IO
	}
	return fh, fuseFlags, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, st, err := n.m.openFile(p, flags|syscall.O_CREAT, mode, caller(ctx))
	if err != nil {
		return nil, nil, 0, toErrno(err)
	}
	ch := n.inode(ctx, name, &st)
	n.entryOut(ch, &st, out)
	cn := ch.Operations().(*node)
	// A new file is never passed through (flags with O_CREAT are not
	// read-only in practice; admit only refuses a writer of a node that is).
	ptFd, errno := cn.admit(h, flags)
	if errno != 0 {
		h.Release()
		return nil, nil, 0, errno
	}
	fh, fuseFlags := cn.newHandle(ctx, h, flags, ptFd)
	return ch, fh, fuseFlags, 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h := handleOf(f)
	if h == nil {
		return nil, syscall.EBADF
	}
	if len(dest) >= spliceMin {
		if fd, fdOff, n, release, ok := h.ReadPinned(off, len(dest)); ok {
			return &pinnedRead{fd: fd, off: fdOff, n: n, release: release}, 0
		}
	}
	nr, err := h.ReadAt(dest, off)
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:nr]), 0
}

// spliceMin is the smallest read served by splicing from the pool's
// segment file: below it a copy is cheaper than setting up the splice.
const spliceMin = 64 << 10

// pinnedRead is a read served without a copy in the daemon: go-fuse
// splices the bytes from the page's segment file into /dev/fuse (or
// preads them if it cannot splice), and calls Done after the reply is
// written, which unpins the page.
type pinnedRead struct {
	fd      int
	off     int64
	n       int
	release func()
	once    sync.Once
}

// Seekable makes go-fuse splice from fd at off.
func (r *pinnedRead) Seekable() (uintptr, int64, int) { return uintptr(r.fd), r.off, r.n }

func (r *pinnedRead) Bytes(buf []byte) ([]byte, fuse.Status) {
	n, err := syscall.Pread(r.fd, buf[:min(len(buf), r.n)], r.off)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:n], fuse.OK
}

func (r *pinnedRead) Size() int { return r.n }

func (r *pinnedRead) Done() { r.once.Do(r.release) }

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h := handleOf(f)
	if h == nil {
		return 0, syscall.EBADF
	}
	nw, err := h.WriteAt(data, off)
	if err != nil {
		return uint32(nw), toErrno(err)
	}
	if n.privs.Load() && !privileged(ctx) {
		if errno := n.killPrivs(ctx, h); errno != 0 {
			return uint32(nw), errno
		}
	}
	return uint32(nw), 0
}

// killPrivs clears suid/sgid after a write by an unprivileged caller
// (CAP_HANDLE_KILLPRIV_V2 makes that our job).
func (n *node) killPrivs(ctx context.Context, h *files.Handle) syscall.Errno {
	st, err := h.Getattr()
	if err != nil {
		return toErrno(err)
	}
	m, kill := killSuidgid(&st, caller(ctx), false)
	if !kill {
		n.observe(&st)
		return 0
	}
	p, _ := n.path()
	st, err = n.m.fs.Setattr(p, h, files.SetAttr{Mode: &m})
	if err != nil {
		return toErrno(err)
	}
	n.observe(&st)
	return 0
}

// Flush is close(2) of one fd of the open: it starts the write-back (and
// waits for it with FlushOnClose), so an error can reach close().
func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h := handleOf(f); h != nil {
		return toErrno(h.Flush())
	}
	return 0
}

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h := handleOf(f); h != nil {
		shimRelease(n, h)
		_, pt := f.(*passthroughHandle)
		n.removeOpen(h, pt)
		return toErrno(h.Release())
	}
	return 0
}

// Fsync is fsync/fdatasync of a file (0 = data and size on the backing
// store), or fsyncdir of a directory when go-fuse routes it here.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h := handleOf(f)
	if h == nil {
		p, ok := n.path()
		if !ok {
			return 0 // a removed directory has no entries left to make durable
		}
		return toErrno(n.m.fs.Fsyncdir(p))
	}
	return toErrno(h.Fsync(flags&fsyncFdatasync != 0))
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h := handleOf(f)
	if h == nil {
		return syscall.EBADF
	}
	return toErrno(h.Allocate(int64(off), int64(size), mode))
}

// Lseek serves SEEK_DATA and SEEK_HOLE; the kernel handles the others.
func (n *node) Lseek(ctx context.Context, f fs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	h := handleOf(f)
	if h == nil {
		return 0, syscall.EBADF
	}
	pos, err := h.Lseek(int64(off), int(whence))
	if err != nil {
		return 0, toErrno(err)
	}
	return uint64(pos), 0
}

// fsyncFdatasync is FUSE_FSYNC_FDATASYNC of FsyncIn.FsyncFlags.
const fsyncFdatasync = 1 << 0

var _ fs.NodeCopyFileRanger = (*node)(nil)

// copyChunk is how much one step of CopyFileRange moves.
const copyChunk = 1 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyChunk); return &b }}

// CopyFileRange is copy_file_range(2) within the mount, served from the
// pool. Without it the kernel copies by splicing through its page cache,
// which can be stale: a shim writes resident pages in place behind it. The
// kernel has checked the ranges (no overlap within one file, out not
// O_APPEND), written back its dirty pages of both ranges before the
// request, and drops the destination's cached pages after it. A copy stops
// at the source's EOF; an error after some bytes moved returns the count.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle,
	offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	src, dst := handleOf(fhIn), handleOf(fhOut)
	on, ok := out.Operations().(*node)
	if src == nil || dst == nil || !ok {
		return 0, syscall.EBADF
	}
	if flags != 0 {
		return 0, syscall.EINVAL
	}
	length = min(length, 1<<31) // the reply's count is 32 bits
	done, err := copyRange(src, int64(offIn), dst, int64(offOut), int64(length))
	if err != nil && done == 0 {
		return 0, toErrno(err)
	}
	if done > 0 && on.privs.Load() && !privileged(ctx) {
		if errno := on.killPrivs(ctx, dst); errno != 0 {
			return uint32(done), errno
		}
	}
	return uint32(done), 0
}

// copyRange copies up to n bytes from src at offIn to dst at offOut, in
// chunks; it returns the bytes copied (short at the source's EOF).
func copyRange(src *files.Handle, offIn int64, dst *files.Handle, offOut, n int64) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	var done int64
	for done < n {
		buf := (*bp)[:min(int64(len(*bp)), n-done)]
		nr, err := src.ReadAt(buf, offIn+done)
		if nr > 0 {
			nw, werr := dst.WriteAt(buf[:nr], offOut+done)
			done += int64(nw)
			if werr != nil {
				return done, werr
			}
		}
		if err != nil {
			return done, err
		}
		if nr < len(buf) {
			return done, nil // EOF of the source
		}
	}
	return done, nil
}
