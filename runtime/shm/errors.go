package shm

import "errors"

var (
	// ErrCorrupt means a structure in shared memory failed validation: a bad
	// magic number, an offset out of bounds or misaligned, a length larger
	// than its buffer. Every value read from a segment is checked, so another
	// process scribbling on the segment yields this error, not a crash.
	ErrCorrupt = errors.New("shm: corrupt shared structure")

	// ErrNoSpace means the allocator has no free block large enough.
	ErrNoSpace = errors.New("shm: no space in segment")

	// ErrInvalidPointer means a Pointer does not name a live allocation of
	// this segment (wrong segment, out of bounds, misaligned, not allocated,
	// already freed).
	ErrInvalidPointer = errors.New("shm: invalid pointer")

	// ErrBadType means a container element type is not allowed in shared
	// memory (it holds pointers, slices, strings, maps, interfaces, or has
	// size zero), or does not match the type the container was made with.
	ErrBadType = errors.New("shm: type not usable in shared memory")

	// ErrLockTimeout means a lock in shared memory stayed held by a live
	// process longer than the configured lock timeout.
	ErrLockTimeout = errors.New("shm: lock wait timed out")

	// ErrFull means a ring has no free slot (and the wait, if any, timed out).
	ErrFull = errors.New("shm: ring full")

	// ErrTimeout means a wait for a ring entry timed out.
	ErrTimeout = errors.New("shm: wait timed out")

	// ErrEmpty means a container or ring has no element to remove.
	ErrEmpty = errors.New("shm: empty")

	// ErrOutOfRange means an index is outside a container.
	ErrOutOfRange = errors.New("shm: index out of range")

	// ErrNotSupported means the backend is not available in this build.
	ErrNotSupported = errors.New("shm: not supported")
)
