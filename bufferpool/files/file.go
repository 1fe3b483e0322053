package files

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// file is the pool-side state of one backing inode: its bucket, its size,
// and an fd on the backing file for stage-in and write-back.
type file struct {
	fs     *FS
	key    fileKey
	bucket *bufferpool.Bucket

	// backingMu serializes I/O that changes the backing file (write-back,
	// truncate, fallocate) and the swap of the backing fd.
	backingMu sync.Mutex
	backing   *os.File
	// backingGen is odd while something holds backingMu to change the
	// backing file or drop pages (lockBacking), and grows at each such
	// change: a demand stage-in that reads the backing file without
	// backingMu installs what it read only if backingGen is what it was,
	// and even, before the read (stageIn).
	backingGen atomic.Uint64
	io         fileIO          // what the pool did for this file (FileIO)
	direct     directFd        // an O_DIRECT fd on the backing file, for stage-ins (direct.go)
	stageHook  func(off int64) // tests: called by each stage-in after it read the backing file at off

	// mu keeps the size stable: shared for reads and in-place writes,
	// exclusive for appends, truncation and fallocate.
	mu      sync.RWMutex
	size    atomic.Int64 // logical size of the file
	shimmed atomic.Bool  // a read-write shim map was granted: shims may raise the size (shim.go)
	// shimMu orders a read-write grant (ShimMaps) against the end of the
	// last one (ShimUnmap); taken before mu and the bucket's lock.
	shimMu      sync.Mutex
	lastWrite   atomic.Int64 // UnixNano of the last data change
	backingSize atomic.Int64 // size of the backing file: pages past it stage in as zeros
	wbStart     atomic.Int64 // UnixNano when the running write-back began; 0 = none

	idleElem *list.Element // in FS.idle while nobody holds it; guarded by FS.mu

	// stateMu is a leaf lock for the bookkeeping below.
	stateMu    sync.Mutex
	refs       int // handles and transient users
	writable   bool
	unlinked   bool
	dropped    bool
	mtime      time.Time // time of the last data change not yet on the backing store
	mtimeDirty bool
	seenSize   int64 // backing size and mtime after our last change: detects other nodes
	seenMtime  unix.Timespec
	name       string   // the path it was last opened by (logs, stat)
	health     wbHealth // is its write-back failing, why, since when

	pf    pfState    // pages staged ahead and not read yet (prefetch.go)
	learn learnState // this session's reads, the last one's replayed (learned.go)

	sums   fileSums    // checksums the write-back recorded (checksum.go)
	wbSums sumPass     // the running write-back pass's; guarded by backingMu
	snap   snapShare   // snapshots sharing its pages (snapshot.go)
	remote remoteState // another node's view of the file (remote.go)
}

