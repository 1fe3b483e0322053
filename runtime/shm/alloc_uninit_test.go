package shm

import "testing"

// AllocUninit hands back a block as it was left (no zeroing); Alloc of the
// same block zeroes it.
func TestAllocUninitKeepsBytes(t *testing.T) {
	s := newMemfdSegment(t, 1<<20)
	p, err := s.AllocUninit(1000)
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := s.Bytes(p)
	for i := range buf[:1000] {
		buf[i] = 0xCD
	}
	if err := s.Free(p); err != nil {
		t.Fatal(err)
	}
	q, err := s.AllocUninit(1000)
	if err != nil || q != p {
		t.Fatalf("AllocUninit after Free = %v, %v; want the same block %v", q, err, p)
	}
	if buf, _ = s.Bytes(q); buf[999] != 0xCD {
		t.Fatalf("AllocUninit zeroed the block (byte 999 = %#x)", buf[999])
	}
	s.Free(q)
	r, err := s.Alloc(1000)
	if err != nil || r != p {
		t.Fatalf("Alloc after Free = %v, %v", r, err)
	}
	buf, _ = s.Bytes(r)
	for i, b := range buf[:1000] {
		if b != 0 {
			t.Fatalf("Alloc: byte %d = %#x, want zero", i, b)
		}
	}
	if st, _ := s.Stats(); st.Allocations != 1 {
		t.Fatalf("stats %+v", st)
	}
}
