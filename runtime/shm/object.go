package shm

import "fmt"

// Every container header starts with these two words:
//
//	+0 u32 magic (one per container kind; 0 once freed)
//	+4 u32 lock  (see lock.go)
//
// Lock order: a container's lock, then the allocator lock. No code holds
// two container locks at once.
const (
	oMagic = 0
	oLock  = 4
)

// object is the process-local handle of a structure whose header is one
// allocation in a segment. It holds the offset only; all state is shared.
type object struct {
	s     *Segment
	off   uint64 // user offset of the header
	magic uint32
}

// newObject allocates a zeroed header of size bytes. The caller fills it in
// and then calls publish.
func newObject(s *Segment, magic uint32, size uint64) (object, error) {
	p, err := s.Alloc(size)
	if err != nil {
		return object{}, err
	}
	return object{s: s, off: p.Offset, magic: magic}, nil
}

func (o object) publish() { store32(o.s.mem, o.off+oMagic, o.magic) }

// openObject checks that p is a live allocation of at least size bytes
// carrying magic.
func openObject(s *Segment, p Pointer, magic uint32, size uint64) (object, error) {
	b, ord, err := s.usedBlock(p)
	if err != nil {
		return object{}, err
	}
	if 1<<ord-blockHdr < size {
		return object{}, fmt.Errorf("object %v: block too small: %w", p, ErrCorrupt)
	}
	o := object{s: s, off: b + blockHdr, magic: magic}
	if m := load32(s.mem, o.off+oMagic); m != magic {
		return object{}, fmt.Errorf("object %v: magic %#x, want %#x: %w", p, m, magic, ErrCorrupt)
	}
	return o, nil
}

// Pointer names the object's header; store it (or a root) to share it.
func (o object) Pointer() Pointer { return Pointer{Segment: o.s.id, Offset: o.off} }

// lock takes the object's lock and re-checks the magic, which another
// process may have cleared by freeing the object.
func (o object) lock() error {
	if _, err := o.s.lockAt(o.off + oLock); err != nil {
		return fmt.Errorf("object %v: %w", o.Pointer(), err)
	}
	if m := load32(o.s.mem, o.off+oMagic); m != o.magic {
		o.unlock()
		return fmt.Errorf("object %v: magic %#x (freed?): %w", o.Pointer(), m, ErrCorrupt)
	}
	return nil
}

func (o object) unlock() { o.s.unlockAt(o.off + oLock) }

func (o object) u32(f uint64) uint32      { return load32(o.s.mem, o.off+f) }
func (o object) u64(f uint64) uint64      { return load64(o.s.mem, o.off+f) }
func (o object) set32(f uint64, v uint32) { store32(o.s.mem, o.off+f, v) }
func (o object) set64(f uint64, v uint64) { store64(o.s.mem, o.off+f, v) }

// destroy, called with the lock held, clears the magic, unlocks, and frees
// the header block.
func (o object) destroy() error {
	o.set32(oMagic, 0)
	o.unlock()
	return o.s.Free(o.Pointer())
}

// free releases an object that owns one allocation, whose offset is in
// header field data: it takes the lock, frees the allocation, then
// destroys the object. The first error is returned.
func (o object) free(data uint64) error {
	if err := o.lock(); err != nil {
		return err
	}
	err := o.s.freeOffset(o.u64(data))
	if err2 := o.destroy(); err == nil {
		err = err2
	}
	return err
}

// buffer returns n bytes of the allocation at off after checking that off
// is a live allocation that large. off == 0 with n == 0 is the empty buffer.
func (s *Segment) buffer(off, n uint64) ([]byte, error) {
	if off == 0 && n == 0 {
		return nil, nil
	}
	b, o, err := s.usedBlock(Pointer{Segment: s.id, Offset: off})
	if err != nil {
		return nil, fmt.Errorf("buffer: %w", err)
	}
	if n > 1<<o-blockHdr {
		return nil, fmt.Errorf("buffer %#x: %d bytes in a %d-byte block: %w", off, n, 1<<o-blockHdr, ErrCorrupt)
	}
	return s.mem[b+blockHdr : b+blockHdr+n], nil
}

// freeOffset frees the allocation at off unless off is 0.
func (s *Segment) freeOffset(off uint64) error {
	if off == 0 {
		return nil
	}
	return s.Free(Pointer{Segment: s.id, Offset: off})
}

// mulSize returns a*b, or false on overflow past the segment size.
func mulSize(a, b uint64) (uint64, bool) {
	if b != 0 && a > (1<<46)/b {
		return 0, false
	}
	return a * b, true
}