// attach returns the file object of the regular file open at fd (taking
// ownership of fd), with one reference for the caller. stale reports that
// the backing file may have changed behind the pool's back (cached pages
// were dropped, or the file object is new): a door must drop its own
// caches of the file too. view is what the cluster's shared namespace
// said of the file at this open (remote.go): while another node owns it,
// the backing store is not the truth (the owner's write-back changes it
// under us, a page at a time) and the first open does not revalidate
// against it; useRemote settles the pages and the size instead.
func (fs *FS) attach(fd int, writable bool, view *RemoteView) (f *file, stale bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, false, unix.EISDIR
		}
		return nil, false, unix.EINVAL
	}
	k := keyOf(&st)
	fs.mu.Lock()
	if fs.closed.Load() {
		fs.mu.Unlock()
		unix.Close(fd)
		return nil, false, ErrClosed
	}
	f = fs.files[k]
	if f == nil {
		b, err := fs.pool.Bucket(fmt.Sprintf("file:%d", fs.nextID.Add(1)), bufferpool.BucketOptions{PageSize: fs.ps})
		if err != nil {
			fs.mu.Unlock()
			unix.Close(fd)
			return nil, false, err
		}
		f = &file{fs: fs, key: k, bucket: b, backing: os.NewFile(uintptr(fd), "backing"), refs: 1, writable: writable}
		f.size.Store(st.Size)
		if !fs.scratch { // a scratch placeholder holds no data
			f.backingSize.Store(st.Size)
			// Named when a journal first needs it (a dirty page on the
			// file tier): readlink, name_to_handle_at and statx per
			// open of a new file were a tenth of a create's syscalls.
			tagSt, bf := st, f.backing
			b.SetJournalTagFunc(func() []byte { return journalTag(int(bf.Fd()), &tagSt) }, st.Size)
		}
		f.seenSize, f.seenMtime = st.Size, st.Mtim
		fs.files[k] = f
		fs.mu.Unlock()
		// A new file object has no history to vouch for a door's cache
		// (the file may have been retired and rewritten by another node).
		return f, true, nil
	}
	fs.idle.remove(f)
	f.stateMu.Lock()
	f.refs++
	first := f.refs == 1
	upgrade := writable && !f.writable
	if upgrade {
		f.writable = true
	}
	f.stateMu.Unlock()
	fs.mu.Unlock()
	if upgrade {
		// Replace the fd in place (dup3 is atomic): readers use f.backing
		// without backingMu, so neither the *os.File nor its fd number
		// may change under them.
		f.backingMu.Lock()
		err := unix.Dup3(fd, int(f.backing.Fd()), unix.O_CLOEXEC)
		f.backingMu.Unlock()
		if err != nil {
			f.stateMu.Lock()
			f.writable = false
			f.stateMu.Unlock()
		}
	}
	unix.Close(fd)
	if first && view == nil {
		stale = f.revalidate()
	}
	return f, stale, nil
}

// revalidate drops cached pages when the backing file changed behind our
// back (another node wrote it): close-to-open consistency.
func (f *file) revalidate() (dropped bool) {
	// A file with data not yet written back is this node's newest copy
	// (checked again below, under the lock): return before taking
	// backingMu, which a write-back pass in progress holds for as long
	// as backing_bandwidth throttles it.
	if f.fs.scratch || f.unwritten() {
		return false
	}
	f.lockBacking()
	defer f.unlockBacking()
	f.mu.Lock()
	defer f.mu.Unlock()
	// Stat under backingMu: a write-back that just finished changed it.
	var now unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &now) != nil {
		return false
	}
	st := &now
	f.stateMu.Lock()
	same := st.Size == f.seenSize && st.Mtim == f.seenMtime
	dirty := f.mtimeDirty
	f.stateMu.Unlock()
	if same || dirty || f.bucket.HasDirty() {
		return false
	}
	if err := f.bucket.Truncate(0); err != nil {
		return false
	}
	f.size.Store(st.Size)
	f.bucket.NoteDataEnd(st.Size) // the backing file's new bytes: no holes for shims
	f.shareSize()
	f.backingSize.Store(st.Size)
	f.stateMu.Lock()
	f.seenSize, f.seenMtime = st.Size, st.Mtim
	f.stateMu.Unlock()
	return true
}

// release drops one reference; an unlinked file goes with its last one.
func (f *file) release() {
	f.stateMu.Lock()
	f.refs--
	idle := f.refs == 0
	gone := idle && f.unlinked
	f.stateMu.Unlock()
	if gone {
		f.drop()
		return
	}
	if idle {
		f.fs.idleFile(f)
	}
}

// markUnlinked records that the last name of the file is gone.
func (f *file) markUnlinked() {
	f.fs.forget(f)
	f.stateMu.Lock()
	f.unlinked = true
	gone := f.refs == 0
	f.stateMu.Unlock()
	if gone {
		f.drop()
	}
}

// drop frees the pages and the backing fd.
func (f *file) drop() {
	f.lockBacking()
	defer f.unlockBacking()
	f.stateMu.Lock()
	done := f.dropped
	f.dropped = true
	f.stateMu.Unlock()
	if done {
		return
	}
	f.fs.pool.DeleteBucket(f.bucket.Name())
	f.prefetchDropped()
	f.direct.close()
	f.backing.Close()
	f.fs.signalSpace()
}

// overlay puts the pool's view of size and mtime into st.
func (f *file) overlay(st *unix.Stat_t) {
	f.syncShim()
	size := f.size.Load()
	st.Size = size
	if blocks := (size + 4095) / 4096 * 8; blocks > st.Blocks {
		st.Blocks = blocks
	}
	f.stateMu.Lock()
	if f.mtimeDirty {
		st.Mtim = unix.NsecToTimespec(f.mtime.UnixNano())
		if st.Ctim.Nano() < st.Mtim.Nano() {
			st.Ctim = st.Mtim
		}
	}
	f.stateMu.Unlock()
}

func (f *file) touch() { f.setMtime(time.Now()) }

func (f *file) setMtime(t time.Time) {
	f.setMtimeQuiet(t)
	f.bucket.AttrChanged() // shims' cached fstat (shim.go)
}

// setMtimeQuiet is setMtime for an mtime the shims already serve (their
// own: shimChanged).
func (f *file) setMtimeQuiet(t time.Time) {
	f.stateMu.Lock()
	f.mtime, f.mtimeDirty = t, true
	f.stateMu.Unlock()
}

// pageSpan splits [off, off+n) into page-sized pieces.
func (f *file) pageSpan(off int64, n int, fn func(i, po int64, lo, hi int) error) error {
	ps := f.fs.ps
	done := 0
	for done < n {
		pos := off + int64(done)
		i, po := pos/ps, pos%ps
		step := int(min(ps-po, int64(n-done)))
		if err := fn(i, po, done, done+step); err != nil {
			return err
		}
		done += step
	}
	return nil
}

// lockBacking takes backingMu to change the backing file (or the pages
// staged from it): backingGen is odd until unlockBacking.
func (f *file) lockBacking() {
	f.backingMu.Lock()
	f.backingGen.Add(1)
}

func (f *file) unlockBacking() {
	f.backingGen.Add(1)
	f.backingMu.Unlock()
}

// stager returns the Filler that stages page i in from the backing file,
// or nil when the backing file has nothing there (a hole or past its end).
func (f *file) stager(i int64) bufferpool.Filler {
	start := i * f.fs.ps
	if start >= f.backingSize.Load() {
		return nil
	}
	return func(buf []byte) error {
		_, err := f.stagePage(buf, i)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("stage in page %d: %w", i, err)
		}
		return nil
	}
}

// readWith reads at off; short at EOF. around allows a small read of an
// absent page to be served from the backing file (readAround).
func (f *file) readWith(buf []byte, off int64, around bool) (int, error) {
	f.syncShim()
	f.mu.RLock()
	defer f.mu.RUnlock()
	size := f.size.Load()
	if off >= size {
		return 0, nil
	}
	if int64(len(buf)) > size-off {
		buf = buf[:size-off]
	}
	err := f.pageSpan(off, len(buf), func(i, po int64, lo, hi int) error {
		return f.readPage(i, po, buf[lo:hi], around)
	})
	if err != nil {
		return 0, err
	}
	f.fs.stats.bytesRead.Add(uint64(len(buf)))
	f.io.read.Add(uint64(len(buf)))
	return len(buf), nil
}

func (f *file) readPage(i, po int64, dst []byte, around bool) error {
	found, err := f.bucket.ReadPage(i, po, dst, nil)
	if err == nil && !found && f.pf.waitRead(i) {
		found, err = f.bucket.ReadPage(i, po, dst, nil) // read ahead meanwhile
	}
	if errors.Is(err, bufferpool.ErrCorrupt) {
		if !f.repairPage(i, err) {
			return fmt.Errorf("read page %d of %s: %w: %w", i, f.displayName(), err, unix.EIO)
		}
		found = false // dropped: staged in again below
	} else if err != nil {
		return err
	}
	if found {
		f.fs.stats.hits.Add(1)
		f.io.hit(f.bucket.PageTier(i))
		f.demandHit(i)
		return nil
	}
	f.fs.stats.misses.Add(1)
	f.io.misses.Add(1)
	if v := f.remote.view.Load(); v != nil {
		return f.readRemote(v, i, po, dst) // remote.go
	}
	fill := f.stager(i)
	if fill == nil {
		clear(dst)
		return nil
	}
	if around && int64(len(dst)) <= f.fs.ps/4 && f.readAround(i, po, dst) {
		return nil
	}
	found, err = f.stageIn(i, po, dst, fill)
	if errors.Is(err, bufferpool.ErrCorrupt) && !errors.Is(err, unix.EIO) {
		err = fmt.Errorf("read page %d of %s: %w: %w", i, f.displayName(), err, unix.EIO)
	}
	if found {
		f.demandHit(i) // staged in meanwhile (by a prefetch it waited for)
	} else {
		f.demandMiss(i)
	}
	if errors.Is(err, bufferpool.ErrNoSpace) {
		// Pool full of dirty pages: serve the read from the backing file
		// uncached (the page is not resident, so the backing file is current).
		clear(dst)
		_, rerr := f.stageRead(dst, i*f.fs.ps+po, false)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("read page %d: %w", i, rerr)
		}
		return nil
	}
	return err
}

// readAround serves a small read of an absent page straight from the
// backing file: a 4 KiB miss costs a 4 KiB read of the backing file, not
// one of a whole page. At the second such read of a page the whole page
// is queued to be staged in behind it, in the background; staging it at
// the first made a random reader's device read 256 times its bytes
// (measured, 1 MiB pages, 1 GiB cold file, same run: a 4 KiB read took
// 1.5-1.7 ms through the mount staging each page, 1.6 ms reading around
// and staging behind at once, 0.5 ms reading around only; 0.11 ms on the
// backing dir). The page is absent and the caller holds f.mu shared, which a
// write-back's snapshot of a page needs exclusively: the backing file holds
// the page's bytes. false: it did not (the backing file is being changed,
// or the read failed: the stage-in says why); the caller stages in.
func (f *file) readAround(i, po int64, dst []byte) bool {
	g := f.backingGen.Load()
	if g&1 != 0 {
		return false
	}
	n, err := f.stageRead(dst, i*f.fs.ps+po, false)
	if (err != nil && !errors.Is(err, io.EOF)) || f.backingGen.Load() != g {
		return false
	}
	clear(dst[n:])
	f.fs.stats.readAround.Add(1)
	if f.pf.missedAgain(i) {
		f.fs.prefetch.stageBehind(f, i)
	}
	return true
}

