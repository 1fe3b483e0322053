package shm

import (
	"fmt"
	"math/bits"
)

// The allocator is a binary buddy allocator over the heap [heapOff, heapEnd).
//
// Why buddy: every block's position is implied by its order (a block of
// order k starts at a multiple of 2^k from the heap start), so any offset a
// process hands us can be checked cheaply and completely (bounds, alignment
// for its order, header magic), and a block's buddy is found by one XOR, not
// by searching. Coalescing is immediate and bounded (at most maxOrder steps),
// free lists are doubly linked by offset so no operation walks a list, and
// the one lock in shared memory is held for O(log n) work. The cost is
// internal fragmentation up to 2x for sizes just above a power of two, which
// suits what lives here (rings and vectors of power-of-two capacity, pages).
// Slabs would waste less on odd sizes but need per-class metadata that a
// hostile process could corrupt in more ways.
//
// Block header (16 bytes, at the block start; user data follows):
//
//	+0  u32 magic   blockUsed or blockFree
//	+4  u32 order   log2 of the block size
//	+8  u64 used: bytes requested by the caller   free: next free block (0 = none)
//	+16 u64 free only: previous free block (0 = head)
const (
	minOrder  = 6 // 64-byte blocks
	blockHdr  = 16
	blockUsed = 0xA110C8ED
	blockFree = 0xF4EEB10C

	bMagic = 0
	bOrder = 4
	bReq   = 8
	bNext  = 8
	bPrev  = 16
)

// Stats describe the allocator at one instant.
type Stats struct {
	Capacity       uint64  // heap bytes
	Allocated      uint64  // bytes in allocated blocks (headers and rounding included)
	Requested      uint64  // bytes callers asked for
	Free           uint64  // bytes in free blocks
	LargestFree    uint64  // biggest free block, bytes (largest possible allocation + 16)
	Fragmentation  float64 // 1 - LargestFree/Free: 0 when all free space is one block
	Allocations    uint64  // live allocations
	TotalAllocs    uint64  // allocations ever
	TotalFrees     uint64  // frees ever
	LockRecoveries uint64  // allocator locks taken over from dead processes
}

// MaxAlloc is the largest size Alloc can ever satisfy in this segment.
func (s *Segment) MaxAlloc() uint64 { return 1<<s.maxOrder - blockHdr }

// orderFor is the smallest block order holding n user bytes.
func (s *Segment) orderFor(n uint64) (uint32, bool) {
	if n > s.MaxAlloc() {
		return 0, false
	}
	need := n + blockHdr
	o := uint32(bits.Len64(need - 1))
	return max(o, s.minOrder), true
}

// validBlock reports whether b may start a block of order o.
func (s *Segment) validBlock(b uint64, o uint32) bool {
	if o < s.minOrder || o > s.maxOrder || b < s.heapOff || b >= s.heapEnd {
		return false
	}
	rel, size := b-s.heapOff, uint64(1)<<o
	return rel&(size-1) == 0 && size <= s.heapEnd-b
}

// isFree reports whether a valid free block of order o starts at b.
func (s *Segment) isFree(b uint64, o uint32) bool {
	return s.validBlock(b, o) && load32(s.mem, b+bMagic) == blockFree && load32(s.mem, b+bOrder) == o
}

// Alloc returns n zeroed bytes (n may be 0) from the segment.
func (s *Segment) Alloc(n uint64) (Pointer, error) {
	p, err := s.AllocUninit(n)
	if err != nil {
		return p, err
	}
	clear(s.mem[p.Offset : p.Offset+n])
	return p, nil
}

// AllocUninit is Alloc without the zeroing: the n bytes hold whatever the
// block last held in this segment. For buffers the caller overwrites at
// once (a 1 MiB clear costs as much as the copy that follows it).
func (s *Segment) AllocUninit(n uint64) (Pointer, error) {
	o, ok := s.orderFor(n)
	if !ok {
		return Pointer{}, fmt.Errorf("alloc %d bytes (max %d): %w", n, s.MaxAlloc(), ErrNoSpace)
	}
	if err := s.lockAlloc(); err != nil {
		return Pointer{}, err
	}
	b, err := s.allocLocked(o, n)
	s.unlockAlloc()
	if err != nil {
		return Pointer{}, fmt.Errorf("alloc %d bytes: %w", n, err)
	}
	return Pointer{Segment: s.id, Offset: b + blockHdr}, nil
}

