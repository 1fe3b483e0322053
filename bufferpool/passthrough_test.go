package bufferpool

import (
	"testing"

	"golang.org/x/sys/unix"
)

// segLen is the length of the file behind fd, as the kernel sees it.
func segLen(t *testing.T, fd int) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size
}

// TestPassthroughSegment: a bucket whose pages all lie in the first tier
// hands out its segment cut to the file's size, pinned (the organizer
// moves nothing) until the last EndPassthrough; a second passthrough joins
// the first; a truncate keeps the segment at the file's size; no shim may
// map it meanwhile.
func TestPassthroughSegment(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096)
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(16) {
		b.WritePage(i, 0, fill(4096, byte(i)), nil)
	}
	// 16 full pages; the file is 10 pages and 100 bytes (a truncate
	// zeroed the tail but left the segment longer).
	const size = 10*4096 + 100
	if err := b.Truncate(size); err != nil {
		t.Fatal(err)
	}
	fd, ok := b.Passthrough(size)
	if !ok {
		t.Fatal("a fully resident bucket was not passed through")
	}
	if n := segLen(t, fd); n != size {
		t.Fatalf("passed-through segment is %d bytes, want the file's %d", n, size)
	}
	buf := make([]byte, 4096)
	if _, err := unix.Pread(fd, buf, 3*4096); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, buf, fill(4096, 3))
	if _, _, err := b.PageTable(false); err == nil {
		t.Fatal("a shim map of a passed-through segment was granted")
	}
	if fd2, ok := b.Passthrough(size); !ok || fd2 != fd {
		t.Fatalf("second passthrough: %d, %v", fd2, ok)
	}
	p.Organize()
	p.Shed(0)
	if s := p.Stats(); s.Tiers[0].Blobs != 11 || s.Tiers[0].Demoted != 0 {
		t.Fatalf("pages of a passed-through bucket moved: %+v", s.Tiers[0])
	}
	p.Unshed()
	if err := b.Truncate(2*4096 + 7); err != nil {
		t.Fatal(err)
	}
	if n := segLen(t, fd); n != 2*4096+7 {
		t.Fatalf("after truncate the segment is %d bytes, want %d", n, 2*4096+7)
	}
	if err := b.Truncate(5 * 4096); err != nil {
		t.Fatal(err)
	}
	if n := segLen(t, fd); n != 5*4096 {
		t.Fatalf("after truncate up the segment is %d bytes, want %d", n, 5*4096)
	}
	b.EndPassthrough()
	if b.Passthroughs() != 1 || !b.pinned() {
		t.Fatalf("after one of two ends: %d passthroughs, pinned %v", b.Passthroughs(), b.pinned())
	}
	b.EndPassthrough()
	if b.Passthroughs() != 0 || b.pinned() {
		t.Fatalf("after both ended: %d passthroughs, pinned %v", b.Passthroughs(), b.pinned())
	}
	checkAccounting(t, p)
}

// TestPassthroughRefused: a page missing or on a lower tier, or a shim
// map of the segment, keeps the kernel out.
func TestPassthroughRefused(t *testing.T) {
	p := testPool(t, 4*4096, 64*4096)
	b := mustBucket(t, p, "hole", 4096)
	b.WritePage(0, 0, fill(4096, 1), nil)
	b.WritePage(2, 0, fill(4096, 2), nil)
	if _, ok := b.Passthrough(3 * 4096); ok {
		t.Error("a bucket with a missing page was passed through")
	}
	low := mustBucket(t, p, "low", 4096)
	for i := range int64(8) { // twice the RAM tier: some pages go lower
		low.WritePage(i, 0, fill(4096, byte(i)), nil)
	}
	if _, ok := low.Passthrough(8 * 4096); ok {
		t.Error("a bucket with pages on the file tier was passed through")
	}
	m := mustBucket(t, p, "mapped", 4096)
	m.WritePage(0, 0, fill(100, 1), nil)
	if _, _, err := m.PageTable(false); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Passthrough(100); ok {
		t.Error("a bucket mapped by shims was passed through")
	}
	if b.pinned() || low.pinned() || m.pinned() {
		t.Error("a refused passthrough left a pin")
	}
}
