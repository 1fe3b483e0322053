package bufferpool

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/abi"
)

// TestHarvestBesideWriters: the daemon's harvest, lease refill,
// write-back bookkeeping (DirtyPages, MarkClean) and the organizer's
// scoring pass run while a shim writer
// is inside a page, without the page table's exclusion: seq never turns
// odd (no shim write meets it and falls back to the kernel), nothing
// waits for the writer and the table is not poisoned; what the writer
// finished is harvested (an existing page dirty with a new version, a
// created one adopted out of the lease), and a refill adds to the lease
// the writer is spending instead of storing over it.
func TestHarvestBesideWriters(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 64*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if _, err := b.WritePage(0, 0, []byte("old"), nil); err != nil {
		t.Fatal(err)
	}
	b.SetSharedSize(ps)
	_, dfd, err := b.PageTable(true)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.RefillShimLease(8); got != 8 {
		t.Fatalf("lease of %d pages", got)
	}
	pt := b.pt
	seg, err := unix.Mmap(dfd, 0, int(atomic.LoadUint64(pt.word(ptOffCover))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	b.DirtyPages()
	if !b.MarkClean(0, b.pages[0].version) {
		t.Fatal("page 0 not cleaned")
	}
	// A writer enters and stays inside: it rewrites page 0 and creates
	// page 1 (both finished: dirty bits set), and is still copying.
	writers := (*int64)(ptrAt(pt.mem, ptOffWriters))
	atomic.AddInt64(writers, 1)
	defer atomic.AddInt64(writers, -1)
	seq := ptSeq(pt)
	copy(seg, "new")
	atomic.OrUint64(&pt.dirty[0], 1)
	if v := atomic.LoadInt64(pt.word64(ptOffLease)); !atomic.CompareAndSwapInt64(pt.word64(ptOffLease), v, v-1) {
		t.Fatal("lease CAS")
	}
	atomic.OrUint64(&pt.bits[0], 2)
	copy(seg[ps:], "created")
	atomic.OrUint64(&pt.dirty[0], 2)
	maxInt64(pt.size(), ps+7)
	atomic.OrUint64(pt.word(ptOffHint), abi.PTHintDirty|abi.PTHintNew)
	v0 := b.pages[0].version

	if n := b.HarvestShimWrites(); n != 2 {
		t.Fatalf("harvest beside a writer found %d pages, want 2", n)
	}
	if got := b.DirtyPages(); len(got) != 2 {
		t.Fatalf("dirty pages %v, want [0 1]", got)
	}
	if b.pages[0].version == v0 {
		t.Fatal("page 0 harvested without a new version")
	}
	buf := make([]byte, 7)
	if found, err := b.ReadPage(1, 0, buf, nil); err != nil || !found || string(buf) != "created" {
		t.Fatalf("created page: found %v err %v %q", found, err, buf)
	}
	// The writer takes a lease page while a refill runs: here, between
	// the harvest and the refill (a store over the word would lose it).
	left := atomic.AddInt64(pt.word64(ptOffLease), -1)
	if got := b.RefillShimLease(16); got != left+(16-left) || got != 16 {
		t.Fatalf("refill beside a writer: lease %d, want 16", got)
	}
	if _, reserved := b.ShimLease(); reserved != (16+1)*roundUp(ps) {
		t.Fatalf("lease reserves %d bytes, want the 16 pages and the one taken", reserved)
	}
	if !b.MarkClean(1, b.pages[1].version) {
		t.Fatal("page 1 not cleaned")
	}
	p.foldScores(time.Now().UnixNano()) // the organizer's pass over every bucket
	if s := ptSeq(pt); s != seq {
		t.Fatalf("seq went from %d to %d: the daemon excluded the shim writer", seq, s)
	}
	if atomic.LoadUint32(pt.flags())&ptPoisoned != 0 {
		t.Fatal("the table was poisoned: the daemon waited for the writer")
	}
	checkAccounting(t, p)
}
