package bufferpool

import (
	"fmt"
	"slices"
	"time"
)

// checkPage validates a page access of n bytes at off in page i.
func (b *Bucket) checkPage(op string, i, off int64, n int) error {
	if b.pageSize <= 0 {
		return fmt.Errorf("%s: bucket %s is not a page bucket: %w", op, b.Name(), ErrInvalid)
	}
	if i < 0 || i > maxOffset/b.pageSize-1 || off < 0 || off+int64(n) > b.pageSize {
		return fmt.Errorf("%s: page %d [%d,+%d) of bucket %s (page size %d): %w",
			op, i, off, n, b.Name(), b.pageSize, ErrInvalid)
	}
	return nil
}

// ReadPage copies page i from off into buf (off+len(buf) <= PageSize).
// If the page is not resident and fill is nil it returns found=false and
// copies nothing. If fill is non-nil the page is created from fill (clean)
// and then read: found reports whether it was already resident (a hit).
func (b *Bucket) ReadPage(i, off int64, buf []byte, fill Filler) (found bool, err error) {
	if err := b.checkPage("read page", i, off, len(buf)); err != nil {
		return false, err
	}
	now := time.Now().UnixNano()
	b.mu.RLock()
	if b.dead {
		err := b.checkLocked()
		b.mu.RUnlock()
		return false, err
	}
	if bl := b.pages[i]; bl != nil {
		err := b.readBlobLocked(bl, off, buf)
		bl.touch(now, true)
		b.mu.RUnlock()
		b.p.hits.Add(1)
		return true, err
	}
	b.mu.RUnlock()
	if fill == nil {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return false, err
	}
	if bl := b.pages[i]; bl != nil { // filled meanwhile
		bl.touch(now, true)
		b.p.hits.Add(1)
		return true, b.readBlobLocked(bl, off, buf)
	}
	var bp *[]byte
	page := buf
	if off != 0 || int64(len(buf)) != b.pageSize {
		bp = b.getBuf()
		defer b.putBuf(bp)
		page = *bp
	} else {
		clear(page)
	}
	if err := fill(page); err != nil {
		return false, fmt.Errorf("fill page %d of bucket %s: %w", i, b.Name(), err)
	}
	bl, err := b.newPageLocked(i, page, false, now)
	if err != nil {
		return false, err
	}
	bl.touch(now, true)
	b.p.misses.Add(1)
	if bp != nil {
		copy(buf, page[off:])
	}
	return false, nil
}

// InstallPage inserts page i, clean, with contents data (len(data) ==
// PageSize) if it is absent; a resident page is left alone (installed
// false). It is a stage-in whose bytes the caller read beforehand (the
// file layer's read-ahead): the caller must know that data is still the
// page's content.
func (b *Bucket) InstallPage(i int64, data []byte) (installed bool, err error) {
	return b.InstallPageIf(i, data, nil)
}

// InstallPageIf is InstallPage that also asks valid (when not nil), under
// the bucket's lock and only if the page is absent, whether data is still
// the page's content; false leaves the page absent (installed false). A
// caller that read data without holding anything that keeps the source
// from changing checks there that it did not change meanwhile.
func (b *Bucket) InstallPageIf(i int64, data []byte, valid func() bool) (installed bool, err error) {
	return b.installPage(i, data, valid, 0)
}

// InstallHotPageIf is InstallPageIf for a page the caller expects to be
// read again and again (the file layer's learned prefetch: it was re-read
// the last time the file was read): it goes to the fastest tier with room
// whatever the placement policy, and starts with reads as its decayed
// read count (at least PromoteReads), so that where the fastest tier had
// no room the organizer's next pass promotes it, swapping out colder
// pages (organizer.go), and eviction takes it last.
func (b *Bucket) InstallHotPageIf(i int64, data []byte, valid func() bool, reads float64) (installed bool, err error) {
	return b.installPage(i, data, valid, max(reads, b.p.promoteReads, 1))
}