func (s *Segment) allocLocked(o uint32, n uint64) (uint64, error) {
	k := o
	for k <= s.maxOrder && load64(s.mem, s.headOff(k)) == 0 {
		k++
	}
	if k > s.maxOrder {
		return 0, ErrNoSpace
	}
	b, err := s.popLocked(k)
	if err != nil {
		return 0, err
	}
	for k > o {
		k--
		if err := s.pushLocked(b+1<<k, k); err != nil {
			return 0, err
		}
	}
	store32(s.mem, b+bMagic, blockUsed)
	store32(s.mem, b+bOrder, o)
	store64(s.mem, b+bReq, n)
	size := uint64(1) << o
	add64(s.mem, hUsedBytes, size)
	add64(s.mem, hReqBytes, n)
	add64(s.mem, hLive, 1)
	add64(s.mem, hAllocs, 1)
	return b, nil
}

func (s *Segment) headOff(o uint32) uint64 { return hFreeHeads + 8*uint64(o) }

// popLocked removes the first block of free list o.
func (s *Segment) popLocked(o uint32) (uint64, error) {
	b := load64(s.mem, s.headOff(o))
	if !s.isFree(b, o) || load64(s.mem, b+bPrev) != 0 {
		return 0, fmt.Errorf("free list %d head %#x: %w", o, b, ErrCorrupt)
	}
	return b, s.unlinkLocked(b, o)
}

// unlinkLocked removes the free block b of order o from its list.
func (s *Segment) unlinkLocked(b uint64, o uint32) error {
	next, prev := load64(s.mem, b+bNext), load64(s.mem, b+bPrev)
	if (next != 0 && !s.isFree(next, o)) || (prev != 0 && !s.isFree(prev, o)) {
		return fmt.Errorf("free block %#x links %#x/%#x: %w", b, prev, next, ErrCorrupt)
	}
	if prev == 0 && load64(s.mem, s.headOff(o)) != b {
		return fmt.Errorf("free block %#x not at head of list %d: %w", b, o, ErrCorrupt)
	}
	if prev == 0 {
		store64(s.mem, s.headOff(o), next)
	} else {
		store64(s.mem, prev+bNext, next)
	}
	if next != 0 {
		store64(s.mem, next+bPrev, prev)
	}
	store32(s.mem, b+bMagic, 0)
	add64(s.mem, hFreeBytes, -(uint64(1) << o))
	return nil
}

// pushLocked makes b a free block of order o at the head of its list.
func (s *Segment) pushLocked(b uint64, o uint32) error {
	head := load64(s.mem, s.headOff(o))
	if head != 0 && !s.isFree(head, o) {
		return fmt.Errorf("free list %d head %#x: %w", o, head, ErrCorrupt)
	}
	store32(s.mem, b+bOrder, o)
	store64(s.mem, b+bNext, head)
	store64(s.mem, b+bPrev, 0)
	store32(s.mem, b+bMagic, blockFree)
	if head != 0 {
		store64(s.mem, head+bPrev, b)
	}
	store64(s.mem, s.headOff(o), b)
	add64(s.mem, hFreeBytes, 1<<o)
	return nil
}

// carveHeap puts the whole heap on the free lists as the largest aligned
// blocks that fit, biggest first.
func (s *Segment) carveHeap() {
	rel, size := uint64(0), s.heapEnd-s.heapOff
	for o := s.maxOrder; o >= s.minOrder; o-- {
		for rel+1<<o <= size {
			s.pushLocked(s.heapOff+rel, o) // fresh lists cannot be corrupt
			rel += 1 << o
		}
	}
}

// usedBlock validates that p is a live allocation of this segment and
// returns its block offset and order.
func (s *Segment) usedBlock(p Pointer) (uint64, uint32, error) {
	if p.Segment != s.id || p.Offset < s.heapOff+blockHdr || p.Offset >= s.heapEnd {
		return 0, 0, fmt.Errorf("pointer %v: %w", p, ErrInvalidPointer)
	}
	b := p.Offset - blockHdr
	if (b-s.heapOff)&(1<<s.minOrder-1) != 0 {
		return 0, 0, fmt.Errorf("pointer %v misaligned: %w", p, ErrInvalidPointer)
	}
	o := load32(s.mem, b+bOrder)
	if load32(s.mem, b+bMagic) != blockUsed || !s.validBlock(b, o) {
		return 0, 0, fmt.Errorf("pointer %v: no allocated block: %w", p, ErrInvalidPointer)
	}
	if load64(s.mem, b+bReq) > 1<<o-blockHdr {
		return 0, 0, fmt.Errorf("pointer %v: size field %d: %w", p, load64(s.mem, b+bReq), ErrCorrupt)
	}
	return b, o, nil
}

// Bytes returns the usable bytes of allocation p: everything up to the end
// of its block (at least the size asked for). The slice aliases shared
// memory: other processes see writes to it, and it dies with the mapping.
func (s *Segment) Bytes(p Pointer) ([]byte, error) {
	b, o, err := s.usedBlock(p)
	if err != nil {
		return nil, err
	}
	return s.mem[b+blockHdr : b+1<<o], nil
}

