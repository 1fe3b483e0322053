package bufferpool

import (
	"fmt"
	"log"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/abi"
)

// The page table of a page bucket, in shared memory, for clients outside
// the daemon (the LD_PRELOAD shim maps it with the first-tier segment:
// read-only for a read-only open, read-write for a read-write one).
// Layout (little endian; internal/abi is its one source, which generates
// adapters/posix/abi.h for the shim's fast.c and mmap.c):
//
//	0     u32 magic "IOWP", u32 version
//	8     u64 seq: odd while the bucket is write-locked (a seqlock)
//	16    i64 size: the file's size, set by the owner (bufferpool/files)
//	24    u64 page size
//	32    u64 nbits: pages each bitmap covers
//	40    u32 flags: ptWritable (read-write maps were handed out),
//	      ptPoisoned (shim writes refused, see below)
//	64    i64 writers: shim writers inside a page (own cache line)
//	72    u64 dirty hint: non-zero once a shim write set a dirty bit
//	80    i64 mappers: the shims' count of their shared maps of the file
//	4096  resident bitmap: bit i set = page i is resident in the first
//	      tier, at i*PageSize of its segment (written by the daemon only)
//	4096+nbits/8  dirty bitmap: bit i set = a shim wrote page i since the
//	      last harvest (set by shims after their copy, taken by the
//	      daemon with an atomic swap of its word)
//
// Reads. Every change of a page's bytes or placement happens under the
// bucket's write lock, and the lock makes seq odd for as long as it is
// held (see seqMutex). A reader loads seq (even), checks the bit, copies,
// and loads seq again: equal means the copy is a consistent image of a
// resident page.
//
// Writes (Dekker-style exclusion with the daemon). A shim writer adds 1 to
// writers, then loads seq and the flags (both sequentially consistent): if
// seq is odd, the file is poisoned or a page is not resident, it takes 1
// back and uses the kernel path; else it copies into the page, sets the
// page's dirty bit and the hint, and takes 1 back. The daemon, on every
// write lock, makes seq odd first and then waits until writers is 0 before
// it touches anything: either the shim sees seq odd or the daemon sees the
// writer, so no page is moved, punched, evicted or truncated under a
// writer. Then, still under the lock, it harvests: each shared dirty bit
// of a first-tier page is cleared and the page marked dirty in the pool
// with a new version (harvestLocked), so write-back, eviction and
// demotion see shim writes like any other; DirtyPages harvests first too.
//
// Harvests that change only the pool's metadata (the 50 ms harvester,
// stat's and write-back's, lease refills, MarkClean) take the lock with
// LockMeta instead: seq stays even and the daemon does not wait for
// writers, so a shim writer never meets them. They snapshot and clear
// the dirty bitmap a word at a time (atomic swap) while writers go on;
// a writer sets its pages' dirty bits after its copy, so each bit taken
// stands for a finished copy, and one set later is the next harvest's.
// Only what moves bytes or placement (a page written, staged in,
// evicted, demoted, punched, truncated) excludes the shims.
//
// A writer that never leaves (killed or stopped inside a copy, or a client
// scribbling over writers) must not hang the daemon: after ptWaitBound the
// lock proceeds, the file is poisoned (shim writes go to the kernel; reads
// keep their fast path) and the event is logged once per file. The poison
// lifts when a later lock finds writers back at 0, or when the owner
// resets the table after the last read-write map of the file was released
// (ResetShimWriters). What such a writer can damage is the bytes of this
// file, which its client was allowed to write: the daemon reads nothing
// from the table but writers, the hint and the dirty bits of pages it
// holds in the first tier. The daemon copies through its own mapping of
// the segment, which clients cannot truncate under it: a segment handed
// out is sealed against shrinking (SealShrink), and a fault while copying
// falls back to pread/pwrite instead of killing the daemon (bufferpool/tier).
//
// The first-tier segment of a bucket with a table always covers every
// resident page whole (coverLocked), so a client copying inside a resident
// page never runs past the end of the memfd (SIGBUS). A dropped bucket
// leaves seq odd and the bitmaps empty for good.
const (
	ptMagic    = abi.PTMagic
	ptVersion  = abi.PTVersion
	ptHeader   = abi.PTHeader
	ptMaxPages = abi.PTMaxPages // pages past it are never hits
	ptBitmap   = abi.PTBitmap
	ptSize     = abi.PTSize

	ptOffMagic    = abi.PTOffMagic
	ptOffVersion  = abi.PTOffVersion
	ptOffSeq      = abi.PTOffSeq
	ptOffSize     = abi.PTOffSize
	ptOffPageSize = abi.PTOffPageSize
	ptOffNbits    = abi.PTOffNbits
	ptOffFlags    = abi.PTOffFlags
	ptOffWriters  = abi.PTOffWriters
	ptOffHint     = abi.PTOffHint
	// ptOffMappers is the shims' count of their shared maps of the file
	// (adapters/posix/mmap.c): not 0 sends every shim to the kernel path.
	// The daemon never reads it; it resets it with the writer count.
	ptOffMappers = abi.PTOffMappers
	ptOffLease   = abi.PTOffLease
	ptOffCover   = abi.PTOffCover
	// ptOffNewFrom: no page at or past it holds data the table does not
	// show as resident, so a shim may create a non-resident page there
	// even below the size (a hole, as a shared file's ranks leave them:
	// fast.c, room). Raised by the daemon only (noteDataEnd); never
	// lowered while the table lives; math.MaxInt64 until the owner first
	// publishes its size.
	ptOffNewFrom = abi.PTOffNewFrom
	// ptOffMtime: the mtime (ns) of the last shim write, an atomic max
	// (the daemon takes it as the mtime of what it harvests: ShimMtime);
	// ptOffAttrGen: raised by the daemon at every other change of the
	// file's stat (AttrChanged). Shims serve fstat from their last kernel
	// answer while the generation stays, with size and mtime from here.
	ptOffMtime    = abi.PTOffMtime
	ptOffAttrGen  = abi.PTOffAttrGen
	ptOffResident = abi.PTOffResident
	ptOffDirty    = abi.PTOffDirty

	ptWritable = abi.PTFlagWritable
	ptPoisoned = abi.PTFlagPoisoned
)

