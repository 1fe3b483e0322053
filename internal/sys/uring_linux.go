package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// IoUringParams is struct io_uring_params (linux/io_uring.h): the caller
// fills Entries-side fields and Flags, the kernel the rest, including the
// offsets of the ring fields inside the mappings.
type IoUringParams struct {
	SqEntries    uint32
	CqEntries    uint32
	Flags        uint32
	SqThreadCPU  uint32
	SqThreadIdle uint32
	Features     uint32
	WqFd         uint32
	Resv         [3]uint32
	SqOff        IoSqringOffsets
	CqOff        IoCqringOffsets
}

// IoSqringOffsets is struct io_sqring_offsets.
type IoSqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// IoCqringOffsets is struct io_cqring_offsets.
type IoCqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// IoUringSetup creates an io_uring instance with room for entries
// submissions (io_uring_setup(2)); the fd is close-on-exec.
func IoUringSetup(entries uint32, p *IoUringParams) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// IoUringEnter submits toSubmit entries and, with IORING_ENTER_GETEVENTS in
// flags, waits until minComplete completions are posted (io_uring_enter(2)).
// It blocks in the kernel without holding a Go P (a normal Syscall).
func IoUringEnter(fd int, toSubmit, minComplete, flags uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit),
		uintptr(minComplete), uintptr(flags), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}