// Size returns the number of bytes requested when p was allocated.
func (s *Segment) Size(p Pointer) (uint64, error) {
	b, _, err := s.usedBlock(p)
	if err != nil {
		return 0, err
	}
	return load64(s.mem, b+bReq), nil
}

// Free returns allocation p to the segment, merging it with free buddies.
func (s *Segment) Free(p Pointer) error {
	if err := s.lockAlloc(); err != nil {
		return err
	}
	defer s.unlockAlloc()
	b, o, err := s.usedBlock(p)
	if err != nil {
		return fmt.Errorf("free: %w", err)
	}
	req := load64(s.mem, b+bReq)
	store32(s.mem, b+bMagic, 0)
	add64(s.mem, hUsedBytes, -(uint64(1) << o))
	add64(s.mem, hReqBytes, -req)
	add64(s.mem, hLive, ^uint64(0))
	add64(s.mem, hFrees, 1)
	for o < s.maxOrder {
		buddy := s.heapOff + ((b - s.heapOff) ^ 1<<o)
		if !s.isFree(buddy, o) {
			break
		}
		if err := s.unlinkLocked(buddy, o); err != nil {
			return fmt.Errorf("free %v: merge: %w", p, err)
		}
		b = min(b, buddy)
		o++
	}
	if err := s.pushLocked(b, o); err != nil {
		return fmt.Errorf("free %v: %w", p, err)
	}
	return nil
}

// Stats reads the allocator counters under its lock.
func (s *Segment) Stats() (Stats, error) {
	if err := s.lockAlloc(); err != nil {
		return Stats{}, err
	}
	defer s.unlockAlloc()
	st := Stats{
		Capacity:       s.heapEnd - s.heapOff,
		Allocated:      load64(s.mem, hUsedBytes),
		Requested:      load64(s.mem, hReqBytes),
		Free:           load64(s.mem, hFreeBytes),
		Allocations:    load64(s.mem, hLive),
		TotalAllocs:    load64(s.mem, hAllocs),
		TotalFrees:     load64(s.mem, hFrees),
		LockRecoveries: load64(s.mem, hRecoveries),
	}
	for o := s.maxOrder; o >= s.minOrder; o-- {
		if load64(s.mem, s.headOff(o)) != 0 {
			st.LargestFree = 1 << o
			break
		}
	}
	if st.Allocated+st.Free != st.Capacity || st.LargestFree > st.Free {
		return st, fmt.Errorf("allocator counters allocated=%d free=%d capacity=%d: %w",
			st.Allocated, st.Free, st.Capacity, ErrCorrupt)
	}
	if st.Free > 0 {
		st.Fragmentation = 1 - float64(st.LargestFree)/float64(st.Free)
	}
	return st, nil
}

// Check walks every block of the heap and every free list and verifies that
// they agree with each other and with the counters. It is O(heap/64) and
// meant for tests and for a daemon inspecting a segment a client left.
func (s *Segment) Check() error {
	if err := s.lockAlloc(); err != nil {
		return err
	}
	defer s.unlockAlloc()
	var used, free, live uint64
	var freeBlocks [maxOrders]uint64
	for b := s.heapOff; b < s.heapEnd; {
		magic, o := load32(s.mem, b+bMagic), load32(s.mem, b+bOrder)
		if !s.validBlock(b, o) {
			return fmt.Errorf("block %#x order %d: %w", b, o, ErrCorrupt)
		}
		switch magic {
		case blockUsed:
			used += 1 << o
			live++
		case blockFree:
			free += 1 << o
			freeBlocks[o]++
		default:
			return fmt.Errorf("block %#x magic %#x: %w", b, magic, ErrCorrupt)
		}
		b += 1 << o
	}
	if used != load64(s.mem, hUsedBytes) || free != load64(s.mem, hFreeBytes) || live != load64(s.mem, hLive) {
		return fmt.Errorf("heap walk used=%d free=%d live=%d disagrees with counters: %w", used, free, live, ErrCorrupt)
	}
	for o := s.minOrder; o <= s.maxOrder; o++ {
		if err := s.checkListLocked(o, freeBlocks[o]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Segment) checkListLocked(o uint32, want uint64) error {
	var n, prev uint64
	for b := load64(s.mem, s.headOff(o)); b != 0; b = load64(s.mem, b+bNext) {
		if n++; n > want || !s.isFree(b, o) || load64(s.mem, b+bPrev) != prev {
			return fmt.Errorf("free list %d at %#x (entry %d): %w", o, b, n, ErrCorrupt)
		}
		prev = b
	}
	if n != want {
		return fmt.Errorf("free list %d has %d blocks, heap %d: %w", o, n, want, ErrCorrupt)
	}
	return nil
}
