package bufferpool

import "time"

// PinPage gives direct access to bytes [off, off+n) of resident page i in
// the segment file of the tier holding it, for a zero-copy read (splice
// from that fd). It returns the segment's fd and the byte offset in it,
// and holds the bucket's read lock — the page can be neither written,
// moved, punched nor evicted — until unpin is called, which must happen
// soon and exactly once. ok is false, and nothing is held, when the page
// is not resident or the segment file does not physically hold all of
// those bytes (a reader of the fd would see a short file, not zeros), or
// holds the page in a stored form (checksummed or compressed on a slower
// tier, stored.go: its bytes must be checked, or are not the page's).
func (b *Bucket) PinPage(i, off int64, n int) (fd int, fileOff int64, unpin func(), ok bool) {
	if b.checkPage("pin page", i, off, n) != nil || n <= 0 {
		return -1, 0, nil, false
	}
	b.mu.RLock()
	bl := b.pages[i]
	if b.dead || bl == nil || bl.alloc == 0 || bl.st != nil {
		b.mu.RUnlock()
		return -1, 0, nil, false
	}
	seg := b.segs[bl.tier].seg
	start := bl.off + off
	if start+int64(n) > seg.Size() {
		b.mu.RUnlock()
		return -1, 0, nil, false
	}
	bl.touch(time.Now().UnixNano(), true)
	b.p.hits.Add(1)
	return seg.Fd(), start, b.mu.RUnlock, true
}