// ptWaitBound is how long a write lock waits for shim writers to leave
// before it poisons the file for shim writes. A legitimate writer is
// inside for one memcpy of at most a page.
var ptWaitBound = 100 * time.Millisecond

// seqMutex is the bucket lock: a RWMutex whose write side keeps the page
// table's seq odd while held, waits for shim writers, and harvests their
// dirty bits.
type seqMutex struct {
	sync.RWMutex
	pt atomic.Pointer[pageTable]
	// harvest runs under the write lock once writers are out (set with pt).
	harvest func()
}

func (m *seqMutex) bump() *pageTable {
	pt := m.pt.Load()
	if pt != nil {
		atomic.AddUint64(pt.word(ptOffSeq), 1)
	}
	return pt
}

func (m *seqMutex) Lock() {
	m.RWMutex.Lock()
	if pt := m.bump(); pt != nil {
		pt.waitWriters()
		m.harvest()
	}
}

// TryLock fails, without waiting, while shim writers are inside a page.
func (m *seqMutex) TryLock() bool {
	if !m.RWMutex.TryLock() {
		return false
	}
	if pt := m.bump(); pt != nil {
		if !pt.writersOut() {
			m.bump()
			m.RWMutex.Unlock()
			return false
		}
		m.harvest()
	}
	return true
}

func (m *seqMutex) Unlock() {
	m.bump()
	m.RWMutex.Unlock()
}

