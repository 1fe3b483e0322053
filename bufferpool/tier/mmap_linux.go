package tier

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The RAM tier's copy path: a memfd segment keeps one MAP_SHARED mapping
// of its file and copies through it (a memmove) instead of pread/pwrite,
// about 3x cheaper for a 1 MiB page — but only for pages the daemon's page
// tables already map. The first touch of a page through the mapping takes
// a page fault (4 KiB at a time for writes), several times the cost of a
// pwrite that allocates the same pages in the kernel; on these VMs even a
// page mapped ahead with MADV_POPULATE_READ costs about 16 µs per 4 KiB
// at its first access (the hypervisor's page tables), so that a 1 MiB
// page staged in and read once through the mapping came back at about
// 250 MB/s, against several GB/s with pread. A page is therefore mapped
// at its second touch only, when it has shown it is hot. The mapping
// records, per 4 KiB, what the daemon knows of each page:
//
//	resident: the segment wrote it (pwrite) since it was last punched
//	seen:     it was also read once (with pread) since
//	mapped:   it was copied through the mapping since (so it is mapped)
//
// Copies through the mapping go only where every page is resident and
// touched once already: mapped ones at memmove speed, the others after
// MADV_POPULATE_READ maps them (a write to resident pages, a read of seen
// ones). Everything else — a first read of resident pages, holes, pages
// written by someone else, ranges past the mapping — takes pread/pwrite,
// which then marks the pages resident (and seen, for a read). The bits
// are a performance hint only: a copy through the mapping is correct for
// any byte below the file size, whatever they say.
//
// Safety: the mapping is only ever touched below Segment.size, which is
// never above the file's size: the segment grows the file before its
// size and shrinks the mapping before the file. A client that could
// shrink the memfd under the daemon would turn the copy into SIGBUS;
// segments handed to clients are sealed against shrinking (SealShrink),
// and as a last line each copy runs with debug.SetPanicOnFault: a fault
// marks the mapping broken (pread/pwrite from then on) instead of killing
// the daemon.
//
// Growth remaps (mremap, possibly moving) under the owner's exclusive
// access, doubling up to mapStep at a time, so readers never see a
// mapping change under them (they run under the bucket's read lock).

const (
	mapMin    = 1 << 20  // first mapping length
	mapStep   = 1 << 30  // the most one growth adds past the size needed
	mapMax    = 64 << 30 // per segment; bytes past it use pread/pwrite
	mapBudget = 16 << 40 // address space for all segments' mappings

	// copyChunk bounds one copy so that it stays in the cache: Go's
	// memmove uses non-temporal stores from 1 MiB on amd64, which sends
	// the destination to DRAM just before somebody reads it (see
	// client/copy.go).
	copyChunk = 512 << 10

	pageShift = 12 // the unit of the page bits (not necessarily the MMU's)
	leafShift = 9  // pages per leaf: 512, 2 MiB of segment
)

// mappedBytes is the address space taken by all mappings (see
// mapBudget): a few huge sparse segments must not starve the Go heap of
// it. mappings counts them against mapLimit: each is one VMA, and a
// daemon holding tens of thousands of segments must leave the Go
// runtime room under vm.max_map_count (its heap growth failing is
// fatal); segments past the limit use pread/pwrite.
var (
	mappedBytes atomic.Int64
	mappings    atomic.Int64
	mapLimit    = maxMapCount() / 4
)

// maxMapCount is vm.max_map_count (the kernel's default where unreadable).
func maxMapCount() int64 {
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 65530
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 65530
	}
	return n
}

var osPage = int64(os.Getpagesize())

// mapping is a memfd segment's view of its file. Its methods follow the
// Segment's concurrency rule: readAt may run concurrently with readAt,
// everything else (the *Locked methods, writeAt) needs exclusive access.
type mapping struct {
	// mem maps [0, len(mem)) of the file; only [0, Segment.size) is
	// ever touched. Never handed out of the package.
	mem []byte
	// broken is set when a copy faulted: pread/pwrite from then on.
	broken atomic.Bool
	pages  pageBits
}

