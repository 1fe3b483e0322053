package bufferpool

import (
	"log"
	"sync/atomic"
)

// Shim leases: new pages placed by clients.
//
// A shim that writes to a page that holds no old data (its first byte at
// or past the shared size, or at or past the table's new_from word: a
// hole) and is not resident, creates the page itself: it takes one page
// of the table's lease (a CAS that never takes it below 0), sets the
// page's resident bit, copies into the segment at i*PageSize, sets its
// dirty bit, raises the shared size with an atomic max (an append: a CAS
// before the copy) and sets the hint's "new" bit, all inside the writers
// window of the page-table protocol (pagetable_unsafe.go), so no
// exclusive daemon lock overlaps it; harvests run beside it (LockMeta).
// The segment is covered (it exists, sparse) up to the table's cover
// word; the shim creates no page past it.
//
// The lease is capacity: every page of it is reserved in the first tier's
// accounting (b.leased bytes) before it is published, so creating a page
// never takes the tier past its capacity. The next harvest: each created
// page becomes a dirty first-tier blob whose reservation is taken out of
// b.leased (adoptLocked). The owner refills the lease in large steps
// (RefillShimLease: every harvester tick, and when a shim asks over
// runtime/ipc, files.Handle.RefillShimLease; the lease word is only added
// to, shims take from it meanwhile) and returns what is left of it when
// the last read-write map of the file is released (ReturnShimLease),
// which also covers a client killed in the middle of an extend. A shim
// whose lease cannot be refilled takes the kernel path: nothing is lost.
//
// Leases are capacity no page fills yet, so they must not push data out
// of the tier: a refill takes at most a quarter of the room left below
// the first tier's high watermark (idle leases alone never set the
// organizer moving pages), and when the tier passes that watermark,
// or under memory pressure (Shed), every lease goes back before a page
// moves (returnLeases); the owners refill them within what is left.
//
// A page the daemon creates on a lower tier while the table exists lies
// inside the shared size and below new_from at once (enterTierLocked
// raises both past the page), and so does a page leaving the first tier,
// so no shim creates a second copy of it.

// RefillShimLease tops the lease of a bucket with a read-write page table
// up to pages pages when less than half of that is left, reserving the
// capacity in the first tier (less, down to nothing, when the tier has
// not that much free). It reports the pages the lease now holds. Shims
// go on writing meanwhile (LockMeta): the lease word is only ever added
// to, never stored over a page a shim took from it.
func (b *Bucket) RefillShimLease(pages int64) int64 {
	b.mu.LockMeta() // harvests: pages created so far leave the lease's count
	defer b.mu.UnlockMeta()
	pt := b.pt
	if pt == nil || b.dead || atomic.LoadUint32(pt.flags())&ptWritable == 0 || pages <= 0 {
		return 0
	}
	alloc := roundUp(b.pageSize)
	credit := b.clampLeaseLocked(pt, alloc)
	if credit >= pages/2 {
		return credit
	}
	ts := b.p.tiers[0]
	want := pages - credit
	// A lease takes at most a quarter of the room left below the tier's
	// high watermark: other files and the kernel path keep the rest, and
	// leases (capacity no page fills yet) never make the organizer move
	// data on their own (it starts past the high watermark, and returns
	// the leases first: returnLeases).
	if free := (min(ts.high, ts.limit()) - ts.used.Load()) / 4 / alloc; want > free {
		want = max(free, 0)
	}
	for want > 0 && !ts.reserve(want*alloc) {
		want /= 2
	}
	if want == 0 {
		return credit
	}
	b.leaseAddLocked(want * alloc)
	b.p.lease.refills.Add(1)
	end := roundUpTo(atomic.LoadInt64(pt.size()), b.pageSize) + 2*(credit+want)*b.pageSize
	if end > ptMaxPages*b.pageSize {
		end = ptMaxPages * b.pageSize
	}
	if err := b.coverLocked(pt, end); err != nil {
		log.Printf("bufferpool: bucket %s: lease: %v", b.Name(), err)
	}
	return atomic.AddInt64(pt.word64(ptOffLease), want)
}

// clampLeaseLocked reads the lease and holds it to what b.leased covers (a
// client may scribble over the table; it cannot create reserved room).
// Shims take pages from the word meanwhile: it is lowered by CAS only.
func (b *Bucket) clampLeaseLocked(pt *pageTable, alloc int64) int64 {
	p := pt.word64(ptOffLease)
	for {
		credit := atomic.LoadInt64(p)
		want := min(max(credit, 0), b.leased/alloc)
		if want == credit || atomic.CompareAndSwapInt64(p, credit, want) {
			return want
		}
	}
}