// LockMeta takes the write side of the lock without the page table's
// exclusion of shims: seq stays even, so shim readers and writers go on
// inside pages meanwhile, and the daemon never waits for them. Then it
// harvests (concurrently with them: see harvestLocked). For changes of
// the bucket's metadata only (dirty bits, versions, adopting a page a shim
// created, the lease): never a page's bytes, its placement or a resident
// bit a shim may rely on. Pair with UnlockMeta.
func (m *seqMutex) LockMeta() {
	m.RWMutex.Lock()
	if m.pt.Load() != nil {
		m.harvest()
	}
}

// UnlockMeta releases LockMeta.
func (m *seqMutex) UnlockMeta() { m.RWMutex.Unlock() }

// pageTable is the daemon's handle on the shared table.
type pageTable struct {
	name  string // bucket name, for the log
	fd    int
	mem   []byte
	bits  []uint64 // resident
	dirty []uint64 // shim-written since the last harvest
	// cover is the segment size every resident page fits in (monotonic).
	cover int64
}

func (pt *pageTable) word(off int) *uint64  { return (*uint64)(unsafe.Pointer(&pt.mem[off])) }
func (pt *pageTable) word64(off int) *int64 { return (*int64)(unsafe.Pointer(&pt.mem[off])) }
func (pt *pageTable) flags() *uint32        { return (*uint32)(unsafe.Pointer(&pt.mem[ptOffFlags])) }
func (pt *pageTable) writers() *int64       { return (*int64)(unsafe.Pointer(&pt.mem[ptOffWriters])) }
func (pt *pageTable) size() *int64          { return (*int64)(unsafe.Pointer(&pt.mem[ptOffSize])) }

// writersOut reports whether no shim writer is inside a page (seq is odd,
// so none can enter). A poisoned table is never waited for.
func (pt *pageTable) writersOut() bool {
	w := atomic.LoadInt64(pt.writers())
	poisoned := atomic.LoadUint32(pt.flags())&ptPoisoned != 0
	if w == 0 {
		if poisoned {
			atomic.AndUint32(pt.flags(), ^uint32(ptPoisoned))
		}
		return true
	}
	return poisoned
}

// waitWriters waits (spin, then yield, then sleep) until the shim writers
// are out, at most ptWaitBound; past it the table is poisoned.
func (pt *pageTable) waitWriters() {
	if pt.writersOut() {
		return
	}
	deadline := time.Now().Add(ptWaitBound)
	for i := 0; ; i++ {
		switch {
		case i < 200:
			// a writer is inside one memcpy: microseconds
		case i < 1000:
			runtime.Gosched()
		default:
			time.Sleep(50 * time.Microsecond)
		}
		if pt.writersOut() {
			return
		}
		if i%64 == 63 && time.Now().After(deadline) {
			break
		}
	}
	atomic.OrUint32(pt.flags(), ptPoisoned)
	log.Printf("bufferpool: bucket %s: a shim writer stayed inside a page for over %v (writers=%d); "+
		"shim writes to this file go to the kernel path until it leaves",
		pt.name, ptWaitBound, atomic.LoadInt64(pt.writers()))
}

// setLocked records whether page i is resident in the first tier (a page
// leaving it drops its shared dirty bit too: it was harvested).
func (pt *pageTable) setLocked(i int64, resident bool) {
	if i < 0 || i >= ptMaxPages {
		return
	}
	w, bit := i/64, uint64(1)<<(uint(i)%64)
	if resident {
		atomic.OrUint64(&pt.bits[w], bit)
	} else {
		// Its bytes live on elsewhere (a lower tier, the backing file) or
		// were dropped: either way no shim may take it for a hole.
		pt.noteDataEnd((i + 1) * pt.pageSize())
		atomic.AndUint64(&pt.bits[w], ^bit)
		atomic.AndUint64(&pt.dirty[w], ^bit)
	}
}

func (pt *pageTable) pageSize() int64 { return int64(atomic.LoadUint64(pt.word(ptOffPageSize))) }

// noteDataEnd raises the table's new-from word to end: the daemon holds
// data below it that the table may not show (see ptOffNewFrom). Before the
// owner's first size it stays unset (no holes for shims).
func (pt *pageTable) noteDataEnd(end int64) {
	p := pt.word64(ptOffNewFrom)
	if atomic.LoadInt64(p) != math.MaxInt64 {
		maxInt64(p, end)
	}
}

