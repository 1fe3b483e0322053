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
	cold := make([]*coldList, len(p.tiers))
	for t := range cold {
		cold[t] = &coldList{cands: perTier[t]}
	}
	for t := 1; t <= last; t++ {
		p.promote(perTier[t], t, cold)
	}
}

// coldList is one tier's blobs as the pass found them, sorted coldest
// first when a swap first needs them; pos is the first not yet demoted
// for a swap.
type coldList struct {
	cands  []victim
	sorted bool
	pos    int
}

func (l *coldList) sort() {
	if !l.sorted {
		l.cands = slices.Clone(l.cands) // promote reorders perTier
		slices.SortFunc(l.cands, byColdness)
		l.sorted = true
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
// its low watermark, or else swaps it into a faster tier (swapIn).
func (p *Pool) promote(cands []victim, t int, cold []*coldList) {
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
			if us.used.Load() >= us.low && !p.swapIn(c, u, t, cold[u]) {
				continue
			}
			if !us.reserve(c.alloc) {
				continue
			}
			if p.moveUp(c, t, u) {
				us.promo.Add(1)
			}
			break
		}
	}
}

// moveUp moves c from tier t to tier u, whose capacity is reserved.
func (p *Pool) moveUp(c victim, t, u int) bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	ok := c.b.currentLocked(c.bl) && c.bl.tier == t && !c.bl.busy && c.bl.alloc == c.alloc
	if ok {
		return c.b.moveLocked(c.bl, u) == nil
	}
	p.tiers[u].release(c.alloc)
	return false
}

// swapIn makes room on tier u (at or above its low watermark) for hot
// blob c of slower tier t by demoting the coldest blobs of u, when the
// difference of scores pays for the copies: a blob's score estimates its
// accesses in the next half-life (for c its reads, which the promotion
// serves), each of which, on the slower tier, costs about a copy of the
// blob more, so the swap must gain
//
//	reads(c)*size(c) - sum score(v)*size(v) >= SwapCost * (size(c) + sum size(v))
//
// bytes of copies (SwapCost: moving a byte is a read and a write). The
// victims go to the first slower tier with room, a clean one with none is
// evicted, as in demote. Reports whether u now has room below its low
// watermark for c.
func (p *Pool) swapIn(c victim, u, t int, cold *coldList) bool {
	if p.swapCost < 0 {
		return false
	}
	us := p.tiers[u]
	need := us.used.Load() + c.alloc - us.low
	if need <= 0 {
		return true
	}
	cold.sort()
	var picked []victim
	var freed int64
	loss, moved := 0.0, float64(c.alloc)
	i := cold.pos
	for ; i < len(cold.cands) && freed < need; i++ {
		v := cold.cands[i]
		if v.b.pinned() || v.alloc == 0 {
			continue
		}
		picked = append(picked, v)
		freed += v.alloc
		loss += v.score * float64(v.alloc)
		moved += float64(v.alloc)
	}
	if freed < need || c.score*float64(c.alloc)-loss < p.swapCost*moved {
		return false
	}
	cold.pos = i // the pinned ones skipped stay skipped
	for _, v := range picked {
		v.b.mu.Lock()
		v.b.demoteLocked(v.bl, u)
		v.b.mu.Unlock()
	}
	if us.used.Load()+c.alloc > us.low {
		return false
	}
	us.swaps.Add(1)
	return true
}
