package bufferpool

import "slices"

// extent is a byte range of a segment.
type extent struct{ off, n int64 }

// extentAlloc places named blobs in a segment: first fit over a free list
// kept sorted by offset and coalesced, then the end of the segment.
// Not safe for concurrent use (guarded by the bucket lock).
type extentAlloc struct {
	free []extent
	end  int64 // everything at and past end is free
}

// alloc returns the offset of a new extent of n bytes.
func (a *extentAlloc) alloc(n int64) int64 {
	for i, e := range a.free {
		if e.n < n {
			continue
		}
		if e.n == n {
			a.free = slices.Delete(a.free, i, i+1)
		} else {
			a.free[i] = extent{e.off + n, e.n - n}
		}
		return e.off
	}
	off := a.end
	a.end += n
	return off
}

// grow extends the extent [off, off+n) to m bytes in place if the bytes
// after it are free.
func (a *extentAlloc) grow(off, n, m int64) bool {
	next := off + n
	if next == a.end {
		a.end = off + m
		return true
	}
	i, found := a.find(next)
	if !found || a.free[i].n < m-n {
		return false
	}
	if a.free[i].n == m-n {
		a.free = slices.Delete(a.free, i, i+1)
	} else {
		a.free[i] = extent{next + m - n, a.free[i].n - (m - n)}
	}
	return true
}

// find returns the index of the free extent starting at off, or where one
// would be inserted.
func (a *extentAlloc) find(off int64) (int, bool) {
	return slices.BinarySearchFunc(a.free, off, func(e extent, off int64) int {
		switch {
		case e.off < off:
			return -1
		case e.off > off:
			return 1
		}
		return 0
	})
}

// release frees [off, off+n), coalescing with its neighbours.
func (a *extentAlloc) release(off, n int64) {
	if n <= 0 {
		return
	}
	i, _ := a.find(off)
	if i > 0 && a.free[i-1].off+a.free[i-1].n == off {
		i--
		off = a.free[i].off
		n += a.free[i].n
		a.free = slices.Delete(a.free, i, i+1)
	}
	if i < len(a.free) && off+n == a.free[i].off {
		n += a.free[i].n
		a.free = slices.Delete(a.free, i, i+1)
	}
	if off+n == a.end {
		a.end = off
		return
	}
	a.free = slices.Insert(a.free, i, extent{off, n})
}

// used reports the bytes allocated (for tests).
func (a *extentAlloc) used() int64 {
	u := a.end
	for _, e := range a.free {
		u -= e.n
	}
	return u
}
