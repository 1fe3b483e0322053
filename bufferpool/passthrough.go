package bufferpool

import "fmt"

// Kernel passthrough of a page bucket's first-tier segment.
//
// A door may hand the segment of a file whose pages all lie in the first
// tier to the kernel (FUSE passthrough): the kernel then reads the file
// straight from it, at page i × PageSize, without asking the door, and
// takes the segment's length for the file's EOF. So while a passthrough is
// open the segment is exactly the file's size (Passthrough cuts it, and
// Truncate keeps it so), no page of the bucket moves, is evicted or is
// punched (the bucket is pinned), the segment stays open, and no shim may
// map it (PageTable refuses: a shim's map seals the segment against the
// shrink a truncate needs). Only readers are passed through: the pool's
// dirty tracking never sees a write made there.

// Passthrough pins the bucket and returns the fd of its first-tier
// segment, cut to size bytes, when every page of [0, size) is resident
// in the first tier, or when the segment is passed through already. The fd stays owned by the bucket; each successful
// call is paired with one EndPassthrough. ok is false, and nothing is
// held, where the kernel cannot be given the file: a page elsewhere or
// missing, a shim map of the segment.
func (b *Bucket) Passthrough(size int64) (fd int, ok bool) {
	if b.pageSize <= 0 || size < 0 {
		return -1, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.segs[0]; s != nil && s.passthrough > 0 && !b.dead {
		// Already passed through: the segment is the file (nothing
		// left the tier since, and truncates kept its size).
		s.passthrough++
		b.Pin()
		return s.seg.Fd(), true
	}
	if b.dead || b.pt != nil || !b.residentLocked(size) {
		return -1, false
	}
	s, err := b.segLocked(0)
	if err != nil {
		return -1, false
	}
	if s.seg.Size() != size {
		if err := s.seg.SetSize(size); err != nil {
			return -1, false
		}
	}
	s.passthrough++
	b.Pin()
	return s.seg.Fd(), true
}

// residentLocked reports whether every page of [0, size) is in the first
// tier.
func (b *Bucket) residentLocked(size int64) bool {
	n := b.pageCount(size)
	if int64(len(b.pages)) < n {
		return false
	}
	for i := int64(0); i < n; i++ {
		if bl := b.pages[i]; bl == nil || bl.tier != 0 || bl.alloc == 0 {
			return false
		}
	}
	return true
}

// EndPassthrough ends one Passthrough: the pin goes, and with the last one
// an empty segment may close.
func (b *Bucket) EndPassthrough() {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.segs[0]
	if s == nil || s.passthrough == 0 {
		return
	}
	s.passthrough--
	b.Unpin()
	b.maybeCloseLocked(0)
}

// Passthroughs reports how many passthrough opens hold the bucket.
func (b *Bucket) Passthroughs() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if s := b.segs[0]; s != nil {
		return s.passthrough
	}
	return 0
}

// passthroughSizeLocked keeps a passed-through segment at the file's size
// after a truncate to size.
func (b *Bucket) passthroughSizeLocked(size int64) error {
	s := b.segs[0]
	if s == nil || s.passthrough == 0 || s.seg.Size() == size {
		return nil
	}
	if err := s.seg.SetSize(size); err != nil {
		return fmt.Errorf("passthrough segment to %d: %w", size, err)
	}
	return nil
}
