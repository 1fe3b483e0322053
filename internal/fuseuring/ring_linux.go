//go:build linux

// This file holds the unsafe part of the package: the io_uring rings are
// memory shared with the kernel, read and written through pointers.

package fuseuring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/sys"
)

// io_uring ABI (linux/io_uring.h).
const (
	setupCQSize    = 1 << 3  // IORING_SETUP_CQSIZE
	setupSQE128    = 1 << 10 // IORING_SETUP_SQE128: 128-byte SQEs, 80 bytes of command
	featSingleMmap = 1 << 0  // IORING_FEAT_SINGLE_MMAP
	enterGetEvents = 1 << 0  // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	opPollAdd  = 6  // IORING_OP_POLL_ADD
	opUringCmd = 46 // IORING_OP_URING_CMD

	sqeSize = 128 // with IORING_SETUP_SQE128
)

// sqe is a 128-byte struct io_uring_sqe, laid out for IORING_OP_URING_CMD
// (cmd_op in the off field, the command in the last 80 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	cmdOp       uint32 // union with off
	pad1        uint32
	addr        uint64
	len         uint32
	opFlags     uint32 // rw_flags, poll32_events, uring_cmd_flags
	userData    uint64
	bufIndex    uint16
	personality uint16
	fileIndex   int32
	cmd         [80]byte
}

// cqe is struct io_uring_cqe (16 bytes, no IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

var _ [sqeSize - unsafe.Sizeof(sqe{})]byte
var _ [unsafe.Sizeof(sqe{}) - sqeSize]byte

// ring is one io_uring instance. Not safe for concurrent use: each queue
// thread owns its ring.
type ring struct {
	fd             int
	sqMem, cqMem   []byte
	sqeMem         []byte
	sqHead, sqTail *uint32
	sqMask, sqN    uint32
	sqArray        unsafe.Pointer
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
	localTail      uint32
	cqShared       bool
}

// newRing sets up a ring with sqEntries submission and cqEntries completion
// slots, 128-byte SQEs (FUSE's commands need the 80-byte command area).
func newRing(sqEntries, cqEntries uint32) (*ring, error) {
	p := sys.IoUringParams{Flags: setupSQE128 | setupCQSize, CqEntries: cqEntries}
	fd, err := sys.IoUringSetup(sqEntries, &p)
	if err != nil {
		return nil, fmt.Errorf("io_uring_setup: %w", err)
	}
	r := &ring{fd: fd}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *sys.IoUringParams) error {
	sqLen := int(p.SqOff.Array + p.SqEntries*4)
	cqLen := int(p.CqOff.Cqes + p.CqEntries*uint32(unsafe.Sizeof(cqe{})))
	single := p.Features&featSingleMmap != 0
	if single {
		sqLen = max(sqLen, cqLen)
	}
	var err error
	if r.sqMem, err = mmapRing(r.fd, offSQRing, sqLen); err != nil {
		return err
	}
	if single {
		r.cqMem, r.cqShared = r.sqMem, true
	} else if r.cqMem, err = mmapRing(r.fd, offCQRing, cqLen); err != nil {
		return err
	}
	if r.sqeMem, err = mmapRing(r.fd, offSQEs, int(p.SqEntries)*sqeSize); err != nil {
		return err
	}
	sq, cq := unsafe.Pointer(&r.sqMem[0]), unsafe.Pointer(&r.cqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.SqOff.Head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.SqOff.Tail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.SqOff.RingMask))
	r.sqN = p.SqEntries
	r.sqArray = unsafe.Add(sq, p.SqOff.Array)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.CqOff.Head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.CqOff.Tail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.CqOff.RingMask))
	r.cqes = unsafe.Add(cq, p.CqOff.Cqes)
	r.localTail = atomic.LoadUint32(r.sqTail)
	return nil
}

func mmapRing(fd int, off int64, n int) ([]byte, error) {
	b, err := unix.Mmap(fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap io_uring region %#x: %w", off, err)
	}
	return b, nil
}

// errSQFull means every submission slot holds an unsubmitted entry; the
// queue sizes its ring so that this cannot happen.
var errSQFull = errors.New("io_uring submission queue full")

// getSQE returns the next free submission slot, zeroed, or errSQFull.
func (r *ring) getSQE() (*sqe, error) {
	head := atomic.LoadUint32(r.sqHead)
	if r.localTail-head >= r.sqN {
		return nil, errSQFull
	}
	idx := r.localTail & r.sqMask
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	s := (*sqe)(unsafe.Pointer(&r.sqeMem[int(idx)*sqeSize]))
	*s = sqe{}
	r.localTail++
	return s, nil
}

// submitAndWait hands the prepared entries to the kernel and waits until
// at least wait completions are posted (0: do not wait). EINTR (Go's
// preemption signals) is retried.
func (r *ring) submitAndWait(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.localTail)
	for {
		toSubmit := r.localTail - atomic.LoadUint32(r.sqHead)
		flags := uint32(0)
		if wait > 0 {
			flags = enterGetEvents
		}
		_, err := sys.IoUringEnter(r.fd, toSubmit, wait, flags)
		if err == nil {
			return nil
		}
		if err != unix.EINTR && err != unix.EAGAIN && err != unix.EBUSY {
			return fmt.Errorf("io_uring_enter: %w", err)
		}
		if wait == 0 && toSubmit == 0 {
			return nil
		}
	}
}

// reap calls fn on every posted completion and releases their slots.
func (r *ring) reap(fn func(c cqe)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := *(*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(cqe{})))
		fn(c)
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// close unmaps the rings and closes the instance; the kernel cancels the
// commands still queued on it.
func (r *ring) close() {
	for _, m := range [][]byte{r.sqeMem, r.sqMem} {
		if m != nil {
			unix.Munmap(m)
		}
	}
	if r.cqMem != nil && !r.cqShared {
		unix.Munmap(r.cqMem)
	}
	r.sqeMem, r.sqMem, r.cqMem = nil, nil, nil
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// headerOf views a FUSE ring entry's 288-byte header region.
func headerOf(b []byte) *ringHeader { return (*ringHeader)(unsafe.Pointer(&b[0])) }

// cmdReq views the 80-byte command area of a URING_CMD entry.
func (s *sqe) cmdReq() *uringCmdReq { return (*uringCmdReq)(unsafe.Pointer(&s.cmd[0])) }

// iovAddr is the address of an iovec array for an SQE's addr field; the
// array must stay reachable until the entry is submitted.
func iovAddr(iov *[2]unix.Iovec) uint64 { return uint64(uintptr(unsafe.Pointer(&iov[0]))) }
