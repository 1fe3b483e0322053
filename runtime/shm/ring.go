package shm

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/iowarp/iowarp/internal/sys"
)

// Ring is a bounded multi-producer single-consumer queue of fixed-size
// entries T in shared memory (Vyukov's bounded queue: a sequence number per
// slot). Producers claim a slot with one CAS on the tail, copy the entry in
// and publish it by storing the slot's sequence number; they never take a
// lock, and never wait without a timeout. The one consumer reads slots in
// order.
//
// Wake-ups use two futex words with waiter counts, so that nobody makes a
// system call for a peer that is not asleep:
//
//   - consumer: spin for Spin, then bump consWaiting, re-check, and
//     FUTEX_WAIT on wakeSeq; a producer that published an entry and sees
//     consWaiting != 0 increments wakeSeq and FUTEX_WAKEs it;
//   - producer on a full ring: the same with prodWaiting / spaceSeq, woken
//     by the consumer after it frees a slot.
//
// Sequentially consistent atomics order "publish, then read the waiter
// count" against "raise the waiter count, then re-check", so a wake-up is
// never lost; futex waits also time out in slices, as a second guard.
//
// A producer that dies between claiming a slot and publishing it stalls the
// consumer at that slot (Dequeue times out); give each untrusted peer its
// own ring. Ring is safe for concurrent use by any number of producers;
// Dequeue must only be called by one goroutine of one process at a time.
type Ring[T any] struct {
	s        *Segment
	off      uint64 // user offset of the ring header
	mem      []byte // the whole ring block: header and slots
	capacity uint64
	slot     uint64

	// Spin is how long waits spin before sleeping on the futex; 0 sleeps
	// at once. Set it before use.
	Spin time.Duration
}

const (
	ringMagic = 0x52494E47 // "RING"
	rEntry    = 8          // u32 entry size
	rTag      = 12         // u32
	rCap      = 16         // u64 slots, a power of two
	rTail     = 64         // u64 next position producers claim (own cache line)
	rHead     = 128        // u64 next position the consumer reads
	rConsWait = 136        // u32 consumers asleep (0 or 1)
	rWakeSeq  = 140        // u32 futex word for the consumer
	rProdWait = 192        // u32 producers asleep
	rSpaceSeq = 196        // u32 futex word for producers
	ringHdr   = 256
	// A slot is an 8-byte sequence number followed by the entry.
	slotSeq = 0

	// DefaultRingSpin is the spin before sleeping. It must outlast one
	// cross-core futex wake-up of the peer (~17 us one way on these VMs):
	// shorter, and once one side sleeps the other gives up before the
	// answer comes, so both keep sleeping and every round trip pays two
	// wake-ups. Bounded, so two cores are never monopolised for long.
	DefaultRingSpin = 50 * time.Microsecond

	ringSlice = 50 * time.Millisecond
)

// NewRing allocates a ring of capacity entries (rounded up to a power of 2,
// at least 2).
func NewRing[T any](s *Segment, capacity int) (*Ring[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("new ring: %w", err)
	}
	if capacity < 1 || capacity > 1<<30 {
		return nil, fmt.Errorf("new ring: capacity %d out of range", capacity)
	}
	c := uint64(2) // a slot's states pos, pos+1, pos+cap must differ
	for c < uint64(capacity) {
		c <<= 1
	}
	slot := (8 + sizeOf[T]() + 7) &^ 7
	size, ok := mulSize(c, slot)
	if !ok {
		return nil, fmt.Errorf("new ring: %w", ErrNoSpace)
	}
	p, err := s.Alloc(ringHdr + size)
	if err != nil {
		return nil, fmt.Errorf("new ring: %w", err)
	}
	mem, _ := s.buffer(p.Offset, ringHdr+size)
	store32(mem, rEntry, uint32(sizeOf[T]()))
	store32(mem, rTag, layoutTag(t))
	store64(mem, rCap, c)
	for i := uint64(0); i < c; i++ {
		store64(mem, ringHdr+i*slot+slotSeq, i)
	}
	store32(mem, oMagic, ringMagic)
	return &Ring[T]{s: s, off: p.Offset, mem: mem, capacity: c, slot: slot, Spin: DefaultRingSpin}, nil
}