// installPage is InstallPageIf; hot > 0 places the page first on the
// fastest tier with room and seeds its scores with hot.
func (b *Bucket) installPage(i int64, data []byte, valid func() bool, hot float64) (installed bool, err error) {
	if err := b.checkPage("install page", i, 0, len(data)); err != nil {
		return false, err
	}
	if int64(len(data)) != b.pageSize {
		return false, fmt.Errorf("install page %d of bucket %s: %d bytes, page size %d: %w",
			i, b.Name(), len(data), b.pageSize, ErrInvalid)
	}
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return false, err
	}
	if b.pages[i] != nil || (valid != nil && !valid()) {
		return false, nil
	}
	bl, err := b.newPlacedLocked(i, data, now, hot)
	if err != nil {
		return false, err
	}
	if hot > 0 {
		bl.score, bl.readScore = hot, hot
	}
	b.p.misses.Add(1)
	return true, nil
}

// newPlacedLocked is newPageLocked of a clean page; hot > 0 tries the
// fastest tier first, whatever the placement policy.
func (b *Bucket) newPlacedLocked(i int64, data []byte, now int64, hot float64) (*blob, error) {
	if hot <= 0 {
		return b.newPageLocked(i, data, false, now)
	}
	bl := &blob{page: i, size: b.pageSize, alloc: roundUp(b.pageSize), scoreAt: now}
	if !b.p.tiers[0].reserve(bl.alloc) {
		return b.newPageLocked(i, data, false, now)
	}
	if err := b.fillPlacedLocked(bl, 0, data); err != nil {
		return nil, err
	}
	return bl, nil
}

// newPageLocked places page i with contents data (PageSize bytes) and
// inserts it.
func (b *Bucket) newPageLocked(i int64, data []byte, dirty bool, now int64) (*blob, error) {
	bl := &blob{page: i, size: b.pageSize, alloc: roundUp(b.pageSize), dirty: dirty, scoreAt: now}
	t, err := b.p.placeLocked(b, bl.alloc)
	if err != nil {
		return nil, fmt.Errorf("page %d: %w", i, err)
	}
	if err := b.fillPlacedLocked(bl, t, data); err != nil {
		return nil, err
	}
	return bl, nil
}

// fillPlacedLocked puts bl, whose bytes are reserved on tier t, there
// with contents data (nil: none written) and inserts it.
func (b *Bucket) fillPlacedLocked(bl *blob, t int, data []byte) error {
	if err := b.attachLocked(bl, t); err != nil {
		return err
	}
	if data != nil {
		if err := b.segs[t].seg.WriteAt(data, bl.off); err != nil {
			b.detachLocked(bl)
			return fmt.Errorf("page %d of bucket %s: %w", bl.page, b.Name(), err)
		}
	}
	b.insertLocked(bl)
	return nil
}

// WritePage writes data at off in page i (off+len(data) <= PageSize) and
// marks it dirty. An absent page is created first: from fill if non-nil,
// else zeroed. Returns the page's new version.
func (b *Bucket) WritePage(i, off int64, data []byte, fill Filler) (version uint64, err error) {
	if err := b.checkPage("write page", i, off, len(data)); err != nil {
		return 0, err
	}
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return 0, err
	}
	bl := b.pages[i]
	if bl == nil {
		var page []byte
		if fill != nil {
			bp := b.getBuf()
			defer b.putBuf(bp)
			page = *bp
			if err := fill(page); err != nil {
				return 0, fmt.Errorf("fill page %d of bucket %s: %w", i, b.Name(), err)
			}
			copy(page[off:], data)
		}
		// Without a filler the new page is a hole (zeros) and only data
		// is written below.
		if bl, err = b.newPageLocked(i, page, true, now); err != nil {
			return 0, err
		}
		if page != nil {
			return b.wroteRangeLocked(bl, Range{off, off + int64(len(data))}, now), nil
		}
	}
	if err := b.plainLocked(bl, true); err != nil {
		return bl.version, fmt.Errorf("write page %d: %w", i, err)
	}
	if err := b.segs[bl.tier].seg.WriteAt(data, bl.off+off); err != nil {
		return bl.version, fmt.Errorf("write page %d of bucket %s: %w", i, b.Name(), err)
	}
	return b.wroteRangeLocked(bl, Range{off, off + int64(len(data))}, now), nil
}