// growLocked makes the mapping cover [0, size) if it can (best effort:
// where it cannot, the bytes past it take pread/pwrite).
func (m *mapping) growLocked(fd int, size int64) {
	cur := int64(len(m.mem))
	if size <= cur || cur >= mapMax || m.broken.Load() {
		return
	}
	n := max(size, mapMin, min(2*cur, cur+mapStep))
	n = min((n+osPage-1)&^(osPage-1), mapMax)
	if m.mem == nil {
		if mappings.Add(1) > mapLimit {
			mappings.Add(-1)
			return
		}
	}
	if mappedBytes.Add(n-cur) > mapBudget {
		m.undoGrow(n - cur)
		return
	}
	var mem []byte
	var err error
	if m.mem == nil {
		mem, err = unix.Mmap(fd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	} else {
		mem, err = unix.Mremap(m.mem, int(n), unix.MREMAP_MAYMOVE)
	}
	if err != nil { // e.g. out of address space: the old mapping stays
		m.undoGrow(n - cur)
		return
	}
	m.mem = mem
}

// undoGrow gives back what a failed growLocked took.
func (m *mapping) undoGrow(bytes int64) {
	mappedBytes.Add(-bytes)
	if m.mem == nil {
		mappings.Add(-1)
	}
}

// shrinkLocked unmaps everything past size (rounded up to a page) and
// forgets the pages there; called before the file shrinks.
func (m *mapping) shrinkLocked(size int64) {
	m.pages.clearFrom(size)
	cur := int64(len(m.mem))
	n := (size + osPage - 1) &^ (osPage - 1)
	if n >= cur {
		return
	}
	if n == 0 {
		m.closeLocked()
		return
	}
	mem, err := unix.Mremap(m.mem, int(n), 0) // in place: shrinking never moves
	if err != nil {
		return // keep it: nothing past size is ever touched anyway
	}
	m.mem = mem
	mappedBytes.Add(n - cur)
}

// closeLocked unmaps the file.
func (m *mapping) closeLocked() {
	if m.mem == nil {
		return
	}
	unix.Munmap(m.mem)
	mappedBytes.Add(-int64(len(m.mem)))
	mappings.Add(-1)
	m.mem = nil
}

// usable reports whether [off, end) may be copied through the mapping
// and how: 0 no; pageResident: a write after populating, a read with
// pread; pageSeen after populating; pageMapped at once. The
// caller guarantees end <= Segment.size.
func (m *mapping) usable(off, end int64) int {
	if off < 0 || end <= off || end > int64(len(m.mem)) || m.broken.Load() {
		return 0
	}
	return m.pages.state(off, end)
}

// readAt copies [off, off+len(p)) into p if the pages allow it (see
// usable) and reports whether it did. Safe concurrently with readAt.
func (m *mapping) readAt(p []byte, off int64) bool {
	end := off + int64(len(p))
	st := m.usable(off, end)
	switch st {
	case 0:
		return false
	case pageResident: // the first read: pread (see the top of the file)
		m.pages.mark(off, end, pageSeen, false)
		return false
	case pageSeen:
		m.populate(off, end)
	}
	if !m.copy(p, m.mem[off:end]) {
		return false
	}
	if st != pageMapped {
		m.pages.mark(off, end, pageMapped, false)
	}
	return true
}

// populate maps the pages of [off, end) in one call rather than a fault
// each; an old kernel without MADV_POPULATE_READ just faults.
func (m *mapping) populate(off, end int64) {
	lo := off &^ (osPage - 1)
	hi := min((end+osPage-1)&^(osPage-1), int64(len(m.mem)))
	unix.Madvise(m.mem[lo:hi], unix.MADV_POPULATE_READ)
}

// writeAt copies p to off if the pages allow it and reports whether it
// did.
func (m *mapping) writeAt(p []byte, off int64) bool {
	end := off + int64(len(p))
	st := m.usable(off, end)
	if st == 0 {
		return false
	}
	if st != pageMapped {
		m.populate(off, end) // a write fault per 4 KiB otherwise
	}
	if !m.copy(m.mem[off:end], p) {
		return false
	}
	if st != pageMapped {
		m.pages.mark(off, end, pageMapped, true)
	}
	return true
}

// wroteLocked records that [off, end) was written with pwrite.
func (m *mapping) wroteLocked(off, end int64) {
	if end <= mapMax {
		m.pages.mark(off, end, pageResident, true)
	}
}

// copy is copy(dst, src) in cache-sized pieces, one side being the
// mapping. A fault (the file was shrunk under the mapping behind the
// daemon's back) marks the mapping broken and reports false instead of
// killing the process.
func (m *mapping) copy(dst, src []byte) (ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			m.broken.Store(true)
			ok = false
		}
	}()
	for off := 0; off < len(src); off += copyChunk {
		end := min(off+copyChunk, len(src))
		copy(dst[off:end], src[off:end])
	}
	return true
}

