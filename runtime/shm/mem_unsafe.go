package shm

// This file holds every use of package unsafe in shm: turning offsets of the
// mapping into *uint32/*uint64 for atomic operations, and viewing a
// pointer-free value as bytes to copy it in and out of shared memory.
// Callers validate offsets first; the index expressions below still bounds-
// check, so a missed validation is a clean panic in tests, not a wild write.

import (
	"sync/atomic"
	"unsafe"
)

// word32 returns the 4-byte-aligned word at off of mem.
func word32(mem []byte, off uint64) *uint32 {
	_ = mem[off+3]
	return (*uint32)(unsafe.Pointer(&mem[off]))
}

// word64 returns the 8-byte-aligned word at off of mem.
func word64(mem []byte, off uint64) *uint64 {
	_ = mem[off+7]
	return (*uint64)(unsafe.Pointer(&mem[off]))
}

func load32(mem []byte, off uint64) uint32     { return atomic.LoadUint32(word32(mem, off)) }
func store32(mem []byte, off uint64, v uint32) { atomic.StoreUint32(word32(mem, off), v) }
func load64(mem []byte, off uint64) uint64     { return atomic.LoadUint64(word64(mem, off)) }
func store64(mem []byte, off uint64, v uint64) { atomic.StoreUint64(word64(mem, off), v) }
func add64(mem []byte, off uint64, d uint64)   { atomic.AddUint64(word64(mem, off), d) }

// valueBytes views *v as its raw bytes. T must be pointer-free (checkType),
// so the bytes carry no reference the garbage collector needs to see.
func valueBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// sizeOf is the size of T in bytes.
func sizeOf[T any]() uint64 {
	var v T
	return uint64(unsafe.Sizeof(v))
}

// sliceBytes views the elements of a pointer-free slice as bytes.
func sliceBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), uintptr(len(s))*unsafe.Sizeof(s[0]))
}