// wroteLocked records a write of bl that says no range (shim writes
// found by a harvest, named blobs): the whole page is dirty.
func (b *Bucket) wroteLocked(bl *blob, now int64) uint64 {
	return b.wroteRangeLocked(bl, Range{0, b.pageSize}, now)
}

// wroteRangeLocked records a write of the bytes r of bl.
func (b *Bucket) wroteRangeLocked(bl *blob, r Range, now int64) uint64 {
	bl.version++
	b.setDirtyLocked(bl, true)
	bl.dranges.add(r.Lo, r.Hi)
	bl.touch(now, false)
	b.jtouchLocked(bl)
	return bl.version
}

// PutPage inserts a full page (len(data) == PageSize) as clean if dirty is
// false; replaces an existing page.
func (b *Bucket) PutPage(i int64, data []byte, dirty bool) error {
	if err := b.checkPage("put page", i, 0, len(data)); err != nil {
		return err
	}
	if int64(len(data)) != b.pageSize {
		return fmt.Errorf("put page %d of bucket %s: %d bytes, page size %d: %w",
			i, b.Name(), len(data), b.pageSize, ErrInvalid)
	}
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	bl := b.pages[i]
	if bl == nil {
		var err error
		if bl, err = b.newPageLocked(i, data, dirty, now); err != nil {
			return err
		}
	} else if err := b.plainLocked(bl, false); err != nil {
		return fmt.Errorf("put page %d: %w", i, err)
	} else if err := b.segs[bl.tier].seg.WriteAt(data, bl.off); err != nil {
		return fmt.Errorf("put page %d of bucket %s: %w", i, b.Name(), err)
	}
	bl.version++
	b.setDirtyLocked(bl, dirty)
	if dirty {
		bl.dranges.add(0, b.pageSize)
	}
	bl.touch(now, false)
	b.jtouchLocked(bl)
	return nil
}

// SnapshotPage copies a resident page into buf (PageSize bytes) and returns
// its version and dirty bit; found=false if absent.
func (b *Bucket) SnapshotPage(i int64, buf []byte) (version uint64, dirty, found bool, err error) {
	s, err := b.SnapshotDirty(i, buf, nil)
	return s.Version, s.Dirty, s.Found, err
}

// PageSnapshot is the state of a page when SnapshotDirty copied it.
type PageSnapshot struct {
	Version uint64
	Dirty   bool
	Found   bool // resident
	// Ranges are the bytes of a dirty page written since it was last
	// clean, sorted and disjoint: the whole page for writes that said no
	// range (shim writes, PutPage, MarkDirty). Write-back writes only
	// these, so bytes never written (a hole) stay a hole.
	Ranges []Range
}