// publishDataEnd sets the word to the owner's size the first time the
// owner publishes one: every byte the table does not show then lies below
// it (the backing file's, a lower tier's). Later sizes do not raise it:
// the owner's size grows by writes whose pages the table shows (shims',
// and the FUSE door's, which land in the first tier or raise the word
// themselves: enterTierLocked), by truncations and fallocates up (zeros),
// and by the shims' own extensions, which leave holes. Raising it to them
// sent a rank of a shared file to the kernel path for its whole block
// when it opened after the other rank had written past it (the grant
// publishes the size). The daemon raises it where data appears beside
// the table: a page leaving the first tier (setLocked), a page placed
// below it, a backing file changed behind the pool (NoteDataEnd).
func (pt *pageTable) publishDataEnd(size int64) {
	atomic.CompareAndSwapInt64(pt.word64(ptOffNewFrom), math.MaxInt64, size)
}

// ptSetLocked records a page entering or leaving the first tier. A page
// entering it is first covered by the segment (see coverLocked); if that
// fails it is simply not advertised (the shim misses).
func (b *Bucket) ptSetLocked(i int64, resident bool) {
	pt := b.pt
	if pt == nil {
		return
	}
	if resident && b.coverLocked(pt, (i+1)*b.pageSize) != nil {
		pt.noteDataEnd((i + 1) * b.pageSize) // in the pool, not shown: no hole for shims
		return
	}
	pt.setLocked(i, resident)
}

// coverLocked grows the first-tier segment to at least end bytes (sparse).
func (b *Bucket) coverLocked(pt *pageTable, end int64) error {
	if end <= pt.cover {
		return nil
	}
	s := b.segs[0]
	if s == nil {
		return fmt.Errorf("cover: bucket %s has no first-tier segment: %w", b.Name(), ErrInvalid)
	}
	if err := s.seg.Grow(end); err != nil {
		return err
	}
	pt.cover = end
	atomic.StoreUint64(pt.word(ptOffCover), uint64(end))
	return nil
}

// harvestLocked turns the shim's dirty bits into pool state. It runs
// under the write lock, exclusive (Lock: every shim writer out) or not
// (LockMeta: shim writers inside pages meanwhile), and takes the bits
// the same way in both: each word of the dirty bitmap is swapped for 0
// (snapshot and clear), and each bit taken marks its first-tier page
// dirty with a new version, or adopts the page a shim created
// (adoptLocked). A shim sets a page's dirty bit after its copy into the
// page (fast.c, place), so a bit taken here stands for a copy that is
// complete; a copy still under way sets the bit again when it ends, and
// the next harvest takes it (the write-back of a torn image it may make
// meanwhile is followed by a whole one). A write that returned to its
// caller has set its bit, so every harvest after it (fsync's) sees it.
func (b *Bucket) harvestLocked() {
	pt := b.pt
	if pt == nil {
		return
	}
	if atomic.SwapUint64(pt.word(ptOffHint), 0) == 0 {
		return
	}
	now := time.Now().UnixNano()
	n := 0
	for w := range pt.dirty {
		if atomic.LoadUint64(&pt.dirty[w]) == 0 {
			continue
		}
		for d := atomic.SwapUint64(&pt.dirty[w], 0); d != 0; d &= d - 1 {
			i := int64(w)*64 + int64(bits.TrailingZeros64(d))
			if b.harvestPageLocked(pt, i, now) {
				n++
			}
		}
	}
	if n > 0 {
		b.harvested.Add(int64(n))
		if fn := b.onHarvest.Load(); fn != nil {
			(*fn)(n)
		}
	}
}