// OpenRing returns the Ring[T] whose header is at p. Its geometry is read
// once and checked against the block; later changes to the shared header
// cannot move accesses outside the ring.
func OpenRing[T any](s *Segment, p Pointer) (*Ring[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("open ring: %w", err)
	}
	full, err := s.Bytes(p)
	if err != nil {
		return nil, fmt.Errorf("open ring: %w", err)
	}
	if len(full) < ringHdr || load32(full, oMagic) != ringMagic {
		return nil, fmt.Errorf("open ring %v: %w", p, ErrCorrupt)
	}
	if uint64(load32(full, rEntry)) != sizeOf[T]() || load32(full, rTag) != layoutTag(t) {
		return nil, fmt.Errorf("open ring %v: entry layout differs: %w", p, ErrBadType)
	}
	c := load64(full, rCap)
	slot := (8 + sizeOf[T]() + 7) &^ 7
	size, ok := mulSize(c, slot)
	if !ok || c < 2 || c&(c-1) != 0 || ringHdr+size > uint64(len(full)) {
		return nil, fmt.Errorf("open ring %v: capacity %d: %w", p, c, ErrCorrupt)
	}
	return &Ring[T]{s: s, off: p.Offset, mem: full[:ringHdr+size], capacity: c, slot: slot, Spin: DefaultRingSpin}, nil
}

// Pointer names the ring's header.
func (r *Ring[T]) Pointer() Pointer { return Pointer{Segment: r.s.id, Offset: r.off} }

// Cap is the number of slots.
func (r *Ring[T]) Cap() int { return int(r.capacity) }

// Len is the number of published or claimed entries not yet consumed.
func (r *Ring[T]) Len() int {
	n := int64(load64(r.mem, rTail) - load64(r.mem, rHead))
	return int(min(max(n, 0), int64(r.capacity)))
}

func (r *Ring[T]) slotOff(pos uint64) uint64 { return ringHdr + (pos&(r.capacity-1))*r.slot }

// maxClaimTries bounds the CAS loop of a producer: under honest contention a
// claim succeeds in a few tries; a tail that never settles is corruption.
const maxClaimTries = 1 << 16

// TryEnqueue adds x without waiting; ErrFull if no slot is free.
func (r *Ring[T]) TryEnqueue(x T) error {
	_, err := r.tryEnqueue(x)
	return err
}

// tryEnqueue is TryEnqueue, returning the position x took.
func (r *Ring[T]) tryEnqueue(x T) (uint64, error) {
	for try := 0; try < maxClaimTries; try++ {
		pos := load64(r.mem, rTail)
		so := r.slotOff(pos)
		seq := load64(r.mem, so+slotSeq)
		switch d := int64(seq - pos); {
		case d == 0:
			if !atomic.CompareAndSwapUint64(word64(r.mem, rTail), pos, pos+1) {
				continue
			}
			copy(r.mem[so+8:so+8+uint64(len(valueBytes(&x)))], valueBytes(&x))
			store64(r.mem, so+slotSeq, pos+1)
			r.wake(rConsWait, rWakeSeq, 1)
			return pos, nil
		case d < 0:
			return 0, ErrFull
		}
		if try&63 == 63 {
			runtime.Gosched()
		}
	}
	return 0, fmt.Errorf("ring %v: tail never settles: %w", r.Pointer(), ErrCorrupt)
}

// Enqueue adds x, waiting up to timeout for a free slot (ErrFull after).
func (r *Ring[T]) Enqueue(x T, timeout time.Duration) error {
	_, err := r.EnqueuePos(x, timeout)
	return err
}

// EnqueuePos is Enqueue that also returns the position x took in the
// ring: the consumer has taken it once Consumed is past it.
func (r *Ring[T]) EnqueuePos(x T, timeout time.Duration) (pos uint64, err error) {
	pos, err = r.tryEnqueue(x)
	if err != ErrFull || timeout <= 0 {
		return pos, err
	}
	deadline := time.Now().Add(timeout)
	if r.spin(deadline, func() bool { pos, err = r.tryEnqueue(x); return err != ErrFull }) {
		return pos, err
	}
	for {
		seq := load32(r.mem, rSpaceSeq)
		atomic.AddUint32(word32(r.mem, rProdWait), 1)
		pos, err = r.tryEnqueue(x)
		if err == ErrFull {
			if serr := r.sleep(rSpaceSeq, seq, deadline); serr != nil {
				err = serr
			}
		}
		atomic.AddUint32(word32(r.mem, rProdWait), ^uint32(0))
		switch {
		case err == ErrTimeout:
			return 0, ErrFull
		case err != ErrFull:
			return pos, err
		}
	}
}

