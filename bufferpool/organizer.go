package bufferpool

import (
	"cmp"
	"slices"
	"time"
)

// Organize runs one organizer pass now (demote past high watermarks,
// evict clean blobs from the last tier past its high watermark, promote
// hot blobs). Tests call it directly.
func (p *Pool) Organize() {
	if p.closed.Load() {
		return
	}
	p.orgMu.Lock()
	defer p.orgMu.Unlock()
	if ts := p.tiers[0]; ts.used.Load() > ts.high {
		p.returnLeases() // before any data moves for them
	}
	now := time.Now().UnixNano()
	perTier := p.foldScores(now)
	last := len(p.tiers) - 1
	if ts := p.tiers[last]; ts.used.Load() > ts.high {
		p.evictColdest(perTier[last], last)
	}
	for t := last - 1; t >= 0; t-- {
		if ts := p.tiers[t]; ts.used.Load() > ts.high {
			p.demote(perTier[t], t)
		}
	}
	for t := 1; t <= last; t++ {
		p.promote(perTier[t], t)
	}
}

// foldScores folds every blob's counters into its score and returns the
// blobs of each tier. The organizer holds no other bucket lock, so it may
// block on each bucket in turn.
func (p *Pool) foldScores(now int64) [][]victim {
	perTier := make([][]victim, len(p.tiers))
	for _, b := range p.snapshot() {
		b.mu.LockMeta() // scores only: shim writers go on
		if b.dead {
			b.mu.UnlockMeta()
			continue
		}
		add := func(bl *blob) {
			bl.foldLocked(now)
			perTier[bl.tier] = append(perTier[bl.tier],
				victim{b: b, bl: bl, alloc: bl.alloc, score: bl.score, last: bl.lastUsed.Load()})
		}
		for _, bl := range b.pages {
			add(bl)
		}
		for _, bl := range b.named {
			add(bl)
		}
		b.mu.UnlockMeta()
	}
	return perTier
}

// evictColdest drops clean blobs of the last tier, coldest first, until
// it is below its low watermark.
func (p *Pool) evictColdest(cands []victim, t int) {
	p.coldestFirst(cands, t, p.tiers[t].low, func(b *Bucket, bl *blob, t int) { b.evictOneLocked(bl, t) })
}

// demote moves the coldest blobs of tier t to slower tiers until t is
// below its low watermark. A clean blob no slower tier has room for is
// evicted instead; a dirty one stays.
func (p *Pool) demote(cands []victim, t int) {
	p.coldestFirst(cands, t, p.tiers[t].low, (*Bucket).demoteLocked)
}

// coldestFirst calls moveLocked, with the blob's bucket locked, on the
// unpinned blobs of cands (blobs of tier t), coldest first, until t holds
// at most until bytes.
func (p *Pool) coldestFirst(cands []victim, t int, until int64, moveLocked func(b *Bucket, bl *blob, t int)) {
	ts := p.tiers[t]
	slices.SortFunc(cands, byColdness)
	for _, c := range cands {
		if ts.used.Load() <= until {
			return
		}
		if c.b.pinned() {
			continue
		}
		c.b.mu.Lock()
		moveLocked(c.b, c.bl, t)
		c.b.mu.Unlock()
	}
}

// demoteLocked moves bl from tier t to the first slower tier with room.
func (b *Bucket) demoteLocked(bl *blob, t int) {
	if !b.currentLocked(bl) || bl.tier != t || bl.busy || bl.alloc == 0 {
		return
	}
	p := b.p
	for d := t + 1; d < len(p.tiers); d++ {
		if !p.tiers[d].reserve(bl.alloc) {
			continue
		}
		if b.moveLocked(bl, d) == nil {
			p.tiers[t].demo.Add(1)
		}
		return
	}
	b.evictOneLocked(bl, t)
}

// promote moves the most read blobs of tier t (decayed reads at least
// PromoteReads; any blob of a pinned bucket) to the fastest tier below
// its low watermark.
func (p *Pool) promote(cands []victim, t int) {
	hot := cands[:0]
	for _, c := range cands {
		if c.bl.readScore >= p.promoteReads || c.b.pinned() {
			c.score = c.bl.readScore
			hot = append(hot, c)
		}
	}
	slices.SortFunc(hot, func(x, y victim) int {
		if px, py := x.b.pinned(), y.b.pinned(); px != py {
			if px {
				return -1
			}
			return 1
		}
		return cmp.Compare(y.score, x.score)
	})
	for _, c := range hot {
		for u := 0; u < t; u++ {
			us := p.tiers[u]
			if us.used.Load() >= us.low || !us.reserve(c.alloc) {
				continue
			}
			c.b.mu.Lock()
			ok := c.b.currentLocked(c.bl) && c.bl.tier == t && !c.bl.busy && c.bl.alloc == c.alloc
			if ok {
				ok = c.b.moveLocked(c.bl, u) == nil
			} else {
				us.release(c.alloc)
			}
			c.b.mu.Unlock()
			if ok {
				us.promo.Add(1)
			}
			break
		}
	}
}
