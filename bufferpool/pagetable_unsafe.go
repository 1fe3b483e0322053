package bufferpool

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The page table of a page bucket, in shared memory, for readers outside
// the daemon (the LD_PRELOAD shim maps it read-only, with the first-tier
// segment). Layout (little endian; shared with adapters/posix/fast.c):
//
//	0   u32 magic "IOWP", u32 version
//	8   u64 seq: odd while the bucket is write-locked (a seqlock)
//	16  i64 size: the file's size, set by the owner (bufferpool/files)
//	24  u64 page size
//	32  u64 nbits: pages the bitmap covers
//	64  bitmap: bit i set = page i is resident in the first tier, at
//	    i*PageSize of its segment
//
// Every change of a page's bytes or placement happens under the bucket's
// write lock, and the lock makes seq odd for as long as it is held (see
// seqMutex). A reader loads seq (even), checks the bit, copies, and loads
// seq again: equal means the copy is a consistent image of a resident page.
// The organizer and eviction move or punch pages only under that lock, so
// they never take a page out from under a reader that succeeds. A dropped
// bucket leaves seq odd and the bitmap empty for good.
const (
	ptMagic    = 0x50574f49 // "IOWP"
	ptVersion  = 1
	ptHeader   = 64
	ptMaxPages = 1 << 20 // pages past it are never hits
	ptSize     = ptHeader + ptMaxPages/8
)

// seqMutex is the bucket lock: a RWMutex whose write side keeps the page
// table's seq odd while held.
type seqMutex struct {
	sync.RWMutex
	seq atomic.Pointer[uint64]
}

func (m *seqMutex) bump() {
	if p := m.seq.Load(); p != nil {
		atomic.AddUint64(p, 1)
	}
}

func (m *seqMutex) Lock() {
	m.RWMutex.Lock()
	m.bump()
}

func (m *seqMutex) TryLock() bool {
	if !m.RWMutex.TryLock() {
		return false
	}
	m.bump()
	return true
}

func (m *seqMutex) Unlock() {
	m.bump()
	m.RWMutex.Unlock()
}

// pageTable is the daemon's handle on the shared table.
type pageTable struct {
	fd   int
	mem  []byte
	bits []uint64
}

func (pt *pageTable) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&pt.mem[off])) }

// setLocked records whether page i is resident in the first tier.
func (pt *pageTable) setLocked(i int64, resident bool) {
	if pt == nil || i < 0 || i >= ptMaxPages {
		return
	}
	w, bit := &pt.bits[i/64], uint64(1)<<(uint(i)%64)
	if resident {
		atomic.OrUint64(w, bit)
	} else {
		atomic.AndUint64(w, ^bit)
	}
}

// PageTable returns the fds of the bucket's shared page table and of its
// first-tier segment, creating the table on first use. Both stay owned by
// the bucket. Page buckets only.
func (b *Bucket) PageTable() (tableFd, dataFd int, err error) {
	if b.pageSize <= 0 {
		return -1, -1, fmt.Errorf("page table of bucket %s: not a page bucket: %w", b.Name(), ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return -1, -1, err
	}
	s, err := b.segLocked(0)
	if err != nil {
		return -1, -1, err
	}
	s.exposed = true
	if b.pt == nil {
		if b.pt, err = b.newPageTableLocked(); err != nil {
			return -1, -1, err
		}
	}
	return b.pt.fd, s.seg.Fd(), nil
}

func (b *Bucket) newPageTableLocked() (*pageTable, error) {
	fd, err := unix.MemfdCreate("iowarp-pagetable", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("page table: %w", err)
	}
	if err := unix.Ftruncate(fd, ptSize); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("page table: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, ptSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("page table: %w", err)
	}
	pt := &pageTable{fd: fd, mem: mem,
		bits: unsafe.Slice((*uint64)(unsafe.Pointer(&mem[ptHeader])), ptMaxPages/64)}
	*(*uint32)(unsafe.Pointer(&mem[0])) = ptMagic
	*(*uint32)(unsafe.Pointer(&mem[4])) = ptVersion
	*pt.word(24) = uint64(b.pageSize)
	*pt.word(32) = ptMaxPages
	*pt.word(8) = 1 // odd: we hold the lock; Unlock makes it even
	for i, bl := range b.pages {
		if bl.tier == 0 {
			pt.setLocked(i, true)
		}
	}
	b.mu.seq.Store(pt.word(8))
	return pt, nil
}

// SetSharedSize publishes the file's size in the page table (if any).
func (b *Bucket) SetSharedSize(size int64) {
	b.mu.RLock()
	if pt := b.pt; pt != nil {
		atomic.StoreInt64((*int64)(unsafe.Pointer(&pt.mem[16])), size)
	}
	b.mu.RUnlock()
}

// dropPageTableLocked empties the table for good (seq stays odd) and
// releases the daemon's mapping; readers keep theirs.
func (b *Bucket) dropPageTableLocked() {
	pt := b.pt
	if pt == nil {
		return
	}
	for i := range pt.bits {
		atomic.StoreUint64(&pt.bits[i], 0)
	}
	b.mu.seq.Store(nil) // seq is odd (we hold the lock) and stays so: Unlock no longer bumps it
	unix.Munmap(pt.mem)
	unix.Close(pt.fd)
	b.pt = nil
}

// ptrAt is the address of mem[off] (tests read a reader's mapping).
func ptrAt(mem []byte, off int) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }
