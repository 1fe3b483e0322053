package bufferpool

// Range is the byte range [Lo, Hi) of a page.
type Range struct{ Lo, Hi int64 }

// maxDirtyRanges is how many disjoint dirty ranges a page remembers; a
// write that would make one more merges the two closest (the bytes
// between are written back too: correct, only not a hole any more).
const maxDirtyRanges = 4

// dirtyRanges are the bytes of a dirty page written since it was last
// clean: sorted, disjoint, not adjacent. Writes that say no range (shim
// writes found by a harvest, a page put whole) record the whole page, and
// a dirty page with none recorded counts as dirty as a whole. Guarded by
// the bucket lock.
type dirtyRanges struct {
	n int
	r [maxDirtyRanges]Range
}

// add records [lo, hi) as dirty, merging ranges it overlaps or touches.
func (d *dirtyRanges) add(lo, hi int64) {
	if lo >= hi {
		return
	}
	var out [maxDirtyRanges + 1]Range
	n, placed := 0, false
	for _, r := range d.r[:d.n] {
		switch {
		case r.Hi < lo: // wholly before
			out[n] = r
		case hi < r.Lo: // wholly after
			if !placed {
				out[n], placed = Range{lo, hi}, true
				n++
			}
			out[n] = r
		default: // overlaps or touches: absorb
			lo, hi = min(lo, r.Lo), max(hi, r.Hi)
			continue
		}
		n++
	}
	if !placed {
		out[n] = Range{lo, hi}
		n++
	}
	if n > maxDirtyRanges {
		n = mergeClosest(out[:n])
	}
	d.n = copy(d.r[:], out[:n])
}

// remove takes [lo, hi) out of the ranges (splitting one that holds it).
func (d *dirtyRanges) remove(lo, hi int64) {
	if lo >= hi {
		return
	}
	var out [maxDirtyRanges + 1]Range
	n := 0
	for _, r := range d.r[:d.n] {
		if r.Hi <= lo || hi <= r.Lo {
			out[n] = r
			n++
			continue
		}
		if r.Lo < lo {
			out[n] = Range{r.Lo, lo}
			n++
		}
		if hi < r.Hi {
			out[n] = Range{hi, r.Hi}
			n++
		}
	}
	if n > maxDirtyRanges {
		n = mergeClosest(out[:n])
	}
	d.n = copy(d.r[:], out[:n])
}

// mergeClosest merges the two neighbours of rs with the smallest gap
// between them and returns the new length.
func mergeClosest(rs []Range) int {
	best := 1
	for i := 2; i < len(rs); i++ {
		if rs[i].Lo-rs[i-1].Hi < rs[best].Lo-rs[best-1].Hi {
			best = i
		}
	}
	rs[best-1].Hi = rs[best].Hi
	return copy(rs[best:], rs[best+1:]) + best
}

// reset forgets the ranges (the page is clean).
func (d *dirtyRanges) reset() { d.n = 0 }

// appendTo appends the dirty ranges of a page of size ps to rs: the
// recorded ones, or the whole page if none are.
func (d *dirtyRanges) appendTo(rs []Range, ps int64) []Range {
	if d.n == 0 {
		return append(rs, Range{0, ps})
	}
	return append(rs, d.r[:d.n]...)
}