// Page states, as usable and pageBits.state report them.
const (
	pageResident = 1
	pageSeen     = 2
	pageMapped   = 3
)

// pageBits holds two bits per 4 KiB page of a segment, in 2 MiB leaves
// created on demand (segments are sparse). Leaves are created and
// removed only under exclusive access; bits may be set concurrently.
type pageBits struct {
	leaves map[int64]*pageLeaf
}

type pageLeaf struct {
	resident, seen, mapped [1 << leafShift / 64]atomic.Uint64
}

// each calls fn for every (leaf, word, mask) covering the pages that
// overlap [off, end), nil leaves included unless create; it stops at the
// first false.
func (b *pageBits) each(off, end int64, create bool, fn func(l *pageLeaf, w int, mask uint64) bool) bool {
	p, p1 := off>>pageShift, (end+1<<pageShift-1)>>pageShift
	for p < p1 {
		key := p >> leafShift
		l := b.leaves[key]
		if l == nil && create {
			if b.leaves == nil {
				b.leaves = make(map[int64]*pageLeaf)
			}
			l = new(pageLeaf)
			b.leaves[key] = l
		}
		lo := p & (1<<leafShift - 1)
		hi := min(1<<leafShift, lo+p1-p)
		for lo < hi {
			w, bit := int(lo>>6), lo&63
			n := min(64-bit, hi-lo)
			if !fn(l, w, (^uint64(0)>>(64-n))<<bit) {
				return false
			}
			lo += n
			p += n
		}
	}
	return true
}

// state is pageMapped if every page overlapping [off, end) is mapped,
// else pageSeen if every one was seen (or mapped), else pageResident if
// every one is resident, else 0.
func (b *pageBits) state(off, end int64) int {
	st := pageMapped
	b.each(off, end, false, func(l *pageLeaf, w int, mask uint64) bool {
		if l == nil || l.resident[w].Load()&mask != mask {
			st = 0
			return false
		}
		if st == pageMapped && l.mapped[w].Load()&mask != mask {
			st = pageSeen
		}
		if st == pageSeen && (l.seen[w].Load()|l.mapped[w].Load())&mask != mask {
			st = pageResident
		}
		return true
	})
	return st
}

// mark sets the bits of the pages overlapping [off, end): resident, and
// seen or mapped as st says. Without create it skips pages without a
// leaf.
func (b *pageBits) mark(off, end int64, st int, create bool) {
	b.each(off, end, create, func(l *pageLeaf, w int, mask uint64) bool {
		if l != nil {
			l.resident[w].Or(mask)
			switch st {
			case pageSeen:
				l.seen[w].Or(mask)
			case pageMapped:
				l.mapped[w].Or(mask)
			}
		}
		return true
	})
}

// clear forgets the pages overlapping [off, end) (a punched range).
func (b *pageBits) clear(off, end int64) {
	b.each(off, end, false, func(l *pageLeaf, w int, mask uint64) bool {
		if l != nil {
			l.resident[w].And(^mask)
			l.seen[w].And(^mask)
			l.mapped[w].And(^mask)
		}
		return true
	})
}

// clearFrom forgets every page overlapping [size, ∞) (a truncation).
func (b *pageBits) clearFrom(size int64) {
	first := size >> pageShift // the page holding size, if partial
	for key := range b.leaves {
		start := key << leafShift
		switch {
		case start >= first:
			delete(b.leaves, key)
		case start+1<<leafShift > first:
			b.clear(first<<pageShift, (start+1<<leafShift)<<pageShift)
		}
	}
}