// stageIn stages page i in from the backing file and copies dst from it
// at po. It reads the backing file holding no lock of the pool, so reads
// of other pages of the file (and the read-ahead's installs) go on during
// the I/O, and installs the page if it is still absent and the backing
// file did not change meanwhile (backingGen). Otherwise, or while the
// backing file is being changed, it takes the bucket's fill path, which
// reads the backing file under the bucket's lock. found: the page was
// resident by the time it looked (another read or the read-ahead put it
// there).
func (f *file) stageIn(i, po int64, dst []byte, fill bufferpool.Filler) (found bool, err error) {
	g := f.backingGen.Load()
	if g&1 != 0 {
		return f.bucket.ReadPage(i, po, dst, fill)
	}
	page := dst // a whole page: read it in place
	if po != 0 || int64(len(dst)) != f.fs.ps {
		bp := f.fs.getPage()
		defer f.fs.putPage(bp)
		page = *bp
	}
	n, err := f.stagePage(page, i)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("stage in page %d: %w", i, err)
	}
	clear(page[n:])
	installed, err := f.installStaged(i, page, func() bool { return f.backingGen.Load() == g })
	if installed || errors.Is(err, bufferpool.ErrNoSpace) {
		// Full of dirty pages: the page is absent, so what was read is
		// still the file's content; serve it uncached.
		if &page[0] != &dst[0] {
			copy(dst, page[po:])
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return f.bucket.ReadPage(i, po, dst, fill) // resident now, or the backing file changed
}

// write writes data at off (at EOF if appending), waiting for pool space
// as long as Options.NoSpaceWait allows.
func (f *file) write(data []byte, off int64, appending bool) (int, error) {
	return f.writeMode(data, off, appending, false)
}

// writeMode is write; inside refuses (ErrPastEOF, nothing written) a
// write that would end past the size, checked under the lock that
// truncate takes.
func (f *file) writeMode(data []byte, off int64, appending, inside bool) (int, error) {
	deadline := time.Now().Add(f.fs.opts.NoSpaceWait)
	total := 0
	for {
		n, at, err := f.writeOnce(data, off, appending, inside)
		total += n
		if !errors.Is(err, bufferpool.ErrNoSpace) {
			if total > 0 {
				f.written()
			}
			if err == nil && f.fs.opts.Mode == Writethrough {
				err = f.writeBack(syncNone)
			}
			return total, err
		}
		data, off = data[n:], at+int64(n)
		// The rest of an append goes on where it stopped: its range
		// is reserved (claimAppend), another append may follow it.
		appending = false
		if n > 0 {
			// Queue what is written so far: the room this write waits
			// for may be its own pages, written back.
			f.written()
		}
		if f.fs.scratch || time.Now().After(deadline) || f.fs.closed.Load() {
			return total, fmt.Errorf("write: pool full of dirty data: %w", ErrNoSpace)
		}
		f.fs.spaceWaiters.Add(1)
		f.fs.waitSpace(50 * time.Millisecond)
		f.fs.spaceWaiters.Add(-1)
	}
}

// writeOnce copies data into pages until done or the pool is full. It
// returns the bytes written and the offset it wrote at.
func (f *file) writeOnce(data []byte, off int64, appending, inside bool) (int, int64, error) {
	if appending {
		f.mu.Lock()
		defer f.mu.Unlock()
		off = f.claimAppend(int64(len(data)))
	} else {
		f.mu.RLock()
		defer f.mu.RUnlock()
	}
	if int64(len(data)) > maxFileSize-off {
		return 0, off, unix.EFBIG
	}
	if inside && off+int64(len(data)) > f.size.Load() {
		return 0, off, ErrPastEOF
	}
	if err := f.preserve(off, int64(len(data))); err != nil {
		return 0, off, err
	}
	ps := f.fs.ps
	done := 0
	err := f.pageSpan(off, len(data), func(i, po int64, lo, hi int) error {
		var fill bufferpool.Filler
		if po != 0 || int64(hi-lo) != ps {
			fill = f.stager(i)
		}
		if _, err := f.bucket.WritePage(i, po, data[lo:hi], fill); err != nil {
			return err
		}
		done = hi
		growTo(&f.size, off+int64(hi))
		f.shareSize()
		return nil
	})
	return done, off, err
}

// written records a data change and schedules its write-back.
func (f *file) written() {
	f.dataChanged()
	f.schedule()
}

// dataChanged stamps a change of the file's bytes (a write, or shim writes
// found by a harvest): mtime, and the time the write-back waits out.
func (f *file) dataChanged() {
	f.learnWrite()
	now := time.Now()
	f.lastWrite.Store(now.UnixNano())
	f.setMtime(now)
}

// schedule queues the file's background write-back (writeback mode).
func (f *file) schedule() {
	if f.fs.opts.Mode == Writeback {
		f.fs.flusher.enqueue(f)
	}
}

// futimens sets the times of an open file (x/sys has no NULL-path
// utimensat): through its /proc/self/fd link, which reaches the inode even
// after an unlink.
func futimens(fd int, ts []unix.Timespec) error {
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), ts, 0)
}

// maxFileSize is the largest file the pool holds (bufferpool's maxOffset:
// pages past it are refused); writes past it fail with EFBIG, and checking
// against it keeps off+len from overflowing.
const maxFileSize = 1 << 60

func growTo(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// truncate sets the size, in the pool and (at once, in order with the
// write-back) on the backing file.
func (f *file) truncate(size int64) error {
	if size < 0 {
		return unix.EINVAL
	}
	f.learnWrite()
	f.lockBacking()
	defer f.unlockBacking()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncShim()
	if err := f.preserve(size, -1); err != nil {
		return err
	}
	// The backing file first: if it refuses (EPERM, EIO), the pool keeps
	// every page, dirty ones included, and the file is unchanged.
	if !f.fs.scratch {
		if err := f.backing.Truncate(size); err != nil {
			return err
		}
		f.backingSize.Store(size)
		f.noteSeenLocked()
	}
	if err := f.bucket.Truncate(size); err != nil {
		return err
	}
	f.size.Store(size)
	f.shareSize()
	f.touch()
	f.schedule()
	return nil
}

// noteSeenLocked records the backing file's size and mtime after our own
// change, so revalidate does not take it for another node's. Called with
// backingMu held.
func (f *file) noteSeenLocked() {
	f.bucket.AttrChanged() // the backing file's times changed: shims' cached fstat
	var st unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &st) == nil {
		f.stateMu.Lock()
		f.seenSize, f.seenMtime = st.Size, st.Mtim
		f.stateMu.Unlock()
	}
}

