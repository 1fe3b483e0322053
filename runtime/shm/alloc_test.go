package shm

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestAllocFreeReuse(t *testing.T) {
	s := newMemfdSegment(t, 1<<20)
	st0, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st0.Allocated != 0 || st0.Free != st0.Capacity || st0.Capacity != 1<<20-heapStart {
		t.Fatalf("fresh stats %+v", st0)
	}
	p, err := s.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if p.Segment != 7 || p.Offset%16 != 0 {
		t.Errorf("pointer %v: want segment 7, 16-byte aligned", p)
	}
	buf, err := s.Bytes(p)
	if err != nil || len(buf) != 128-blockHdr {
		t.Fatalf("Bytes = %d, %v", len(buf), err)
	}
	for i := range buf {
		buf[i] = 0xAB
	}
	if n, _ := s.Size(p); n != 100 {
		t.Errorf("Size = %d", n)
	}
	if err := s.Free(p); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Stats()
	if st.Free != st0.Free || st.Allocations != 0 || st.Fragmentation != st0.Fragmentation {
		t.Errorf("after free %+v, want %+v", st, st0)
	}
	q, err := s.Alloc(100)
	if err != nil {
		t.Fatal(err)
	}
	if q != p {
		t.Errorf("freed block not reused: %v then %v", p, q)
	}
	buf, _ = s.Bytes(q)
	for _, b := range buf[:100] {
		if b != 0 {
			t.Fatal("reused memory not zeroed")
		}
	}
	mustCheck(t, s)
}

