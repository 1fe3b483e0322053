//go:build linux

package fuseuring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// HandlerFunc answers one FUSE request. in holds the request as /dev/fuse
// would deliver it (fuse_in_header, op header, payload), split in pieces;
// the reply (fuse_out_header, then the reply's arguments) is written into
// out, a byte stream over its pieces, and the number of bytes written is
// returned. go-fuse's (*fuse.ProtocolServer).HandleRequest has this shape.
// A HandlerFunc is called from the queue threads, concurrently.
type HandlerFunc func(in, out [][]byte) int

// opWrite is FUSE_WRITE: the only request whose payload the handler may
// read in place (it is the data); other payloads (names, xattr values) are
// copied out first because the reply is written over the same buffer.
const opWrite = 16

// entry is one ring entry: a header region and a payload buffer that the
// kernel fills with a request and reads the reply from.
type entry struct {
	hdr      []byte
	payload  []byte
	iov      [2]unix.Iovec
	commitID uint64
	lastCmd  uint32
}

// queue is one ring registered on a CPU's FUSE queue, served by one OS
// thread pinned to that CPU.
type queue struct {
	qid     int
	devFd   int
	evfd    int
	r       *ring
	ents    []entry
	mem     []byte // headers then payloads, one mapping
	handle  HandlerFunc
	scratch []byte
	served  *atomic.Uint64
	live    int // entries still registered with the kernel
}

const pollTag = ^uint64(0)

func newQueue(qid, devFd, depth, payload int, h HandlerFunc, served *atomic.Uint64) (*queue, error) {
	q := &queue{qid: qid, devFd: devFd, evfd: -1, handle: h, served: served}
	if err := q.alloc(depth, payload); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

func (q *queue) alloc(depth, payload int) error {
	var err error
	if q.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("queue %d: eventfd: %w", q.qid, err)
	}
	if q.r, err = newRing(uint32(depth+1), uint32(2*(depth+1))); err != nil {
		return fmt.Errorf("queue %d: %w", q.qid, err)
	}
	hdrs := depth * ringHeaderSize
	hdrs = (hdrs + 4095) &^ 4095
	q.mem, err = unix.Mmap(-1, 0, hdrs+depth*payload, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("queue %d: map buffers: %w", q.qid, err)
	}
	q.ents = make([]entry, depth)
	for i := range q.ents {
		e := &q.ents[i]
		e.hdr = q.mem[i*ringHeaderSize : (i+1)*ringHeaderSize]
		e.payload = q.mem[hdrs+i*payload : hdrs+(i+1)*payload]
		e.iov[0] = unix.Iovec{Base: &e.hdr[0]}
		e.iov[0].SetLen(len(e.hdr))
		e.iov[1] = unix.Iovec{Base: &e.payload[0]}
		e.iov[1].SetLen(len(e.payload))
	}
	q.scratch = make([]byte, payload)
	return nil
}

// pin binds the calling goroutine to its OS thread and that thread to the
// queue's CPU: the kernel puts a request on the queue of the CPU that made
// it, so the reply is produced on that CPU. The thread is never unlocked,
// so it exits with the goroutine instead of going back to Go's pool.
func (q *queue) pin() {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(q.qid)
	_ = unix.SchedSetaffinity(0, &set) // an offline CPU: serve unpinned
}

// register queues every entry with the kernel (FUSE_IO_URING_CMD_REGISTER)
// and a poll on the stop eventfd. A refused registration completes at once
// with its error, which is returned.
func (q *queue) register() error {
	for i := range q.ents {
		if err := q.prep(i, cmdRegister); err != nil {
			return err
		}
	}
	s, err := q.r.getSQE()
	if err != nil {
		return err
	}
	s.opcode, s.fd, s.opFlags, s.userData = opPollAdd, int32(q.evfd), unix.POLLIN, pollTag
	if err := q.r.submitAndWait(0); err != nil {
		return err
	}
	q.live = len(q.ents)
	// A request may already be here: the last queue to register makes
	// the ring ready and wakes the requests the kernel held back.
	var first error
	q.r.reap(func(c cqe) {
		if first != nil {
			return
		}
		if c.res < 0 && c.userData != pollTag {
			first = fmt.Errorf("queue %d: register: %w", q.qid, unix.Errno(-c.res))
			return
		}
		first = q.complete(c)
	})
	return first
}

