// Package shm holds iowarp's shared-memory primitives: regions that several
// processes map at once (Backend), an allocator that addresses by offset
// (Segment, Pointer), containers built on it (String, Vector, List, Map) and
// a multi-producer single-consumer ring with futex wake-ups (Ring). The
// daemon and its clients (runtime/ipc) build their transport from these.
//
// # What is shared
//
// Everything that matters lives in the mapping: the segment header with the
// allocator's free lists and counters, every block header, every container
// header with its lock, every element. The Go values (*Segment, *Vector[T],
// ...) hold only immutable geometry and offsets, so two processes, or a
// process that re-attaches a file-backed segment later, see one state.
// Nothing in shared memory is a Go pointer: references are offsets from the
// segment start (Pointer{Segment, Offset}), valid at whatever address each
// process maps the region. Element types must be pointer-free and
// fixed-size; containers check this with reflect when made or opened and
// refuse pointers, slices, strings, maps, channels, functions, interfaces
// and uintptr (ErrBadType). Values are copied in and out; no method returns
// a Go value aliasing shared memory except Segment.Bytes, which says so.
//
// # Backends
//
// PosixShm (/dev/shm/NAME, mode 0600, created O_EXCL), Memfd (anonymous;
// hand the fd to another process by inheritance or SCM_RIGHTS) and MmapFile
// (a regular file; survives the processes) all map MAP_SHARED. Close unmaps
// and closes; Destroy also removes the name. GPU memory is a tier kind
// of the buffer pool (bufferpool/tier, cuda.go behind -tags cuda), not a
// backend here.
//
// # Allocator
//
// A binary buddy allocator with 64-byte minimum blocks (see alloc.go for
// why buddy). Alloc returns zeroed memory. Free, Bytes and every container
// operation validate each offset they meet: segment id, bounds, alignment
// for the block order, header magic, sizes against the block. Bad input
// yields ErrInvalidPointer or ErrCorrupt, never a panic or a wild access;
// loops over shared structures are bounded by stored lengths or table
// sizes, so planted cycles cannot hang a reader. Validation catches garbage,
// not forgery: a process that can write the segment can build a well-formed
// lie, so peers that must not trust each other get separate segments.
//
// # Locks and waiters
//
// Each lock is a 32-bit word in shared memory: 0 when free, else the owner's
// pid, with bit 31 set once a waiter may be asleep. Acquire is one CAS;
// under contention a waiter spins a bounded number of times (yielding the
// processor: these nodes may have two cores), then sets the waiter bit and
// sleeps with FUTEX_WAIT on the word (shared futex, not FUTEX_PRIVATE).
// Release swaps in 0 and issues FUTEX_WAKE only if the waiter bit was set.
//
// Lock order: a container's lock, then the allocator lock. No operation
// holds two container locks, and no lock is held while waiting on a ring.
//
// # A process that dies holding a lock
//
// Waiters sleep in slices of 20 ms; after each they check the owner pid
// with kill(pid, 0). If the owner no longer exists, one waiter takes the
// lock over with a CAS from the exact value it saw (so exactly one wins) and
// carries on; the allocator counts these in Stats.LockRecoveries. What the
// dead owner was changing may be half done: container and allocator
// operations validate what they read and report ErrCorrupt rather than act
// on it, and Segment.Check verifies the whole heap. A lock word that holds
// an impossible pid is ErrCorrupt; a lock held by a live process longer
// than Options.LockTimeout (default 5 s) is ErrLockTimeout, so a hostile or
// stuck peer cannot hang the daemon. All processes sharing a segment must
// share a pid namespace; a recycled pid looks alive until the lock timeout.
//
// # Ring
//
// Producers never lock and never block beyond their timeout (ErrFull); the
// consumer spins for Ring.Spin, then sleeps on a futex word with a waiter
// flag so producers only make the FUTEX_WAKE system call when the consumer
// is really asleep; producers waiting on a full ring are woken the same way
// by the consumer. A producer that dies between claiming and publishing a
// slot stalls the ring (the consumer times out): give each untrusted peer
// its own ring. See ring.go for the protocol.
package shm