// allocate is fallocate(2).
func (f *file) allocate(off, n int64, mode uint32) error {
	if off < 0 || n <= 0 {
		return unix.EINVAL
	}
	const punch = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
	keep := mode&unix.FALLOC_FL_KEEP_SIZE != 0
	f.lockBacking()
	defer f.unlockBacking()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncShim() // zero what shims wrote past the size the pool knew, too
	zero := mode == punch || mode&^unix.FALLOC_FL_KEEP_SIZE == unix.FALLOC_FL_ZERO_RANGE
	if !zero && mode != 0 && mode != unix.FALLOC_FL_KEEP_SIZE {
		return unix.EOPNOTSUPP
	}
	if zero {
		if err := f.preserve(off, n); err != nil {
			return err
		}
	}
	// The backing file first: if it refuses, the pool is unchanged.
	if !f.fs.scratch {
		if err := unix.Fallocate(int(f.backing.Fd()), mode, off, n); err != nil {
			return err
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.backing.Fd()), &st) == nil {
			growTo(&f.backingSize, st.Size)
		}
		f.noteSeenLocked()
	}
	if zero {
		if err := f.zeroRangeLocked(off, n); err != nil {
			return err
		}
	}
	if !keep {
		growTo(&f.size, off+n)
		f.shareSize()
	}
	f.touch()
	f.schedule()
	return nil
}

// zeroRangeLocked zeroes [off, off+n) of the pool's pages (up to the
// size), after the backing file got the same fallocate: the zeroed bytes
// are not dirty, so the write-back does not write zeros over the hole it
// punched. In scratch mode they are (there is no backing copy). Called
// with backingMu and mu held.
func (f *file) zeroRangeLocked(off, n int64) error {
	end := min(off+n, f.size.Load())
	if end <= off {
		return nil
	}
	if f.fs.scratch {
		return f.bucket.ZeroRange(off, end-off)
	}
	return f.bucket.PunchRange(off, end-off)
}

// syncMode says how far a write-back goes before it marks pages clean.
type syncMode int

const (
	// syncNone: written to the backing file (writethrough writes: the
	// application's own write(2) to the backing store, errseq and all).
	syncNone syncMode = iota
	// syncData: written and fdatasync'ed (the background write-back,
	// flush_on_close, unmount, fdatasync(2)).
	syncData
	// syncFull: written and fsync'ed (fsync(2), syncfs(2)).
	syncFull
)

// wbReq is one write-back of a file.
type wbReq struct {
	sync       syncMode
	background bool // the flusher: may leave a file still being written alone (flushDelay)
	always     bool // sync the backing file even when nothing is dirty (fsync(2))
}

// writeBack writes every dirty page, then the size and mtime, to the
// backing file and syncs it as mode says.
func (f *file) writeBack(mode syncMode) error {
	_, err := f.writeBackPages(wbReq{sync: mode})
	return err
}

// fsync is fsync(2) (fdatasync(2) if datasync) of the file.
func (f *file) fsync(datasync bool) error {
	mode := syncFull
	if datasync {
		mode = syncData
	}
	_, err := f.writeBackPages(wbReq{sync: mode, always: true})
	return err
}

// flushDelay is how long the background write-back leaves alone a file
// that is still being written, while the pool is not under pressure
// (under pressure: its last dirty page only). A sequential writer fills a
// page with several writes, and a random writer dirties a page many times:
// writing the page back after each write would multiply the traffic to
// the backing store.
const flushDelay = 100 * time.Millisecond

