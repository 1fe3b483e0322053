package bufferpool

import (
	"sync/atomic"
	"testing"

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
	tfd, dfd, err := b.PageTable()
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
	b.SetSharedSize(12345)
	if got := atomic.LoadInt64((*int64)(ptrAt(pt.mem, 16))); got != 12345 {
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
