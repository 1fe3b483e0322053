package shm

import (
	"bytes"
	"fmt"
	"time"
)

// Segment header, at offset 0 of the mapping. All fields are little-endian
// words accessed atomically; the heap starts at heapStart.
const (
	segMagic   = 0x314d485370726177 // "warpSHM1"
	segVersion = 1

	hMagic      = 0   // u64
	hVersion    = 8   // u32
	hID         = 12  // u32 segment id
	hSize       = 16  // u64 bytes mapped when formatted
	hHeapOff    = 24  // u64
	hHeapSize   = 32  // u64
	hMinOrder   = 40  // u32
	hMaxOrder   = 44  // u32
	hLock       = 48  // u32 allocator lock
	hRecoveries = 56  // u64 locks taken over from dead owners
	hUsedBytes  = 64  // u64 bytes in allocated blocks
	hReqBytes   = 72  // u64 bytes requested by callers
	hLive       = 80  // u64 live allocations
	hAllocs     = 88  // u64 allocations ever
	hFrees      = 96  // u64 frees ever
	hFreeBytes  = 104 // u64 bytes in free blocks
	hFreeHeads  = 112 // [maxOrders]u64 first free block of each order
	hRoots      = 512 // [numRoots]root
	rootNameLen = 24
	rootSize    = rootNameLen + 8
	numRoots    = 16

	maxOrders = 48
	heapStart = 4096

	// minSegmentSize leaves room for the header and a few blocks.
	minSegmentSize = heapStart + 4096
)

// Pointer addresses an allocation: segment id and byte offset of the user
// data from the start of the segment. It is the only kind of reference that
// may be stored in shared memory. The zero Pointer is nil.
type Pointer struct {
	Segment uint32
	Offset  uint64
}

// IsNil reports whether p is the zero Pointer.
func (p Pointer) IsNil() bool { return p.Offset == 0 }

func (p Pointer) String() string { return fmt.Sprintf("%d:%#x", p.Segment, p.Offset) }

// Options tune a Segment. The zero value is usable.
type Options struct {
	// LockTimeout bounds waits on locks held by live processes; 0 means
	// DefaultLockTimeout.
	LockTimeout time.Duration
}

// Segment is a formatted shared-memory region: header, allocator and the
// blocks it hands out. All state lives in shared memory; the Go value only
// caches immutable geometry, so a Segment is safe for concurrent use by
// goroutines, and other processes may attach the same region at once.
type Segment struct {
	b    Backend
	mem  []byte
	id   uint32
	opts Options

	heapOff, heapEnd   uint64
	minOrder, maxOrder uint32
}

// Format initialises b as an empty segment with the given id, overwriting
// whatever it held. Only one process formats; the others Attach.
func Format(b Backend, id uint32, opts *Options) (*Segment, error) {
	mem := b.Bytes()
	if len(mem) < minSegmentSize {
		return nil, fmt.Errorf("format %s: %d bytes, need %d: %w", b.Name(), len(mem), minSegmentSize, ErrNoSpace)
	}
	clear(mem[:heapStart])
	heapSize := (uint64(len(mem)) - heapStart) &^ (1<<minOrder - 1)
	maxOrd := uint32(minOrder)
	for maxOrd+1 < maxOrders && uint64(1)<<(maxOrd+1) <= heapSize {
		maxOrd++
	}
	store32(mem, hVersion, segVersion)
	store32(mem, hID, id)
	store64(mem, hSize, uint64(len(mem)))
	store64(mem, hHeapOff, heapStart)
	store64(mem, hHeapSize, heapSize)
	store32(mem, hMinOrder, minOrder)
	store32(mem, hMaxOrder, maxOrd)
	s := newSegment(b, mem, opts)
	if err := s.geometry(); err != nil {
		return nil, err
	}
	s.carveHeap()
	store64(mem, hMagic, segMagic)
	return s, nil
}

// Attach validates the header of an already formatted region and returns
// the segment. Damage found later (in blocks, lists, containers) is reported
// as ErrCorrupt by the operation that meets it.
func Attach(b Backend, opts *Options) (*Segment, error) {
	mem := b.Bytes()
	if len(mem) < minSegmentSize {
		return nil, fmt.Errorf("attach %s: %d bytes: %w", b.Name(), len(mem), ErrCorrupt)
	}
	if m := load64(mem, hMagic); m != segMagic {
		return nil, fmt.Errorf("attach %s: magic %#x: %w", b.Name(), m, ErrCorrupt)
	}
	if v := load32(mem, hVersion); v != segVersion {
		return nil, fmt.Errorf("attach %s: version %d: %w", b.Name(), v, ErrCorrupt)
	}
	s := newSegment(b, mem, opts)
	if err := s.geometry(); err != nil {
		return nil, fmt.Errorf("attach %s: %w", b.Name(), err)
	}
	return s, nil
}