// harvestPageLocked folds one dirty bit taken from the table: a
// first-tier page becomes dirty, a page with no blob is adopted, a bit of
// a page below the first tier is stale (the page left it harvested).
func (b *Bucket) harvestPageLocked(pt *pageTable, i int64, now int64) bool {
	bl := b.pages[i]
	switch {
	case bl == nil:
		return b.adoptLocked(pt, i, now)
	case bl.tier == 0:
		b.wroteLocked(bl, now)
		return true
	}
	return false
}

// shimDirtyHint reports whether shim writes may await a harvest.
func (b *Bucket) shimDirtyHint() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	pt := b.pt
	return pt != nil && atomic.LoadUint64(pt.word(ptOffHint)) != 0
}

// HarvestShimWrites folds the shim's dirty bits into the pool now (see
// harvestLocked) and returns how many pages this and every harvest since
// the last call found dirty. Cheap without a page table or pending bits.
func (b *Bucket) HarvestShimWrites() int {
	if b.shimDirtyHint() {
		b.mu.LockMeta() // harvests
		b.mu.UnlockMeta()
	}
	return int(b.harvested.Swap(0))
}

// HarvestShim folds the shim's dirty bits and new pages into the pool now,
// leaving the count for HarvestShimWrites.
func (b *Bucket) HarvestShim() {
	if b.shimDirtyHint() {
		b.mu.LockMeta() // harvests
		b.mu.UnlockMeta()
	}
}

// OnShimHarvest sets fn, called under the bucket's write lock with the
// number of pages a harvest found dirty (fn must not call into the
// bucket; a leaf lock is fine).
func (b *Bucket) OnShimHarvest(fn func(pages int)) { b.onHarvest.Store(&fn) }

// PageTable returns the fds of the bucket's shared page table and of its
// first-tier segment, creating the table on first use; writable records
// that a read-write map of them is being handed out. Both fds stay owned
// by the bucket; a door hands clients fds it reopens with the access mode
// it grants. Page buckets only.
func (b *Bucket) PageTable(writable bool) (tableFd, dataFd int, err error) {
	if b.pageSize <= 0 {
		return -1, -1, fmt.Errorf("page table of bucket %s: not a page bucket: %w", b.Name(), ErrInvalid)
	}
	// A table already handed out: the grant moves no page, so the shims
	// of the file go on writing meanwhile (another rank's first call, on
	// a shared file, came in the middle of its peers' bursts).
	b.mu.LockMeta()
	if s := b.segs[0]; b.pt != nil && s != nil && s.exposed && s.passthrough == 0 && b.checkLocked() == nil {
		if writable {
			atomic.OrUint32(b.pt.flags(), ptWritable)
		}
		tfd, dfd := b.pt.fd, s.seg.Fd()
		b.mu.UnlockMeta()
		return tfd, dfd, nil
	}
	b.mu.UnlockMeta()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return -1, -1, err
	}
	s, err := b.segLocked(0)
	if err != nil {
		return -1, -1, err
	}
	if s.passthrough > 0 {
		// A shim's map seals the segment against the shrink a truncate
		// of the passed-through file needs (passthrough.go).
		return -1, -1, fmt.Errorf("page table of bucket %s: passed through to the kernel: %w", b.Name(), ErrBusy)
	}
	s.exposed = true
	// Clients map the segment: nobody may shrink it under their maps (a
	// page past the end faults SIGBUS in every process that maps it).
	if _, err := s.seg.SealShrink(); err != nil {
		return -1, -1, err
	}
	if b.pt == nil {
		if b.pt, err = b.newPageTableLocked(); err != nil {
			return -1, -1, err
		}
	}
	if writable {
		atomic.OrUint32(b.pt.flags(), ptWritable)
	}
	return b.pt.fd, s.seg.Fd(), nil
}