// ReturnShimLease empties the lease and gives its capacity back to the
// first tier (after a harvest adopted the pages created so far).
func (b *Bucket) ReturnShimLease() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.returnLeaseLocked()
}

func (b *Bucket) returnLeaseLocked() {
	if pt := b.pt; pt != nil {
		atomic.StoreInt64(pt.word64(ptOffLease), 0)
	}
	if n := b.leased; n > 0 {
		b.leaseAddLocked(-n)
		b.p.tiers[0].release(n)
		b.p.lease.returned.Add(1)
		b.p.lease.returnedBytes.Add(uint64(n))
	}
}

// leaseAddLocked changes the capacity reserved for the bucket's lease by n
// bytes (the tier's accounting is the caller's).
func (b *Bucket) leaseAddLocked(n int64) {
	b.leased += n
	b.p.lease.bytes.Add(n)
}

// leaseCounters are the pool's LeaseStats.
type leaseCounters struct {
	bytes             atomic.Int64
	refills, returned atomic.Uint64
	returnedBytes     atomic.Uint64
	adopted, dropped  atomic.Uint64
}

func (c *leaseCounters) stats() LeaseStats {
	return LeaseStats{
		LeaseBytes: c.bytes.Load(), LeaseRefills: c.refills.Load(),
		LeasesReturned: c.returned.Load(), LeaseReturnedBytes: c.returnedBytes.Load(),
		ShimPagesAdopted: c.adopted.Load(), ShimPagesDropped: c.dropped.Load(),
	}
}

// returnLeases gives back the shim leases of every bucket (the organizer
// and Shed, when the first tier is short of room: a lease is capacity no
// page fills yet, and data must not move to keep it). The owners refill
// them within what is left (RefillShimLease); shims meanwhile take the
// kernel path.
func (p *Pool) returnLeases() {
	if p.lease.bytes.Load() == 0 {
		return
	}
	for _, b := range p.snapshot() {
		b.mu.RLock()
		held := b.leased > 0
		b.mu.RUnlock()
		if held {
			b.ReturnShimLease()
		}
	}
}

// ShimLease reports the pages the lease holds and the bytes reserved for
// it (tests, stats).
func (b *Bucket) ShimLease() (pages, reserved int64) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if pt := b.pt; pt != nil {
		pages = atomic.LoadInt64(pt.word64(ptOffLease))
	}
	return pages, b.leased
}

// adoptLocked turns page i, created by a shim (its dirty bit, just taken
// by the harvest, and no blob), into a dirty first-tier blob paid for out
// of the lease. A dirty bit with no resident bit is stale and dropped; a
// page past the lease (a broken or hostile client) is dropped too.
func (b *Bucket) adoptLocked(pt *pageTable, i int64, now int64) bool {
	w, bit := i/64, uint64(1)<<(uint(i)%64)
	alloc := roundUp(b.pageSize)
	resident := atomic.LoadUint64(&pt.bits[w])&bit != 0
	ok := resident && (i+1)*b.pageSize <= pt.cover && b.segs[0] != nil
	if ok && b.leased >= alloc {
		b.leaseAddLocked(-alloc)
	} else if ok && !b.p.tiers[0].reserve(alloc) {
		ok = false
	}
	if !ok {
		if resident {
			b.p.lease.dropped.Add(1)
			// A hostile client can set every bit: log the 1st, 2nd, 4th …
			// drop, not each one.
			if b.shimDropped++; b.shimDropped&(b.shimDropped-1) == 0 {
				log.Printf("bufferpool: bucket %s: page %d created by a shim past its lease: dropped (%d so far)",
					b.Name(), i, b.shimDropped)
			}
			atomic.AndUint64(&pt.bits[w], ^bit)
			if s := b.segs[0]; s != nil && (i+1)*b.pageSize <= pt.cover {
				s.seg.Punch(i*b.pageSize, b.pageSize)
			}
		}
		return false
	}
	b.p.lease.adopted.Add(1)
	bl := &blob{page: i, size: b.pageSize, alloc: alloc, scoreAt: now}
	b.segs[0].nblobs++
	bl.off = i * b.pageSize
	b.enterTierLocked(bl, 0)
	b.insertLocked(bl)
	b.wroteLocked(bl, now)
	return true
}

// raiseSizeForLocked keeps a page placed below the first tier out of the
// shims' reach: the shared size passes its first byte.
func (b *Bucket) raiseSizeForLocked(i int64) {
	if pt := b.pt; pt != nil {
		pt.noteDataEnd((i + 1) * b.pageSize)
		maxInt64(pt.size(), i*b.pageSize+1)
	}
}

func roundUpTo(n, m int64) int64 { return (n + m - 1) / m * m }