// prep fills a URING_CMD entry for entry i: a registration (with the
// buffers) or the commit of its reply with the fetch of the next request.
func (q *queue) prep(i int, cmd uint32) error {
	e := &q.ents[i]
	s, err := q.r.getSQE()
	if err != nil {
		return err
	}
	s.opcode, s.fd, s.cmdOp, s.userData = opUringCmd, int32(q.devFd), cmd, uint64(i)
	c := s.cmdReq()
	c.qid = uint16(q.qid)
	if cmd == cmdRegister {
		s.addr, s.len = iovAddr(&e.iov), 2
	} else {
		c.commitID = e.commitID
	}
	e.lastCmd = cmd
	return nil
}

// errStopped ends a queue: Close, or the connection went away.
var errStopped = errors.New("fuse io_uring queue stopped")

// serve answers requests until the connection ends or Close is called.
func (q *queue) serve() error {
	for {
		if err := q.r.submitAndWait(1); err != nil {
			return fmt.Errorf("queue %d: %w", q.qid, err)
		}
		var err error
		q.r.reap(func(c cqe) {
			if err == nil {
				err = q.complete(c)
			}
		})
		if err != nil {
			if errors.Is(err, errStopped) {
				return nil
			}
			return err
		}
	}
}

// complete handles one completion: a request to answer, an entry the
// kernel gave back, or the stop poll.
func (q *queue) complete(c cqe) error {
	if c.userData == pollTag {
		return errStopped
	}
	i := int(c.userData)
	switch {
	case c.res == 0:
		q.answer(i)
		return q.prep(i, cmdCommitAndFetch)
	case c.res == -int32(unix.EAGAIN) || c.res == -int32(unix.EINTR):
		return q.prep(i, q.ents[i].lastCmd)
	case c.res == -int32(unix.ENOTCONN) || c.res == -int32(unix.ECANCELED):
		if q.live--; q.live == 0 {
			return errStopped
		}
		return nil
	default:
		return fmt.Errorf("queue %d entry %d: %w", q.qid, i, unix.Errno(-c.res))
	}
}

// answer runs the handler on the request in entry i and leaves the reply
// in the entry's header and payload.
func (q *queue) answer(i int) {
	e := &q.ents[i]
	h := headerOf(e.hdr)
	e.commitID = h.ent.commitID
	length := binary.LittleEndian.Uint32(h.inOut[0:4])
	opcode := binary.LittleEndian.Uint32(h.inOut[4:8])
	unique := binary.LittleEndian.Uint64(h.inOut[8:16])
	psz := int(h.ent.payloadSz)
	opLen := int(length) - inHeaderSize - psz
	n := 0
	if opLen >= 0 && opLen <= opInSize && psz <= len(e.payload) {
		payload := e.payload[:psz]
		if opcode != opWrite {
			payload = q.scratch[:copy(q.scratch, payload)]
		}
		in := [][]byte{h.inOut[:inHeaderSize], h.opIn[:opLen], payload}
		out := [][]byte{h.inOut[:outHeaderSize], e.payload}
		n = q.handle(in, out)
	}
	if n < outHeaderSize {
		writeOutHeader(h, unique, -int32(unix.EIO))
		n = outHeaderSize
	}
	binary.LittleEndian.PutUint64(h.inOut[8:16], unique)
	h.ent.payloadSz = uint32(n - outHeaderSize)
	q.served.Add(1)
}

func writeOutHeader(h *ringHeader, unique uint64, errno int32) {
	binary.LittleEndian.PutUint32(h.inOut[0:4], outHeaderSize)
	binary.LittleEndian.PutUint32(h.inOut[4:8], uint32(errno))
	binary.LittleEndian.PutUint64(h.inOut[8:16], unique)
}

// stop wakes the queue thread out of its wait (the eventfd poll).
func (q *queue) stop() {
	var one [8]byte
	binary.LittleEndian.PutUint64(one[:], 1)
	unix.Write(q.evfd, one[:])
}

func (q *queue) close() {
	if q.r != nil {
		q.r.close()
	}
	if q.mem != nil {
		unix.Munmap(q.mem)
		q.mem = nil
	}
	if q.evfd >= 0 {
		unix.Close(q.evfd)
		q.evfd = -1
	}
}