// SnapshotDirty copies a resident page into buf (PageSize bytes) and
// returns its state, the dirty ranges appended to rs (reused, like
// append). Ranges and bytes are taken together under the bucket lock.
func (b *Bucket) SnapshotDirty(i int64, buf []byte, rs []Range) (PageSnapshot, error) {
	s := PageSnapshot{Ranges: rs}
	if err := b.checkPage("snapshot page", i, 0, 0); err != nil {
		return s, err
	}
	if int64(len(buf)) < b.pageSize {
		return s, fmt.Errorf("snapshot page %d of bucket %s: buffer %d < page size %d: %w",
			i, b.Name(), len(buf), b.pageSize, ErrInvalid)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkLocked(); err != nil {
		return s, err
	}
	bl := b.pages[i]
	if bl == nil {
		return s, nil
	}
	s.Version, s.Dirty, s.Found = bl.version, bl.dirty, true
	if bl.dirty {
		s.Ranges = bl.dranges.appendTo(s.Ranges, b.pageSize)
	}
	return s, b.readBlobLocked(bl, 0, buf[:b.pageSize])
}

// MarkClean clears the dirty bit of page i if its version is still
// version (a write since the snapshot keeps it dirty). Reports whether it
// was cleared.
func (b *Bucket) MarkClean(i int64, version uint64) bool {
	b.mu.LockMeta() // a dirty bit: shim writers go on (a shim write since sets its own bit again)
	defer b.mu.UnlockMeta()
	bl := b.pages[i]
	if bl == nil || bl.version != version {
		return false
	}
	b.setDirtyLocked(bl, false)
	return true
}

// MarkDirty sets the dirty bit again (a failed write-back).
func (b *Bucket) MarkDirty(i int64) {
	b.mu.LockMeta()
	defer b.mu.UnlockMeta()
	if bl := b.pages[i]; bl != nil {
		// The journal records dirty pages as raw images: a compressed
		// one is made plain (it stays compressed, unjournaled, only if
		// its tier has no room to decompress it).
		b.plainLocked(bl, true)
		b.setDirtyLocked(bl, true)
		bl.dranges.add(0, b.pageSize)
	}
}

// HasDirty reports whether any page is dirty (shim writes harvested
// first, as DirtyPages does), without listing them.
func (b *Bucket) HasDirty() bool {
	if b.shimDirtyHint() {
		b.mu.LockMeta()
		b.mu.UnlockMeta()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.ndirty > 0
}

// DirtyPages lists indices of dirty pages in ascending order.
func (b *Bucket) DirtyPages() []int64 {
	if b.shimDirtyHint() {
		b.mu.LockMeta() // harvests shim writes first
		b.mu.UnlockMeta()
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.ndirty == 0 {
		return nil
	}
	out := make([]int64, 0, b.ndirty)
	for i, bl := range b.pages {
		if bl.dirty {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// HasPage reports whether page i is resident.
func (b *Bucket) HasPage(i int64) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.pages[i] != nil
}

// DropCleanPage drops page i if it is resident and clean (a caller that
// holds a good copy of it, repairing a page ErrCorrupt reported); it
// reports whether it did.
func (b *Bucket) DropCleanPage(i int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bl := b.pages[i]
	if b.dead || bl == nil || bl.dirty || bl.busy {
		return false
	}
	b.removeLocked(bl)
	return true
}

// DeletePage drops page i (dirty or not) and frees its space.
func (b *Bucket) DeletePage(i int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bl := b.pages[i]; bl != nil {
		b.removeLocked(bl)
	}
}

// EvictClean drops every clean page of the bucket that no one is using
// (a page being read or written, or a dirty one, stays) and returns the
// bytes freed: their data is on the backing store, and the next read
// stages them in again. It is `iowarp evict`.
func (b *Bucket) EvictClean() (freed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bl := range b.pages {
		if t := bl.tier; t >= 0 {
			freed += b.evictOneLocked(bl, t)
		}
	}
	return freed
}

// pageCount is ceil(size/PageSize).
func (b *Bucket) pageCount(size int64) int64 {
	return (size + b.pageSize - 1) / b.pageSize
}

// Truncate drops every page at index >= n (ceil(size/PageSize)) and zeroes
// page bytes at and past size inside the last partial page.
func (b *Bucket) Truncate(size int64) error {
	if err := b.checkPage("truncate", 0, 0, 0); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("truncate bucket %s to %d: %w", b.Name(), size, ErrInvalid)
	}
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	b.shrinkSharedSizeLocked(size)
	n := b.pageCount(size)
	var drop []*blob
	for i, bl := range b.pages {
		if i >= n {
			drop = append(drop, bl)
		}
	}
	var err error
	for _, bl := range drop {
		if e := b.removeLocked(bl); e != nil && err == nil {
			err = e
		}
	}
	if tail := size % b.pageSize; tail != 0 {
		if bl := b.pages[n-1]; bl != nil {
			if e := b.zeroLocked(bl, tail, b.pageSize-tail, now); e != nil && err == nil {
				err = e
			}
		}
	}
	if err == nil {
		err = b.passthroughSizeLocked(size)
	}
	if err == nil {
		err = b.journalTruncateLocked(size)
	}
	if err != nil {
		return fmt.Errorf("truncate bucket %s to %d: %w", b.Name(), size, err)
	}
	return nil
}

// zeroLocked zeroes n bytes at off of page bl and marks it dirty.
func (b *Bucket) zeroLocked(bl *blob, off, n int64, now int64) error {
	if err := b.plainLocked(bl, true); err != nil {
		return err
	}
	b.wroteRangeLocked(bl, Range{off, off + n}, now)
	return b.segs[bl.tier].seg.Punch(bl.off+off, n)
}

// ZeroRange zeroes [off, off+n) of the resident pages covering it
// (fallocate PUNCH/ZERO semantics for the file layer), marking them dirty.
func (b *Bucket) ZeroRange(off, n int64) error { return b.zeroRange(off, n, b.zeroLocked) }

// PunchRange zeroes [off, off+n) of the resident pages covering it, for a
// caller that punched the same range in the copy it writes the pages back
// to (the file layer, its backing file): the zeroed bytes leave the pages'
// dirty ranges, so a write-back does not write zeros over that hole, and
// a clean page stays clean. The pages get a new version all the same.
func (b *Bucket) PunchRange(off, n int64) error { return b.zeroRange(off, n, b.punchLocked) }

// punchLocked zeroes n bytes at off of page bl, taking them out of its
// dirty ranges: a page left with none is clean (every byte of it is
// what the caller's copy holds).
func (b *Bucket) punchLocked(bl *blob, off, n int64, now int64) error {
	if err := b.plainLocked(bl, true); err != nil {
		return err
	}
	bl.version++
	if bl.dirty {
		if bl.dranges.n == 0 { // dirty as a whole
			bl.dranges.add(0, b.pageSize)
		}
		bl.dranges.remove(off, off+n)
		if bl.dranges.n == 0 {
			b.setDirtyLocked(bl, false)
		}
	}
	bl.touch(now, false)
	b.jtouchLocked(bl)
	return b.segs[bl.tier].seg.Punch(bl.off+off, n)
}

// zeroRange applies zero to the part of each resident page in
// [off, off+n).
func (b *Bucket) zeroRange(off, n int64, zero func(bl *blob, off, n, now int64) error) error {
	if err := b.checkPage("zero range", 0, 0, 0); err != nil {
		return err
	}
	if off < 0 || n < 0 || off > (1<<62)-n {
		return fmt.Errorf("zero range [%d,+%d) of bucket %s: %w", off, n, b.Name(), ErrInvalid)
	}
	if n == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	end := off + n
	first, last := off/b.pageSize, (end-1)/b.pageSize
	zeroPage := func(i int64, bl *blob) error {
		ps := i * b.pageSize
		lo, hi := max(off, ps)-ps, min(end, ps+b.pageSize)-ps
		return zero(bl, lo, hi-lo, now)
	}
	if last-first+1 > int64(len(b.pages)) {
		for i, bl := range b.pages {
			if i >= first && i <= last {
				if err := zeroPage(i, bl); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for i := first; i <= last; i++ {
		if bl := b.pages[i]; bl != nil {
			if err := zeroPage(i, bl); err != nil {
				return err
			}
		}
	}
	return nil
}

// Resident returns the resident page count and, for the RAM tier, whether
// every page in [0, ceil(size/PageSize)) is resident in the first tier.
func (b *Bucket) Resident(size int64) (pages int64, allInFirstTier bool) {
	if b.pageSize <= 0 || size < 0 {
		return 0, false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	pages = int64(len(b.pages))
	n := b.pageCount(size)
	if s := b.segs[0]; n > 0 && (s == nil || int64(s.nblobs) < n) {
		return pages, false
	}
	for i := range n {
		if bl := b.pages[i]; bl == nil || bl.tier != 0 {
			return pages, false
		}
	}
	return pages, true
}
