package bufferpool

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// placeRounds bounds how often placement evicts and retries before it
// gives up with ErrNoSpace (other writers may take the space it freed,
// and busy buckets are skipped).
const placeRounds = 4

// placeLocked reserves alloc bytes on a tier chosen by the placement
// policy, evicting clean blobs if no tier has room. b is the caller's
// bucket, write-locked; other buckets are only TryLocked.
func (p *Pool) placeLocked(b *Bucket, alloc int64) (int, error) {
	n := len(p.tiers)
	start := p.startTier()
	if alloc == 0 {
		return start, nil
	}
	for round := 0; round < placeRounds; round++ {
		for k := range n {
			t := (start + k) % n
			if p.tiers[t].reserve(alloc) {
				return t, nil
			}
		}
		// Evict clean blobs, coldest first, from the slowest tier up;
		// pinned buckets only in the last rounds.
		pinned := round >= placeRounds/2
		for t := n - 1; t >= 0; t-- {
			ts := p.tiers[t]
			limit := ts.limit()
			if alloc > limit {
				continue
			}
			need := alloc - (limit - ts.used.Load())
			if need > 0 {
				batch := max(need, limit/32)
				p.evictLocked(b, t, batch, pinned)
			}
			if ts.reserve(alloc) {
				return t, nil
			}
		}
		if round > 0 {
			time.Sleep(time.Duration(round) * 50 * time.Microsecond)
		}
	}
	return 0, fmt.Errorf("place %d bytes for bucket %s: %w", alloc, b.Name(), ErrNoSpace)
}

// startTier is where the policy starts looking for room.
func (p *Pool) startTier() int {
	n := len(p.tiers)
	switch p.placement {
	case PlaceRoundRobin:
		return int((p.rr.Add(1) - 1) % uint64(n))
	case PlaceRandom:
		p.rngMu.Lock()
		t := p.rng.IntN(n)
		p.rngMu.Unlock()
		return t
	}
	return 0
}

// victim is an eviction or demotion candidate.
type victim struct {
	b     *Bucket
	bl    *blob
	alloc int64 // bl.alloc when collected
	score float64
	last  int64
}

func byColdness(x, y victim) int {
	if c := cmp.Compare(x.score, y.score); c != 0 {
		return c
	}
	return cmp.Compare(x.last, y.last)
}

// evictLocked drops clean blobs of tier t, coldest first, until batch
// bytes are freed or no candidate is left.
// holder is the bucket the caller has write-locked (or nil); every other
// bucket is only TryLocked, so a busy bucket is skipped and never waited
// for. Returns the bytes freed.
func (p *Pool) evictLocked(holder *Bucket, t int, batch int64, pinned bool) int64 {
	now := time.Now().UnixNano()
	var cands []victim
	for _, bk := range p.snapshot() {
		if bk.pinned() && !pinned {
			continue
		}
		if bk != holder {
			if !bk.mu.TryRLock() {
				continue
			}
		}
		cands = bk.collectLocked(cands, t, now, true)
		if bk != holder {
			bk.mu.RUnlock()
		}
	}
	slices.SortFunc(cands, byColdness)
	var freed int64
	for _, c := range cands {
		if freed >= batch {
			break
		}
		if c.b != holder && !c.b.mu.TryLock() {
			continue
		}
		freed += c.b.evictOneLocked(c.bl, t)
		if c.b != holder {
			c.b.mu.Unlock()
		}
	}
	return freed
}

// collectLocked appends the blobs of tier t (only clean ones if clean) to
// cands. Needs at least the read lock.
func (b *Bucket) collectLocked(cands []victim, t int, now int64, clean bool) []victim {
	if b.dead {
		return cands
	}
	add := func(bl *blob) {
		if bl.tier != t || bl.alloc == 0 || bl.busy || (clean && bl.dirty) {
			return
		}
		s, _ := bl.scores(now)
		cands = append(cands, victim{b: b, bl: bl, alloc: bl.alloc, score: s, last: bl.lastUsed.Load()})
	}
	for _, bl := range b.pages {
		add(bl)
	}
	for _, bl := range b.named {
		add(bl)
	}
	return cands
}

// evictOneLocked drops bl if it is still a clean blob of tier t and
// returns the bytes freed.
func (b *Bucket) evictOneLocked(bl *blob, t int) int64 {
	if !b.currentLocked(bl) || bl.tier != t || bl.dirty || bl.busy || bl.alloc == 0 {
		return 0
	}
	b.removeLocked(bl)
	b.p.tiers[t].evicts.Add(1)
	return bl.alloc
}