// writeBackPages writes back dirty pages, then size and mtime, and syncs
// as r says; only then are the pages marked clean. In the background, for
// a file written within flushDelay, it defers the whole file, or under
// pressure its last dirty page (deferred reports it). Every outcome goes
// to noteWriteBack.
func (f *file) writeBackPages(r wbReq) (deferred bool, err error) {
	f.syncShim() // the size and pages shims wrote go back too
	if f.fs.scratch {
		return false, nil
	}
	f.lockBacking()
	defer f.unlockBacking()
	f.stateMu.Lock()
	skip := f.unlinked || f.dropped
	f.stateMu.Unlock()
	if skip {
		f.noteRecovered("%s was deleted: its failing write-back (%v, %d attempts) is moot")
		return false, nil
	}
	if !f.unwritten() {
		// Nothing of ours to write: leave the backing file (and what we
		// know of it, for revalidate) alone; it may be another node's now.
		if r.always && r.sync != syncNone {
			err = f.fs.store.Sync(f.backing, r.sync == syncData)
			f.noteWriteBack(err)
			if err == nil {
				f.saveSumsLocked() // what writethrough writes recorded
			}
		}
		return false, err
	}
	var p wbPass
	// The mtime before the pages: a write dirties its pages before it
	// stamps the mtime, so every change up to p.mtime is in p.pages.
	f.stateMu.Lock()
	p.mtime, p.mtimeDirty = f.mtime, f.mtimeDirty
	f.stateMu.Unlock()
	p.pages = f.bucket.DirtyPages()
	if r.background {
		var whole bool
		if p.pages, p.deferred, whole = f.deferPages(p.pages); whole {
			return true, nil
		}
	}
	f.wbStart.Store(time.Now().UnixNano())
	err = f.flushLocked(r, p)
	f.wbStart.Store(0)
	f.noteWriteBack(err)
	return p.deferred, err
}

// wbPass is what one write-back of a file writes.
type wbPass struct {
	pages      []int64   // dirty pages to write
	deferred   bool      // some dirty pages are left for later
	mtime      time.Time // the file's mtime when the pass began
	mtimeDirty bool      // and whether the backing file lacks it
}

// deferPages is the background write-back's choice for a file written
// within flushDelay: while the pool is not under pressure it leaves the
// whole file alone (whole), letting the pages collect more writes first
// (random small writes would otherwise write a whole page back per
// write); under pressure it leaves the last page (deferred), unless
// writers wait for space.
func (f *file) deferPages(pages []int64) (rest []int64, deferred, whole bool) {
	if len(pages) == 0 || time.Now().UnixNano()-f.lastWrite.Load() >= int64(flushDelay) {
		return pages, false, false
	}
	switch {
	case !f.fs.underPressure():
		return nil, true, true
	case f.fs.spaceWaiters.Load() == 0:
		return pages[:len(pages)-1], true, false
	}
	return pages, false, false
}

// written is a page written to the backing file in this write-back, to
// be marked clean once the backing store has it.
type written struct {
	i   int64
	ver uint64
}

// flushLocked is one write-back of a dirty file: pages, size, mtime,
// sync, and only then are the pages clean. A failure anywhere leaves
// every page dirty: the backing store may have dropped what it was given
// (after a failed fsync Linux marks its own pages clean and the data may
// be gone), so the pool keeps the only good copy until a sync succeeds.
// Called with backingMu held.
func (f *file) flushLocked(r wbReq, p wbPass) error {
	f.startSumPassLocked()
	f.wbSums = sumPass{}
	done, err := f.writePagesLocked(p.pages)
	if err != nil {
		return err
	}
	if err := f.writeSizeLocked(); err != nil {
		return err
	}
	// Every page dirty when the pass began is written: the mtime is
	// ours to set (a write since changed f.mtime, and stays dirty).
	setMtime := p.mtimeDirty && !p.deferred
	if setMtime {
		if err := f.writeMtimeLocked(p.mtime); err != nil {
			return err
		}
	}
	if r.sync != syncNone {
		if err := f.fs.store.Sync(f.backing, r.sync == syncData); err != nil {
			return err
		}
	}
	f.commitSumPassLocked(&f.wbSums, r.sync != syncNone)
	f.markClean(done)
	if setMtime {
		f.stateMu.Lock()
		if f.mtime.Equal(p.mtime) {
			f.mtimeDirty = false
		}
		f.stateMu.Unlock()
	}
	f.noteSeenLocked()
	return nil
}