// Consumed is the number of entries the consumer has taken since the
// ring was made: the entry at position pos is taken once Consumed() > pos.
func (r *Ring[T]) Consumed() uint64 { return load64(r.mem, rHead) }

// TryDequeue removes the oldest entry if one is ready.
func (r *Ring[T]) TryDequeue() (T, bool) {
	var x T
	pos := load64(r.mem, rHead)
	so := r.slotOff(pos)
	if load64(r.mem, so+slotSeq) != pos+1 {
		return x, false
	}
	b := valueBytes(&x)
	copy(b, r.mem[so+8:so+8+uint64(len(b))])
	store64(r.mem, so+slotSeq, pos+r.capacity)
	store64(r.mem, rHead, pos+1)
	r.wake(rProdWait, rSpaceSeq, -1)
	return x, true
}

// Dequeue removes the oldest entry, spinning for Spin and then sleeping on
// the futex; ErrTimeout if nothing arrived within timeout (<= 0: forever).
func (r *Ring[T]) Dequeue(timeout time.Duration) (T, error) {
	if x, ok := r.TryDequeue(); ok {
		return x, nil
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var x T
	var ok bool
	if r.spin(deadline, func() bool { x, ok = r.TryDequeue(); return ok }) {
		return x, nil
	}
	for {
		seq := load32(r.mem, rWakeSeq)
		store32(r.mem, rConsWait, 1)
		x, ok = r.TryDequeue()
		var err error
		if !ok {
			err = r.sleep(rWakeSeq, seq, deadline)
		}
		store32(r.mem, rConsWait, 0)
		if ok {
			return x, nil
		}
		if x, ok = r.TryDequeue(); ok {
			return x, nil
		}
		if err != nil {
			return x, err
		}
	}
}

// spin polls try for r.Spin (bounded by the deadline), yielding the
// processor now and then.
func (r *Ring[T]) spin(deadline time.Time, try func() bool) bool {
	if r.Spin <= 0 {
		return false
	}
	end := time.Now().Add(r.Spin)
	if !deadline.IsZero() && deadline.Before(end) {
		end = deadline
	}
	for i := 1; ; i++ {
		if try() {
			return true
		}
		if i&31 == 0 {
			if time.Now().After(end) {
				return false
			}
			if i&127 == 0 {
				sys.SchedYield() // a peer process queued on this core
			} else {
				runtime.Gosched() // a peer goroutine waiting for a P
			}
		}
	}
}

// sleep waits on the futex word at off while it still holds seq, for at
// most one slice and never past the deadline (zero: none). ErrTimeout once
// the deadline passed.
func (r *Ring[T]) sleep(off uint64, seq uint32, deadline time.Time) error {
	d := ringSlice
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return ErrTimeout
		}
		d = min(d, left)
	}
	err := sys.FutexWait(word32(r.mem, off), seq, d)
	if err != nil && err != sys.ErrFutexTimeout {
		return fmt.Errorf("ring %v: futex wait: %w", r.Pointer(), err)
	}
	return nil
}

// wake bumps the futex word at seqOff and wakes n sleepers (-1: all), but
// only if the waiter count at waitOff says someone sleeps.
func (r *Ring[T]) wake(waitOff, seqOff uint64, n int) {
	if load32(r.mem, waitOff) == 0 {
		return
	}
	atomic.AddUint32(word32(r.mem, seqOff), 1)
	if n < 0 {
		n = 1 << 30
	}
	sys.FutexWake(word32(r.mem, seqOff), n)
}

// Free releases the ring's memory. No process may use it afterwards.
func (r *Ring[T]) Free() error {
	store32(r.mem, oMagic, 0)
	return r.s.Free(r.Pointer())
}
