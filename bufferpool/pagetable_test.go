package bufferpool

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// mapTable maps a page table read-only, as the shim does.
func mapTable(t *testing.T, fd int) []byte {
	t.Helper()
	mem, err := unix.Mmap(fd, 0, ptSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

func ptSeq(pt *pageTable) uint64 { return atomic.LoadUint64(pt.word(8)) }

func ptBit(pt *pageTable, i int64) bool {
	return atomic.LoadUint64(&pt.bits[i/64])&(1<<(uint(i)%64)) != 0
}

// TestPageTable: residency bits follow stage-in, writes, demotion,
// promotion, eviction, truncation; seq is odd exactly while the bucket is
// write-locked; a dropped bucket leaves the table empty with seq odd.
func TestPageTable(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 4*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if _, err := b.WritePage(0, 0, []byte("zero"), nil); err != nil {
		t.Fatal(err)
	}
	tfd, dfd, err := b.PageTable(false)
	if err != nil || tfd < 0 || dfd < 0 {
		t.Fatalf("PageTable: %d %d %v", tfd, dfd, err)
	}
	pt := b.pt
	mem := mapTable(t, tfd)
	if string(mem[:4]) != "IOWP" || !ptBit(pt, 0) {
		t.Fatalf("header %q, page 0 resident %v", mem[:4], ptBit(pt, 0))
	}
	s0 := ptSeq(pt)
	if s0%2 != 0 {
		t.Fatalf("seq %d odd with the lock free", s0)
	}
	b.mu.Lock()
	if ptSeq(pt)%2 != 1 {
		t.Fatal("seq even under the write lock")
	}
	b.mu.Unlock()
	if b.mu.TryLock() {
		if ptSeq(pt)%2 != 1 {
			t.Fatal("seq even under TryLock")
		}
		b.mu.Unlock()
	}
	// A stage-in lands in the first tier.
	if _, err := b.ReadPage(1, 0, make([]byte, 10), func(buf []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if !ptBit(pt, 1) {
		t.Fatal("staged-in page 1 not resident")
	}
	// Demotion to the file tier clears the bit; promotion sets it.
	b.mu.Lock()
	b.demoteLocked(b.pages[1], 0)
	b.mu.Unlock()
	if ptBit(pt, 1) || b.pages[1].tier != 1 {
		t.Fatal("demoted page 1 still resident in the first tier")
	}
	b.mu.Lock()
	if !p.tiers[0].reserve(b.pages[1].alloc) {
		t.Fatal("no room to promote")
	}
	if err := b.moveLocked(b.pages[1], 0); err != nil {
		t.Fatal(err)
	}
	b.mu.Unlock()
	if !ptBit(pt, 1) {
		t.Fatal("promoted page 1 not resident")
	}
	// The segment fd maps page i at i*ps.
	data, err := unix.Mmap(dfd, 0, 2*ps, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if string(data[:4]) != "zero" {
		t.Fatalf("segment page 0: %q", data[:4])
	}
	unix.Munmap(data)
	// Truncation and deletion clear bits.
	if err := b.Truncate(ps); err != nil {
		t.Fatal(err)
	}
	if ptBit(pt, 1) || !ptBit(pt, 0) {
		t.Fatal("truncate to one page: bits wrong")
	}
	// The truncation lowered the shared size; SetSharedSize only raises
	// it (shims raise it too: bufferpool/lease.go).
	if got := atomic.LoadInt64((*int64)(ptrAt(pt.mem, 16))); got != ps {
		t.Fatalf("shared size after truncate %d, want %d", got, ps)
	}
	b.SetSharedSize(12345)
	if got := atomic.LoadInt64((*int64)(ptrAt(pt.mem, 16))); got != ps {
		t.Fatalf("SetSharedSize lowered the shared size to %d", got)
	}
	b.SetSharedSize(3*ps + 5)
	if got := atomic.LoadInt64((*int64)(ptrAt(pt.mem, 16))); got != 3*ps+5 {
		t.Fatalf("shared size %d", got)
	}
	if ptSeq(pt)%2 != 0 {
		t.Fatal("seq odd at rest")
	}
	if err := p.DeleteBucket("f"); err != nil {
		t.Fatal(err)
	}
	seq := atomic.LoadUint64((*uint64)(ptrAt(mem, 8)))
	bits := atomic.LoadUint64((*uint64)(ptrAt(mem, ptHeader)))
	if seq%2 != 1 || bits != 0 {
		t.Fatalf("dropped bucket: seq %d bits %#x, want odd and empty", seq, bits)
	}
}

// shimWrite does what adapters/posix/fast.c does for a write hit of page
// i: enter (writers++), check seq and residency, copy, set the dirty bit
// and the hint, leave. Reports false for a miss (nothing written).
func shimWrite(pt *pageTable, seg []byte, i int64, ps int, b byte) bool {
	w := (*int64)(ptrAt(pt.mem, ptOffWriters))
	atomic.AddInt64(w, 1)
	defer atomic.AddInt64(w, -1)
	if ptSeq(pt)%2 != 0 || atomic.LoadUint32(pt.flags())&ptPoisoned != 0 || !ptBit(pt, i) {
		return false
	}
	for k := range ps {
		seg[int(i)*ps+k] = b
	}
	atomic.OrUint64(&pt.dirty[i/64], 1<<(uint(i)%64))
	atomic.StoreUint64(pt.word(ptOffHint), 1)
	return true
}

// TestPageTableShimWrites: a write through a read-write map is harvested
// into the pool (dirty, new version) before DirtyPages answers and before
// eviction; a write lock waits for a writer inside a page, TryLock refuses
// while one is; a writer that never leaves poisons the table after the
// bound and a later lock that finds it gone lifts the poison.
func TestPageTableShimWrites(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 4*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if err := b.PutPage(0, make([]byte, ps), false); err != nil {
		t.Fatal(err)
	}
	tfd, dfd, err := b.PageTable(true)
	if err != nil {
		t.Fatal(err)
	}
	_ = tfd
	pt := b.pt
	seg, err := unix.Mmap(dfd, 0, 2*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	harvested := 0
	b.OnShimHarvest(func(n int) { harvested += n })
	v0 := b.pages[0].version
	if !shimWrite(pt, seg, 0, ps, 'w') {
		t.Fatal("write hit refused")
	}
	if shimWrite(pt, seg, 1, ps, 'x') {
		t.Fatal("write to a page not resident accepted")
	}
	if got := b.DirtyPages(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("DirtyPages after a shim write: %v", got)
	}
	if harvested != 1 || b.pages[0].version == v0 {
		t.Fatalf("harvest: callback %d, version %d (was %d)", harvested, b.pages[0].version, v0)
	}
	if n := b.HarvestShimWrites(); n != 1 {
		t.Fatalf("HarvestShimWrites = %d, want 1 (found by DirtyPages)", n)
	}
	buf := make([]byte, ps)
	if _, _, _, err := b.SnapshotPage(0, buf); err != nil || buf[ps-1] != 'w' {
		t.Fatalf("snapshot after shim write: %q %v", buf[ps-1], err)
	}
	// A writer inside: TryLock fails, Lock waits for it.
	w := (*int64)(ptrAt(pt.mem, ptOffWriters))
	atomic.AddInt64(w, 1)
	if b.mu.TryLock() {
		b.mu.Unlock()
		t.Fatal("TryLock with a writer inside")
	}
	done := make(chan struct{})
	go func() {
		b.mu.Lock()
		b.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Lock did not wait for the writer")
	case <-time.After(20 * time.Millisecond):
	}
	atomic.AddInt64(w, -1)
	<-done
	if atomic.LoadUint32(pt.flags())&ptPoisoned != 0 {
		t.Fatal("poisoned by a writer that left in time")
	}
	// A writer that never leaves: the lock goes on after the bound.
	old := ptWaitBound
	ptWaitBound = 10 * time.Millisecond
	defer func() { ptWaitBound = old }()
	atomic.AddInt64(w, 1)
	start := time.Now()
	b.mu.Lock()
	b.mu.Unlock()
	if el := time.Since(start); el > time.Second {
		t.Fatalf("lock with a stuck writer took %v", el)
	}
	if atomic.LoadUint32(pt.flags())&ptPoisoned == 0 || shimWrite(pt, seg, 0, ps, 'y') {
		t.Fatal("stuck writer: table not poisoned for writes")
	}
	b.mu.Lock() // poisoned: no second wait
	b.mu.Unlock()
	atomic.AddInt64(w, -1)
	b.mu.Lock()
	b.mu.Unlock()
	if atomic.LoadUint32(pt.flags())&ptPoisoned != 0 {
		t.Fatal("poison not lifted once the writer left")
	}
	// Reset after the last read-write map: a garbage count is cleared.
	atomic.StoreInt64(w, 12345)
	b.mu.Lock()
	b.mu.Unlock()
	b.ResetShimWriters()
	if atomic.LoadInt64(w) != 0 || atomic.LoadUint32(pt.flags()) != 0 {
		t.Fatalf("reset: writers %d flags %#x", atomic.LoadInt64(w), atomic.LoadUint32(pt.flags()))
	}
}

// TestPageTableCover: a page that becomes resident is covered whole by the
// segment, so a client copying anywhere in it never faults past its end.
func TestPageTableCover(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 4*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if _, _, err := b.PageTable(false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WritePage(2, 0, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(b.segs[0].seg.Fd(), &st); err != nil || st.Size < 3*ps {
		t.Fatalf("segment size %d after a 1-byte write to page 2, want >= %d (%v)", st.Size, 3*ps, err)
	}
}