// markClean clears the dirty bits of the pages written (those written to
// again since stay dirty) and wakes writers waiting for pool space.
func (f *file) markClean(done []written) {
	cleaned := false
	for _, w := range done {
		if f.bucket.MarkClean(w.i, w.ver) {
			cleaned = true
		}
	}
	if cleaned {
		f.fs.signalSpace()
	}
}

// writePagesLocked writes pages to the backing file and returns those
// written. Called with backingMu held.
func (f *file) writePagesLocked(pages []int64) (done []written, err error) {
	bp := f.fs.getPage()
	defer f.fs.putPage(bp)
	done = make([]written, 0, len(pages))
	rs := make([]bufferpool.Range, 0, 4) // a page's ranges, reused
	for _, i := range pages {
		w, ok, err := f.writePageLocked(i, *bp, rs[:0])
		if err != nil {
			return nil, err
		}
		if ok {
			done = append(done, w)
		}
	}
	return done, nil
}

// writePageLocked writes the dirty ranges of page i to the backing file
// (through buf, rs the room for the ranges); ok is false when the page is
// gone or clean. Only the ranges go: a page written in part over a hole
// (a new page, a write past EOF) leaves the rest a hole on the backing
// file, and a stream of small writes writes each byte once. Called with
// backingMu held.
func (f *file) writePageLocked(i int64, buf []byte, rs []bufferpool.Range) (w written, ok bool, err error) {
	// Snapshot under f.mu exclusively: a writer grows the size just
	// after it dirties a page, and a stale size would cut the page.
	f.mu.Lock()
	s, err := f.bucket.SnapshotDirty(i, buf, rs)
	size := f.size.Load()
	f.mu.Unlock()
	if err != nil {
		return w, false, fmt.Errorf("write back page %d: %w", i, err)
	}
	if !s.Found || !s.Dirty {
		return w, false, nil
	}
	start := i * f.fs.ps
	// Bytes past the end (truncated, and the backing file with it) are
	// not written: such a page is clean once the pass succeeds.
	valid := max(0, min(f.fs.ps, size-start))
	covered := int64(0) // the ranges cover [0, covered): sorted, disjoint
	for _, r := range s.Ranges {
		if err := f.writeRangeLocked(buf, start, r.Lo, min(r.Hi, valid)); err != nil {
			return w, false, fmt.Errorf("write back page %d: %w", i, err)
		}
		if r.Lo <= covered {
			covered = max(covered, r.Hi)
		}
	}
	f.wbSums.noteWritten(i, buf[:valid], valid > 0 && covered >= valid, f.fs.ps)
	return written{i, s.Version}, true, nil
}

// writeRangeLocked writes buf[lo:hi], the bytes of the page at start, to
// the backing file; nothing if the range is empty. Called with backingMu
// held.
func (f *file) writeRangeLocked(buf []byte, start, lo, hi int64) error {
	if lo >= hi {
		return nil
	}
	f.fs.limiter.wait(hi - lo)
	t := time.Now()
	_, err := f.fs.store.WriteAt(f.backing, buf[lo:hi], start+lo)
	f.fs.stats.flushLat.Since(t)
	if err != nil {
		return err
	}
	growTo(&f.backingSize, start+hi)
	f.fs.stats.flushed.Add(uint64(hi - lo))
	f.io.flushed.Add(uint64(hi - lo))
	return nil
}

// writeSizeLocked extends the backing file to the file's size. Called
// with backingMu held.
func (f *file) writeSizeLocked() error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.backing.Fd()), &st); err != nil {
		return fmt.Errorf("write back size: %w", err)
	}
	if size := f.size.Load(); st.Size < size {
		if err := f.fs.store.Truncate(f.backing, size); err != nil {
			return fmt.Errorf("write back size %d: %w", size, err)
		}
		growTo(&f.backingSize, size)
	}
	return nil
}

// writeMtimeLocked sets the backing file's mtime. Called with backingMu
// held.
func (f *file) writeMtimeLocked(mt time.Time) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mt.UnixNano())}
	if err := futimens(int(f.backing.Fd()), ts); err != nil {
		return fmt.Errorf("write back mtime: %w", err)
	}
	return nil
}
