package bufferpool

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/abi"
)

// shimCreate does what adapters/posix/fast.c does for a write of new page
// i: enter, check seq, cover and residency, take a page of the lease,
// mark the page resident, copy, mark it dirty, raise the size, set the
// hint, leave. Reports false when the shim would take the kernel path.
func shimCreate(pt *pageTable, seg []byte, i int64, ps int, b byte) bool {
	w := (*int64)(ptrAt(pt.mem, ptOffWriters))
	atomic.AddInt64(w, 1)
	defer atomic.AddInt64(w, -1)
	lease := pt.word64(ptOffLease)
	size := atomic.LoadInt64(pt.size())
	cover := atomic.LoadUint64(pt.word(ptOffCover))
	if ptSeq(pt)%2 != 0 || ptBit(pt, i) || i*int64(ps) < size || uint64(i+1)*uint64(ps) > cover {
		return false
	}
	if v := atomic.LoadInt64(lease); v < 1 || !atomic.CompareAndSwapInt64(lease, v, v-1) {
		return false
	}
	atomic.OrUint64(&pt.bits[i/64], 1<<(uint(i)%64))
	for k := range ps {
		seg[int(i)*ps+k] = b
	}
	atomic.OrUint64(&pt.dirty[i/64], 1<<(uint(i)%64))
	maxInt64(pt.size(), (i+1)*int64(ps))
	atomic.OrUint64(pt.word(ptOffHint), abi.PTHintDirty|abi.PTHintNew)
	return true
}

