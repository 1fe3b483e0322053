package shm

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

const fuzzSegSize = 64 << 10

// fuzzImage is a formatted segment holding one of each container, named
// by roots, with a few entries in each.
func fuzzImage(t testing.TB) *memBackend {
	b := newMemBackend(fuzzSegSize)
	s, err := Format(b, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	str, _ := NewString(s, "hello, shared world")
	vec, _ := NewVector[rec](s, 4)
	list, _ := NewList[rec](s)
	m, _ := NewMap[uint64, rec](s)
	ring, _ := NewRing[msg](s, 8)
	for i := range 5 {
		r := rec{Seq: uint32(i)}
		vec.Push(r)
		list.PushBack(r)
		m.Put(uint64(i), r)
		ring.TryEnqueue(msg{Seq: uint32(i)})
	}
	for name, p := range map[string]Pointer{"str": str.Pointer(), "vec": vec.Pointer(),
		"list": list.Pointer(), "map": m.Pointer(), "ring": ring.Pointer()} {
		if err := s.SetRoot(name, p); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// exercise runs every operation on a possibly damaged segment. Errors are
// expected; panics, hangs, and results returned alongside an error are not.
func exercise(t *testing.T, b Backend) {
	s, err := Attach(b, &Options{LockTimeout: 5 * time.Millisecond})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Attach error not ErrCorrupt: %v", err)
		}
		return
	}
	s.Stats()
	s.Check()
	var ps []Pointer
	for _, n := range []uint64{0, 1, 100, 5000, 1 << 40} {
		if p, err := s.Alloc(n); err == nil {
			ps = append(ps, p)
		} else if !p.IsNil() {
			t.Fatal("Alloc returned a pointer with an error")
		}
	}
	root := func(name string) Pointer { p, _ := s.Root(name); return p }
	if str, err := OpenString(s, root("str")); err == nil {
		if v, err := str.Load(); err != nil && v != "" {
			t.Fatal("String.Load returned data with an error")
		}
		str.Append("more")
		str.Len()
	}
	if vec, err := OpenVector[rec](s, root("vec")); err == nil {
		if vs, err := vec.Values(); err != nil && vs != nil {
			t.Fatal("Vector.Values returned data with an error")
		}
		vec.Push(rec{Seq: 9})
		vec.Get(2)
		vec.Set(1, rec{})
		vec.Pop()
		vec.Truncate(1)
	}
	if list, err := OpenList[rec](s, root("list")); err == nil {
		if vs, err := list.Values(); err != nil && vs != nil {
			t.Fatal("List.Values returned data with an error")
		}
		list.PushFront(rec{})
		list.PopBack()
		list.PopFront()
		list.Len()
	}
	if m, err := OpenMap[uint64, rec](s, root("map")); err == nil {
		if all, err := m.All(); err != nil && all != nil {
			t.Fatal("Map.All returned data with an error")
		}
		m.Get(3)
		m.Put(77, rec{})
		m.Delete(2)
		for k := range uint64(20) {
			m.Put(100+k, rec{})
		}
	}
	if r, err := OpenRing[msg](s, root("ring")); err == nil {
		r.Spin = 0
		r.TryEnqueue(msg{})
		r.TryDequeue()
		r.Dequeue(time.Millisecond)
		r.Len()
	}
	for _, p := range ps {
		s.Free(p)
	}
	s.Free(root("vec"))
	s.Check()
}

// FuzzSegmentHeader overwrites the start of the segment header (magic,
// geometry, lock word, counters, free-list heads, roots) with the input.
func FuzzSegmentHeader(f *testing.F) {
	img := fuzzImage(f)
	f.Add(append([]byte(nil), img.b[:heapStart]...))
	f.Add(append([]byte(nil), img.b[:hFreeHeads+64]...))
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := newMemBackend(fuzzSegSize)
		copy(b.b, img.b)
		copy(b.b[:heapStart], data)
		exercise(t, b)
	})
}

// FuzzSegmentPatches writes the input as (offset, 8 bytes) patches anywhere
// in the segment: block headers, free-list links, container headers, list
// nodes, map slots, ring positions and sequence numbers.
func FuzzSegmentPatches(f *testing.F) {
	img := fuzzImage(f)
	patch := func(off uint32, v uint64) []byte {
		b := binary.LittleEndian.AppendUint32(nil, off)
		return binary.LittleEndian.AppendUint64(b, v)
	}
	f.Add([]byte{})
	f.Add(patch(hLock, 1))
	f.Add(patch(hFreeHeads+8*6, 12345))
	f.Add(patch(heapStart+16+8, 1<<40))
	f.Add(append(patch(heapStart+4, 40), patch(heapStart+200, 0xdeadbeef)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := newMemBackend(fuzzSegSize)
		copy(b.b, img.b)
		for len(data) >= 12 {
			off := binary.LittleEndian.Uint32(data) % (fuzzSegSize - 8)
			copy(b.b[off:], data[4:12])
			data = data[12:]
		}
		exercise(t, b)
	})
}

// TestFreeRandomOffsets: Free of any offset that is not a live allocation
// fails and leaves the heap consistent.
func TestFreeRandomOffsets(t *testing.T) {
	s := newMemfdSegment(t, 1<<18)
	live := map[uint64]bool{}
	for i := range 50 {
		p, err := s.Alloc(uint64(i * 37))
		if err != nil {
			t.Fatal(err)
		}
		live[p.Offset] = true
	}
	for off := uint64(0); off < 1<<18+64; off += 8 {
		if live[off] {
			continue
		}
		if err := s.Free(Pointer{Segment: s.ID(), Offset: off}); err == nil {
			t.Fatalf("Free(%#x) of a non-allocation succeeded", off)
		}
	}
	mustCheck(t, s)
}
