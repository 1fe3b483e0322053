package bufferpool

import (
	"sync/atomic"
	"testing"
)

// TestNewFromWord: the page table's new_from word (below it, a page the
// table does not show may hold data; at or past it, such a page is a hole
// a shim may create) is set by the owner's first size and then raised
// only where data appears beside the table: not by later sizes (a shim's
// extension leaves holes; a shared file's ranks each fill their own), not
// by a FUSE-door write the table shows, but by a page that leaves the
// first tier and by a backing file changed behind the pool.
func TestNewFromWord(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 16*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if _, _, err := b.PageTable(true); err != nil {
		t.Fatal(err)
	}
	nf := func() int64 { return atomic.LoadInt64(b.pt.word64(ptOffNewFrom)) }
	b.SetSharedSize(2 * ps)
	if got := nf(); got != 2*ps {
		t.Fatalf("after the first size: new_from %d, want %d", got, 2*ps)
	}
	b.SetSharedSize(10 * ps) // the owner folded in a shim's extension
	if got := nf(); got != 2*ps {
		t.Fatalf("after a larger size: new_from %d, want it kept at %d", got, 2*ps)
	}
	if _, err := b.WritePage(5, 0, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if got := nf(); got != 2*ps || !ptBit(b.pt, 5) {
		t.Fatalf("after a write the table shows: new_from %d (want %d), resident %v", got, 2*ps, ptBit(b.pt, 5))
	}
	b.NoteDataEnd(7 * ps)
	if got := nf(); got != 7*ps {
		t.Fatalf("after NoteDataEnd: new_from %d, want %d", got, 7*ps)
	}
	b.NoteDataEnd(3 * ps)
	if got := nf(); got != 7*ps {
		t.Fatalf("NoteDataEnd lowered new_from to %d", got)
	}
	if _, err := b.WritePage(8, 0, []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Truncate(8 * ps); err != nil {
		t.Fatal(err)
	}
	if got := nf(); got != 9*ps {
		t.Fatalf("after page 8 left the table: new_from %d, want %d", got, 9*ps)
	}
}

// TestAttrWords: AttrChanged raises the table's attribute generation and
// ShimMtime reads the mtime word shims stamp, both without the bucket's
// lock (a harvest's callback holds it), and both are no-ops once the
// table is gone.
func TestAttrWords(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 16*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	b.AttrChanged() // no table yet
	if b.ShimMtime() != 0 {
		t.Fatal("ShimMtime without a table")
	}
	if _, _, err := b.PageTable(true); err != nil {
		t.Fatal(err)
	}
	gen := func() uint64 { return atomic.LoadUint64(b.pt.word(ptOffAttrGen)) }
	g0 := gen()
	b.mu.Lock() // as a harvest's callback runs
	b.AttrChanged()
	atomic.StoreInt64(b.pt.word64(ptOffMtime), 12345)
	got := b.ShimMtime()
	b.mu.Unlock()
	if gen() != g0+1 || got != 12345 {
		t.Fatalf("generation %d (want %d), mtime %d", gen(), g0+1, got)
	}
	b.mu.Lock()
	b.dropPageTableLocked()
	b.mu.Unlock()
	b.AttrChanged()
	if b.ShimMtime() != 0 || b.ptReaders.Load() != 0 {
		t.Fatal("words read after the table was dropped")
	}
}