// TestShimLease: a lease is reserved first-tier capacity (never more than
// a quarter of the room left); pages a shim creates with it become dirty
// first-tier pages at the next harvest, paid for out of the lease, with
// their bytes; a spent lease refuses; the rest goes back on return; the
// tier's accounting stays exact throughout.
func TestShimLease(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 64*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	_, dfd, err := b.PageTable(true)
	if err != nil {
		t.Fatal(err)
	}
	// A quarter of the 57 pages below the high watermark (0.9 of 64).
	const n = 14
	if got := b.RefillShimLease(32); got != n {
		t.Fatalf("lease of %d pages, want %d (a quarter of the room below the high watermark)", got, n)
	}
	ts := p.tiers[0]
	if u := ts.used.Load(); u != n*roundUp(ps) {
		t.Fatalf("tier used %d after the lease, want %d", u, n*roundUp(ps))
	}
	checkAccounting(t, p)
	pt := b.pt
	cover := int64(atomic.LoadUint64(pt.word(ptOffCover)))
	seg, err := unix.Mmap(dfd, 0, int(cover), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	for i := int64(0); i < n; i++ {
		if !shimCreate(pt, seg, i, ps, byte('a'+i)) {
			t.Fatalf("page %d refused with the lease not spent", i)
		}
	}
	if shimCreate(pt, seg, n, ps, 'x') {
		t.Fatal("a page created past the lease")
	}
	b.HarvestShim()
	for i := int64(0); i < n; i++ {
		buf := make([]byte, ps)
		found, err := b.ReadPage(i, 0, buf, nil)
		if err != nil || !found || buf[0] != byte('a'+i) || buf[ps-1] != byte('a'+i) {
			t.Fatalf("page %d after the harvest: found %v err %v byte %q", i, found, err, buf[0])
		}
	}
	if d := len(b.DirtyPages()); d != n {
		t.Fatalf("%d dirty pages, want %d", d, n)
	}
	if pages, reserved := b.ShimLease(); pages != 0 || reserved != 0 {
		t.Fatalf("lease after %d pages: %d pages, %d bytes", n, pages, reserved)
	}
	if u := ts.used.Load(); u != n*roundUp(ps) {
		t.Fatalf("tier used %d, want the %d pages'", u, n)
	}
	checkAccounting(t, p)
	if got := b.RefillShimLease(8); got != 8 {
		t.Fatalf("refill: %d pages", got)
	}
	// A client scribbling over the lease creates no room.
	atomic.StoreInt64(pt.word64(ptOffLease), 1000)
	if got := b.RefillShimLease(8); got != 8 {
		t.Fatalf("lease after a scribble: %d pages, want 8", got)
	}
	b.ReturnShimLease()
	if u := ts.used.Load(); u != n*roundUp(ps) {
		t.Fatalf("tier used %d after the lease went back", u)
	}
	if atomic.LoadInt64(pt.word64(ptOffLease)) != 0 {
		t.Fatal("lease left in the table")
	}
	checkAccounting(t, p)
}

// TestShimLeaseStats: the pool's lease counters (iowarp stat) follow a
// lease through its life: the refill reserves it, the pages a shim
// creates with it are adopted out of it, a page created past it is
// dropped, and the rest is returned on ReturnShimLease or when the bucket
// is deleted with a lease held.
func TestShimLeaseStats(t *testing.T) {
	const ps = 64 << 10
	alloc := roundUp(ps)
	p := testPool(t, 64*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	_, dfd, err := b.PageTable(true)
	if err != nil {
		t.Fatal(err)
	}
	want := func(what string, w LeaseStats) {
		t.Helper()
		if got := p.Stats().LeaseStats; got != w {
			t.Fatalf("%s: lease stats %+v, want %+v", what, got, w)
		}
		checkAccounting(t, p)
	}
	want("before any lease", LeaseStats{})
	if got := b.RefillShimLease(4); got != 4 {
		t.Fatalf("lease of %d pages, want 4", got)
	}
	want("refilled", LeaseStats{LeaseBytes: 4 * alloc, LeaseRefills: 1})
	if got := b.RefillShimLease(4); got != 4 {
		t.Fatalf("lease of %d pages, want 4", got)
	}
	want("a refill with the lease full reserves nothing", LeaseStats{LeaseBytes: 4 * alloc, LeaseRefills: 1})
	pt := b.pt
	cover := int64(atomic.LoadUint64(pt.word(ptOffCover)))
	seg, err := unix.Mmap(dfd, 0, int(cover), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	for i := int64(0); i < 3; i++ {
		if !shimCreate(pt, seg, i, ps, 'a') {
			t.Fatalf("page %d refused", i)
		}
	}
	b.HarvestShim()
	want("3 pages created", LeaseStats{LeaseBytes: alloc, LeaseRefills: 1, ShimPagesAdopted: 3})
	b.ReturnShimLease()
	want("returned", LeaseStats{LeaseRefills: 1, LeasesReturned: 1, LeaseReturnedBytes: uint64(alloc), ShimPagesAdopted: 3})
	b.ReturnShimLease()
	want("an empty lease returned again", LeaseStats{LeaseRefills: 1, LeasesReturned: 1, LeaseReturnedBytes: uint64(alloc), ShimPagesAdopted: 3})
	// A client that sets the bits of a page it holds no lease for, past
	// the segment's cover: the page is dropped.
	i := atomic.LoadUint64(pt.word(ptOffCover))/ps + 1
	atomic.OrUint64(&pt.bits[i/64], 1<<(i%64))
	atomic.OrUint64(&pt.dirty[i/64], 1<<(i%64))
	atomic.OrUint64(pt.word(ptOffHint), abi.PTHintDirty|abi.PTHintNew)
	b.HarvestShim()
	st := p.Stats().LeaseStats
	if st.ShimPagesDropped != 1 || st.ShimPagesAdopted != 3 {
		t.Fatalf("a page created past the lease: %+v", st)
	}
	if got := b.RefillShimLease(2); got != 2 {
		t.Fatalf("lease of %d pages, want 2", got)
	}
	if err := p.DeleteBucket("f"); err != nil {
		t.Fatal(err)
	}
	st = p.Stats().LeaseStats
	if st.LeaseBytes != 0 || st.LeasesReturned != 2 || st.LeaseReturnedBytes != uint64(3*alloc) {
		t.Fatalf("after the bucket with a lease was deleted: %+v", st)
	}
	checkAccounting(t, p)
}

// TestShimLeaseLeavesDataAlone: leases of files that are open for writing
// but idle (the owner tops them up on every harvest tick) never make the
// organizer move data: on their own they stay below the first tier's high
// watermark, where the organizer starts, and when data pass it the leases
// go back before any page is demoted. Memory pressure (Shed) gives the leases
// back first too, and measures what it keeps in pages, not leases.
func TestShimLeaseLeavesDataAlone(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 64*ps, 64*ps)
	data := mustBucket(t, p, "data", ps)
	for i := int64(0); i < 20; i++ {
		if _, err := data.WritePage(i, 0, fill(ps, byte(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	ts := p.tiers[0]
	var idle []*Bucket
	for _, name := range []string{"a", "b", "c"} {
		b := mustBucket(t, p, name, ps)
		if _, _, err := b.PageTable(true); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, b)
	}
	for tick := 0; tick < 20; tick++ {
		for _, b := range idle {
			b.RefillShimLease(64)
		}
	}
	if u := ts.used.Load(); u > ts.high {
		t.Fatalf("idle leases took the first tier to %d bytes, past its high watermark %d", u, ts.high)
	}
	if p.Stats().LeaseBytes == 0 {
		t.Fatal("no lease at all")
	}
	p.Organize()
	if n := ts.blobs.Load(); n != 20 {
		t.Fatalf("the organizer moved data for idle leases: %d of 20 pages left in the first tier", n)
	}
	checkAccounting(t, p)
	// Data past the high watermark: the leases go back first, and only
	// what the data alone hold past the low watermark moves.
	for i := int64(20); i < 62; i++ {
		if _, err := data.WritePage(i, 0, fill(ps, byte(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if u := ts.used.Load(); u <= ts.high {
		t.Fatalf("the first tier at %d bytes, not past its high watermark %d", u, ts.high)
	}
	before := ts.blobs.Load()
	p.Organize()
	if l := p.Stats().LeaseBytes; l != 0 {
		t.Fatalf("%d bytes still leased with the first tier past its high watermark", l)
	}
	if n, keep := ts.blobs.Load(), min(before, ts.low/roundUp(ps)); n < keep {
		t.Fatalf("the organizer left %d of %d pages in the first tier: the pages alone needed it to keep %d", n, before, keep)
	}
	checkAccounting(t, p)
	// Memory pressure keeps half of the pages, leases aside.
	p2 := testPool(t, 64*ps, 64*ps)
	data2 := mustBucket(t, p2, "data", ps)
	for i := int64(0); i < 20; i++ {
		if _, err := data2.WritePage(i, 0, fill(ps, byte(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	idle2 := mustBucket(t, p2, "idle", ps)
	if _, _, err := idle2.PageTable(true); err != nil {
		t.Fatal(err)
	}
	for tick := 0; tick < 20; tick++ {
		idle2.RefillShimLease(64)
	}
	if p2.Stats().LeaseBytes == 0 {
		t.Fatal("no lease at all")
	}
	p2.Shed(0.5)
	if l := p2.Stats().LeaseBytes; l != 0 {
		t.Fatalf("%d bytes leased under memory pressure", l)
	}
	if n := p2.tiers[0].blobs.Load(); n < 10 {
		t.Fatalf("Shed(0.5) left %d of 20 pages in the first tier", n)
	}
	checkAccounting(t, p2)
}