func TestAllocExhaustAndCoalesce(t *testing.T) {
	s := newMemfdSegment(t, 1<<16+heapStart)
	var ps []Pointer
	for {
		p, err := s.Alloc(48)
		if errors.Is(err, ErrNoSpace) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if len(ps) != 1<<16/64 {
		t.Fatalf("allocated %d 64-byte blocks, want %d", len(ps), 1<<16/64)
	}
	st, _ := s.Stats()
	if st.Free != 0 || st.LargestFree != 0 || st.Requested != uint64(48*len(ps)) {
		t.Errorf("full stats %+v", st)
	}
	// Free every other block: half the space free, none of it mergeable.
	for i := 0; i < len(ps); i += 2 {
		if err := s.Free(ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = s.Stats()
	if st.Free != 1<<15 || st.LargestFree != 64 {
		t.Errorf("checkerboard stats %+v", st)
	}
	if want := 1 - 64.0/(1<<15); st.Fragmentation != want {
		t.Errorf("fragmentation %v, want %v", st.Fragmentation, want)
	}
	if _, err := s.Alloc(100); !errors.Is(err, ErrNoSpace) {
		t.Errorf("alloc 100 in a checkerboard: %v, want ErrNoSpace", err)
	}
	mustCheck(t, s)
	for i := 1; i < len(ps); i += 2 {
		if err := s.Free(ps[i]); err != nil {
			t.Fatal(err)
		}
	}
	st, _ = s.Stats()
	if st.Free != st.Capacity || st.LargestFree != st.Capacity || st.Fragmentation != 0 {
		t.Errorf("all freed, not coalesced: %+v", st)
	}
	if _, err := s.Alloc(s.MaxAlloc()); err != nil {
		t.Errorf("max alloc after coalescing: %v", err)
	}
	if _, err := s.Alloc(s.MaxAlloc() + 1); !errors.Is(err, ErrNoSpace) {
		t.Errorf("alloc past max: %v", err)
	}
	mustCheck(t, s)
}

func TestAllocOddHeapTail(t *testing.T) {
	// Heap of 2^16 + 2^12 + 2^6 bytes: three top blocks of different orders.
	s := newMemfdSegment(t, heapStart+1<<16+1<<12+1<<6)
	st, _ := s.Stats()
	if st.LargestFree != 1<<16 || st.Free != 1<<16+1<<12+1<<6 {
		t.Fatalf("stats %+v", st)
	}
	var ps []Pointer
	for {
		p, err := s.Alloc(1)
		if err != nil {
			break
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if err := s.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	st2, _ := s.Stats()
	if st2.Free != st.Free || st2.LargestFree != st.LargestFree {
		t.Errorf("after churn %+v, want %+v", st2, st)
	}
	mustCheck(t, s)
}

func TestFreeInvalidPointers(t *testing.T) {
	s := newMemfdSegment(t, 1<<20)
	p, _ := s.Alloc(1000)
	q, _ := s.Alloc(10)
	cases := []struct {
		name string
		p    Pointer
		want error
	}{
		{"nil", Pointer{}, ErrInvalidPointer},
		{"other segment", Pointer{Segment: 8, Offset: p.Offset}, ErrInvalidPointer},
		{"header region", Pointer{Segment: 7, Offset: 64}, ErrInvalidPointer},
		{"past end", Pointer{Segment: 7, Offset: 1 << 40}, ErrInvalidPointer},
		{"misaligned", Pointer{Segment: 7, Offset: p.Offset + 8}, ErrInvalidPointer},
		{"inside block", Pointer{Segment: 7, Offset: p.Offset + 64}, ErrInvalidPointer},
		{"free block", Pointer{Segment: 7, Offset: q.Offset + 64}, ErrInvalidPointer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := s.Free(c.p); !errors.Is(err, c.want) {
				t.Errorf("Free(%v) = %v, want %v", c.p, err, c.want)
			}
			if _, err := s.Bytes(c.p); !errors.Is(err, c.want) {
				t.Errorf("Bytes(%v) = %v, want %v", c.p, err, c.want)
			}
		})
	}
	if err := s.Free(q); err != nil {
		t.Fatal(err)
	}
	if err := s.Free(q); !errors.Is(err, ErrInvalidPointer) {
		t.Errorf("double free: %v", err)
	}
	mustCheck(t, s)
}

func TestCorruptHeaders(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(s *Segment, p Pointer)
		op     func(s *Segment, p Pointer) error
		want   error
	}{
		{"block magic", func(s *Segment, p Pointer) { store32(s.mem, p.Offset-blockHdr, 0xdead) },
			func(s *Segment, p Pointer) error { return s.Free(p) }, ErrInvalidPointer},
		{"block order too big", func(s *Segment, p Pointer) { store32(s.mem, p.Offset-blockHdr+bOrder, 40) },
			func(s *Segment, p Pointer) error { return s.Free(p) }, ErrInvalidPointer},
		{"block size field", func(s *Segment, p Pointer) { store64(s.mem, p.Offset-blockHdr+bReq, 1<<20) },
			func(s *Segment, p Pointer) error { return s.Free(p) }, ErrCorrupt},
		{"free list head out of range", func(s *Segment, p Pointer) { store64(s.mem, s.headOff(6), 1<<40) },
			func(s *Segment, p Pointer) error { _, err := s.Alloc(1); return err }, ErrCorrupt},
		{"free list head misaligned", func(s *Segment, p Pointer) { store64(s.mem, s.headOff(6), heapStart+8) },
			func(s *Segment, p Pointer) error { _, err := s.Alloc(1); return err }, ErrCorrupt},
		{"free next garbage", func(s *Segment, p Pointer) {
			store64(s.mem, load64(s.mem, s.headOff(6))+bNext, 12345)
		}, func(s *Segment, p Pointer) error { _, err := s.Alloc(1); return err }, ErrCorrupt},
		{"counters", func(s *Segment, p Pointer) { store64(s.mem, hFreeBytes, 1) },
			func(s *Segment, p Pointer) error { _, err := s.Stats(); return err }, ErrCorrupt},
		{"lock word impossible pid", func(s *Segment, p Pointer) { store32(s.mem, hLock, lockMaxPid+5) },
			func(s *Segment, p Pointer) error { _, err := s.Alloc(1); return err }, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newMemfdSegment(t, 1<<16)
			p, err := s.Alloc(10) // leaves a free 64-byte buddy on list 6
			if err != nil {
				t.Fatal(err)
			}
			c.break_(s, p)
			if err := c.op(s, p); !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestAttachRejects(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	for _, c := range []struct {
		name string
		off  uint64
		val  uint64
	}{
		{"magic", hMagic, 1},
		{"size", hSize, 1 << 20},
		{"heap offset", hHeapOff, 8},
		{"heap size", hHeapSize, 1 << 30},
		{"orders", hMinOrder, 50<<32 | 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := newMemBackend(len(s.mem))
			copy(img.b, s.mem)
			store64(img.b, c.off, c.val)
			if _, err := Attach(img, nil); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Attach = %v, want ErrCorrupt", err)
			}
		})
	}
	if _, err := Attach(s.Backend(), nil); err != nil {
		t.Errorf("pristine Attach: %v", err)
	}
}

func TestRoots(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	p, _ := s.Alloc(8)
	if err := s.SetRoot("a", p); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Root("a"); err != nil || got != p {
		t.Fatalf("Root = %v, %v", got, err)
	}
	if _, err := s.Root("b"); !errors.Is(err, ErrInvalidPointer) {
		t.Errorf("missing root: %v", err)
	}
	if err := s.SetRoot("a", Pointer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Root("a"); err == nil {
		t.Error("removed root still found")
	}
	for i := 0; i < numRoots; i++ {
		if err := s.SetRoot(string(rune('A'+i)), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetRoot("overflow", p); !errors.Is(err, ErrNoSpace) {
		t.Errorf("root table overflow: %v", err)
	}
	if err := s.SetRoot("this-name-is-far-too-long-for-a-root", p); err == nil {
		t.Error("long name accepted")
	}
}

// TestAllocConcurrentModel has goroutines allocate, fill, verify and free
// blocks of random sizes; every block's contents must survive everyone
// else's work and the heap must check out at the end.
func TestAllocConcurrentModel(t *testing.T) {
	s := newMemfdSegment(t, 8<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			errs <- allocChurn(s, uint64(g), 3000)
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Stats()
	if st.Allocations != 0 || st.Free != st.Capacity || st.TotalAllocs != st.TotalFrees {
		t.Errorf("leak: %+v", st)
	}
	mustCheck(t, s)
}

// allocChurn is shared by goroutine and process tests.
func allocChurn(s *Segment, seed uint64, ops int) error {
	rng := rand.New(rand.NewPCG(seed, 99))
	type live struct {
		p    Pointer
		n    uint64
		fill byte
	}
	var held []live
	check := func(l live) error {
		b, err := s.Bytes(l.p)
		if err != nil {
			return err
		}
		for _, c := range b[:l.n] {
			if c != l.fill {
				return errors.New("block contents overwritten")
			}
		}
		return nil
	}
	for i := 0; i < ops; i++ {
		if len(held) > 0 && (rng.IntN(2) == 0 || len(held) > 64) {
			j := rng.IntN(len(held))
			if err := check(held[j]); err != nil {
				return err
			}
			if err := s.Free(held[j].p); err != nil {
				return err
			}
			held[j] = held[len(held)-1]
			held = held[:len(held)-1]
			continue
		}
		n := uint64(rng.IntN(1 << rng.IntN(14)))
		p, err := s.Alloc(n)
		if errors.Is(err, ErrNoSpace) {
			continue
		}
		if err != nil {
			return err
		}
		l := live{p, n, byte(rng.Uint32())}
		b, _ := s.Bytes(p)
		for k := range b[:n] {
			b[k] = l.fill
		}
		held = append(held, l)
	}
	for _, l := range held {
		if err := check(l); err != nil {
			return err
		}
		if err := s.Free(l.p); err != nil {
			return err
		}
	}
	return nil
}
