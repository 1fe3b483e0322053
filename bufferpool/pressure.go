package bufferpool

import "time"

// shedFloor: Shed holds a RAM tier at no less than 1/shedFloor of its
// capacity.
const shedFloor = 16

// Memory pressure. A RAM tier is shared memory (memfds) that the kernel
// cannot reclaim without swap: when the machine or the daemon's cgroup
// runs short, the pool is what has to give memory back, or the OOM killer
// takes the daemon and every dirty byte with it. The daemon watches for
// pressure (host.PressureWatcher) and calls Shed; when the pressure has
// passed, Unshed.

// Shed moves the coldest blobs off every RAM tier, as the organizer
// demotes: to the first slower tier with room; a clean blob no slower
// tier has room for is evicted (its bytes are on the backing store); a
// dirty one with nowhere to go stays, as do the blobs of pinned buckets.
// It stops when each RAM tier holds at most keep (0..1) of what it held,
// and holds it there until Unshed: new blobs and promotions go to slower
// tiers meanwhile. The hold is never below shedFloor of the capacity, so
// that a pool without a slower tier still takes writes (at write-back
// speed). It returns the bytes the RAM tiers gave back.
func (p *Pool) Shed(keep float64) int64 {
	if p.closed.Load() {
		return 0
	}
	keep = min(max(keep, 0), 1)
	p.orgMu.Lock()
	defer p.orgMu.Unlock()
	// Leases are capacity, not memory: they go back (and stay within the
	// ceiling when refilled), and what is kept is measured in pages.
	p.returnLeases()
	perTier := p.foldScores(time.Now().UnixNano())
	var freed int64
	for t, ts := range p.tiers {
		if !ts.memory() {
			continue
		}
		before := ts.used.Load()
		target := int64(keep * float64(before))
		ts.ceiling.Store(max(roundUp(target), roundUp(ts.capacity/shedFloor), blockSize))
		p.coldestFirst(perTier[t], t, target, (*Bucket).demoteLocked)
		freed += max(before-ts.used.Load(), 0)
	}
	return freed
}

// Unshed lifts the ceilings Shed set: the RAM tiers may fill to their
// capacity again.
func (p *Pool) Unshed() {
	for _, ts := range p.tiers {
		ts.ceiling.Store(0)
	}
}