func newSegment(b Backend, mem []byte, opts *Options) *Segment {
	s := &Segment{b: b, mem: mem}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.LockTimeout <= 0 {
		s.opts.LockTimeout = DefaultLockTimeout
	}
	return s
}

// geometry reads and checks the immutable part of the header.
func (s *Segment) geometry() error {
	mem := s.mem
	size := load64(mem, hSize)
	off := load64(mem, hHeapOff)
	hs := load64(mem, hHeapSize)
	minO, maxO := load32(mem, hMinOrder), load32(mem, hMaxOrder)
	switch {
	case size != uint64(len(mem)):
		return fmt.Errorf("header size %d, mapping %d: %w", size, len(mem), ErrCorrupt)
	case off != heapStart || minO != minOrder || maxO < minO || maxO >= maxOrders:
		return fmt.Errorf("heap geometry off=%d orders=%d..%d: %w", off, minO, maxO, ErrCorrupt)
	case hs > size-off || hs < 1<<minO || hs&(1<<minO-1) != 0 || uint64(1)<<maxO > hs:
		return fmt.Errorf("heap size %d: %w", hs, ErrCorrupt)
	}
	s.id = load32(mem, hID)
	s.heapOff, s.heapEnd = off, off+hs
	s.minOrder, s.maxOrder = minO, maxO
	return nil
}

// ID is the segment id stored in its header; Pointers carry it.
func (s *Segment) ID() uint32 { return s.id }

// Backend is the region under the segment.
func (s *Segment) Backend() Backend { return s.b }

// Close closes the backend (unmap + close). Shared state is untouched.
func (s *Segment) Close() error { return s.b.Close() }

// lockAt acquires the lock word at off of the segment.
func (s *Segment) lockAt(off uint64) (bool, error) {
	return lockWord(word32(s.mem, off), s.opts.LockTimeout)
}

func (s *Segment) unlockAt(off uint64) { unlockWord(word32(s.mem, off)) }

// lockAlloc takes the allocator lock, counting recoveries from dead owners.
func (s *Segment) lockAlloc() error {
	recovered, err := s.lockAt(hLock)
	if err != nil {
		return fmt.Errorf("allocator lock: %w", err)
	}
	if recovered {
		add64(s.mem, hRecoveries, 1)
	}
	return nil
}

func (s *Segment) unlockAlloc() { s.unlockAt(hLock) }

// SetRoot records p under name in the segment's root table, so that another
// process can find a container by name. A nil p removes the name.
func (s *Segment) SetRoot(name string, p Pointer) error {
	if name == "" || len(name) > rootNameLen || bytes.IndexByte([]byte(name), 0) >= 0 {
		return fmt.Errorf("root name %q: 1..%d bytes, no NUL", name, rootNameLen)
	}
	if !p.IsNil() && p.Segment != s.id {
		return fmt.Errorf("root %s = %v: %w", name, p, ErrInvalidPointer)
	}
	if err := s.lockAlloc(); err != nil {
		return err
	}
	defer s.unlockAlloc()
	slot, free := -1, -1
	for i := 0; i < numRoots; i++ {
		n := s.rootName(i)
		if string(n) == name {
			slot = i
		} else if len(n) == 0 && free < 0 {
			free = i
		}
	}
	if slot < 0 {
		if p.IsNil() {
			return nil
		}
		if free < 0 {
			return fmt.Errorf("root %s: table full: %w", name, ErrNoSpace)
		}
		slot = free
	}
	base := uint64(hRoots + slot*rootSize)
	nameBuf := s.mem[base : base+rootNameLen]
	clear(nameBuf)
	if !p.IsNil() {
		copy(nameBuf, name)
	}
	store64(s.mem, base+rootNameLen, p.Offset)
	return nil
}

// Root returns the Pointer recorded under name, or ErrInvalidPointer.
func (s *Segment) Root(name string) (Pointer, error) {
	if err := s.lockAlloc(); err != nil {
		return Pointer{}, err
	}
	defer s.unlockAlloc()
	for i := 0; i < numRoots; i++ {
		if string(s.rootName(i)) == name && name != "" {
			off := load64(s.mem, uint64(hRoots+i*rootSize+rootNameLen))
			return Pointer{Segment: s.id, Offset: off}, nil
		}
	}
	return Pointer{}, fmt.Errorf("root %q not found: %w", name, ErrInvalidPointer)
}

func (s *Segment) rootName(i int) []byte {
	base := hRoots + i*rootSize
	n := s.mem[base : base+rootNameLen]
	if j := bytes.IndexByte(n, 0); j >= 0 {
		n = n[:j]
	}
	return n
}