// ResetShimWriters is for the owner once no read-write map of the file is
// held by a live handle: a writer count left by a client that died inside
// a write is reset and the poison lifted; the writable flag and the shims'
// count of shared maps are cleared.
func (b *Bucket) ResetShimWriters() {
	b.mu.Lock()
	defer b.mu.Unlock()
	pt := b.pt
	if pt == nil {
		return
	}
	if atomic.LoadUint32(pt.flags())&ptPoisoned != 0 {
		atomic.StoreInt64(pt.writers(), 0)
	}
	atomic.StoreUint64(pt.word(ptOffMappers), 0) // maps of clients gone: no one can store through them
	b.returnLeaseLocked()
	atomic.AndUint32(pt.flags(), ^uint32(ptPoisoned|ptWritable))
}

func (b *Bucket) newPageTableLocked() (*pageTable, error) {
	fd, err := unix.MemfdCreate("iowarp-pagetable", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("page table: %w", err)
	}
	fail := func(err error) (*pageTable, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("page table: %w", err)
	}
	if err := unix.Ftruncate(fd, ptSize); err != nil {
		return fail(err)
	}
	// A client holding a read-write fd must not shrink the table under
	// the daemon's mapping (SIGBUS in the daemon), nor reopen a
	// read-only one read-write through /proc (mode 0600).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail(err)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail(err)
	}
	if s := b.segs[0]; s != nil {
		unix.Fchmod(s.seg.Fd(), 0o600)
	}
	mem, err := unix.Mmap(fd, 0, ptSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	pt := &pageTable{name: b.Name(), fd: fd, mem: mem,
		bits:  unsafe.Slice((*uint64)(unsafe.Pointer(&mem[ptOffResident])), ptMaxPages/64),
		dirty: unsafe.Slice((*uint64)(unsafe.Pointer(&mem[ptOffDirty])), ptMaxPages/64)}
	*(*uint32)(unsafe.Pointer(&mem[ptOffMagic])) = ptMagic
	*(*uint32)(unsafe.Pointer(&mem[ptOffVersion])) = ptVersion
	*pt.word(ptOffPageSize) = uint64(b.pageSize)
	*pt.word(ptOffNbits) = ptMaxPages
	*pt.word(ptOffSeq) = 1 // odd: we hold the lock; Unlock makes it even
	*pt.word64(ptOffNewFrom) = math.MaxInt64
	*pt.word(ptOffCover) = uint64(s0size(b))
	pt.cover = s0size(b)
	for i, bl := range b.pages {
		if bl.tier == 0 && i < ptMaxPages && b.coverLocked(pt, (i+1)*b.pageSize) == nil {
			pt.setLocked(i, true)
		}
	}
	b.mu.harvest = b.harvestLocked
	b.mu.pt.Store(pt)
	return pt, nil
}

// SetSharedSize publishes the file's size in the page table (if any),
// raising it only: shims raise it too (extending writes, lease.go), and a
// size they published and the owner has not folded in yet must not be
// lowered; a truncation lowers it under the write lock
// (shrinkSharedSizeLocked). It is also the size the journal logs with the
// file's pages.
func (b *Bucket) SetSharedSize(size int64) {
	b.jsize.Store(size)
	b.mu.RLock()
	if pt := b.pt; pt != nil {
		pt.publishDataEnd(size)
		maxInt64(pt.size(), size)
	}
	b.jsizeChangedLocked()
	b.mu.RUnlock()
}

// NoteDataEnd tells the page table that the file holds data below end
// that the pool does not (the backing file changed behind it): no shim
// may create a page there as a hole (ptOffNewFrom).
func (b *Bucket) NoteDataEnd(end int64) {
	b.mu.RLock()
	if pt := b.pt; pt != nil {
		pt.noteDataEnd(end)
	}
	b.mu.RUnlock()
}

// ShimMtime is the mtime (ns) shims stamped in the page table at their
// last write (an atomic max), 0 when none did or without a table.
// Lock-free: the harvest's callback reads it under the write lock.
func (b *Bucket) ShimMtime() int64 {
	pt := b.ptPin()
	defer b.ptReaders.Add(-1)
	if pt != nil {
		return atomic.LoadInt64(pt.word64(ptOffMtime))
	}
	return 0
}

