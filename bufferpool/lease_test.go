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
	if got := b.RefillShimLease(32); got != 16 {
		t.Fatalf("lease of %d pages, want 16 (a quarter of 64 free)", got)
	}
	ts := p.tiers[0]
	if u := ts.used.Load(); u != 16*roundUp(ps) {
		t.Fatalf("tier used %d after the lease, want %d", u, 16*roundUp(ps))
	}
	checkAccounting(t, p)
	pt := b.pt
	cover := int64(atomic.LoadUint64(pt.word(ptOffCover)))
	seg, err := unix.Mmap(dfd, 0, int(cover), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	for i := int64(0); i < 16; i++ {
		if !shimCreate(pt, seg, i, ps, byte('a'+i)) {
			t.Fatalf("page %d refused with the lease not spent", i)
		}
	}
	if shimCreate(pt, seg, 16, ps, 'x') {
		t.Fatal("a page created past the lease")
	}
	b.HarvestShim()
	for i := int64(0); i < 16; i++ {
		buf := make([]byte, ps)
		found, err := b.ReadPage(i, 0, buf, nil)
		if err != nil || !found || buf[0] != byte('a'+i) || buf[ps-1] != byte('a'+i) {
			t.Fatalf("page %d after the harvest: found %v err %v byte %q", i, found, err, buf[0])
		}
	}
	if n := len(b.DirtyPages()); n != 16 {
		t.Fatalf("%d dirty pages, want 16", n)
	}
	if pages, reserved := b.ShimLease(); pages != 0 || reserved != 0 {
		t.Fatalf("lease after 16 pages: %d pages, %d bytes", pages, reserved)
	}
	if u := ts.used.Load(); u != 16*roundUp(ps) {
		t.Fatalf("tier used %d, want the 16 pages'", u)
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
	if u := ts.used.Load(); u != 16*roundUp(ps) {
		t.Fatalf("tier used %d after the lease went back", u)
	}
	if atomic.LoadInt64(pt.word64(ptOffLease)) != 0 {
		t.Fatal("lease left in the table")
	}
	checkAccounting(t, p)
}