// ptPin returns the page table (nil without one) with its mapping pinned
// until b.ptReaders.Add(-1), without the bucket's lock (its holder may be
// the caller: a harvest's callback).
func (b *Bucket) ptPin() *pageTable {
	b.ptReaders.Add(1)
	return b.mu.pt.Load()
}

// AttrChanged raises the page table's attribute generation: what stat
// answers for the file changed otherwise than by a shim's write (its mode,
// owner, links or times, the daemon's own mtime, the backing file), so
// every shim's cached fstat of the file is stale (adapters/posix/fast.c,
// iow_fast_fstat). Lock-free; a no-op without a table.
func (b *Bucket) AttrChanged() {
	pt := b.ptPin()
	defer b.ptReaders.Add(-1)
	if pt != nil {
		atomic.AddUint64(pt.word(ptOffAttrGen), 1)
	}
}

// SharedSize is the size published in the page table: the owner's, or
// larger where shims extended the file since the owner last looked; -1
// without a table.
func (b *Bucket) SharedSize() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if pt := b.pt; pt != nil {
		return atomic.LoadInt64(pt.size())
	}
	return -1
}

// ShimPlaced reports whether page i is resident in the shared table: in
// the pool, or created by a shim and not harvested yet (its copy may be
// under way; the next exclusive lock waits for it and adopts the page).
func (b *Bucket) ShimPlaced(i int64) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.pages[i] != nil {
		return true
	}
	pt := b.pt
	return pt != nil && i >= 0 && i < ptMaxPages && atomic.LoadUint64(&pt.bits[i/64])&(1<<(uint(i)%64)) != 0
}

// ClaimSharedSize reserves [from, to) at the end of the file for an
// append: it raises the shared size to to if the size is at most from
// (the owner's own writes may not be published yet), and fails if it is
// past from (a shim appended meanwhile: the owner folds the new size in
// and tries again at it). Shims' appends reserve theirs with the same
// compare-and-swap (adapters/posix/fast.c), so no two overlap. True
// without a table.
func (b *Bucket) ClaimSharedSize(from, to int64) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	pt := b.pt
	if pt == nil {
		return true
	}
	for {
		cur := atomic.LoadInt64(pt.size())
		if cur > from {
			return false
		}
		if atomic.CompareAndSwapInt64(pt.size(), cur, to) {
			return true
		}
	}
}

// maxInt64 raises *p to v (atomic max).
func maxInt64(p *int64, v int64) {
	for {
		cur := atomic.LoadInt64(p)
		if v <= cur || atomic.CompareAndSwapInt64(p, cur, v) {
			return
		}
	}
}

// shrinkSharedSizeLocked lowers the published size to size at once (a
// truncation, under the write lock), so that no shim writes past the new
// end between the truncation and the owner's SetSharedSize.
func (b *Bucket) shrinkSharedSizeLocked(size int64) {
	if pt := b.pt; pt != nil {
		p := pt.size()
		if atomic.LoadInt64(p) > size {
			atomic.StoreInt64(p, size)
		}
	}
}

// dropPageTableLocked empties the table for good (seq stays odd) and
// releases the daemon's mapping; clients keep theirs.
func (b *Bucket) dropPageTableLocked() {
	pt := b.pt
	if pt == nil {
		return
	}
	for i := range pt.bits {
		atomic.StoreUint64(&pt.bits[i], 0)
	}
	b.returnLeaseLocked()
	b.mu.pt.Store(nil) // seq is odd (we hold the lock) and stays so: Unlock no longer bumps it
	for b.ptReaders.Load() != 0 {
		runtime.Gosched() // a lock-free reader of one word (ptPin)
	}
	unix.Munmap(pt.mem)
	unix.Close(pt.fd)
	b.pt = nil
}

// ptrAt is the address of mem[off] (tests read a reader's mapping).
func ptrAt(mem []byte, off int) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }

// s0size is the size of the bucket's first-tier segment (0 without one).
func s0size(b *Bucket) int64 {
	if s := b.segs[0]; s != nil {
		return s.seg.Size()
	}
	return 0
}
