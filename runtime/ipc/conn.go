package ipc

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/shm"
)

// pollSlice bounds how long a poller sleeps before it re-checks whether its
// client is gone; completeWait bounds how long posting a completion may
// wait for room (an honest client always leaves room).
const (
	pollSlice    = 20 * time.Millisecond
	completeWait = 100 * time.Millisecond
	segLockWait  = 50 * time.Millisecond
)

// conn is the daemon's side of one client.
type conn struct {
	s    *Server
	id   uint64
	sock *net.UnixConn
	sess *runtime.Session
	size int64

	mem *shm.Memfd
	seg *shm.Segment
	buf []byte // the whole mapping
	rq  *shm.Ring[Request]
	cq  *shm.Ring[Completion]

	// inflight counts requests dequeued whose completion is not posted;
	// tasks tracks the goroutines that may still touch the mapping.
	inflight atomic.Int64
	tasks    sync.WaitGroup

	closing   atomic.Bool
	closeOnce sync.Once
	reasonMu  sync.Mutex
	reason    string
}

func (s *Server) newConn(id uint64, sock *net.UnixConn, cred *unix.Ucred, size int64) (*conn, error) {
	mem, err := shm.CreateMemfd(fmt.Sprintf("iowarp-ipc-%d", id), size)
	if err != nil {
		return nil, err
	}
	c := &conn{s: s, id: id, sock: sock, size: size, mem: mem, buf: mem.Bytes(),
		sess: runtime.NewSession(id, cred.Pid, cred.Uid, cred.Gid)}
	if err := c.format(); err != nil {
		mem.Close()
		return nil, fmt.Errorf("client %d segment: %w", id, err)
	}
	return c, nil
}

// format lays out the segment: header, then the two rings, then the arena.
func (c *conn) format() error {
	seg, err := shm.Format(c.mem, uint32(c.id), &shm.Options{LockTimeout: segLockWait})
	if err != nil {
		return err
	}
	c.seg = seg
	if c.rq, err = shm.NewRing[Request](seg, RingSize); err != nil {
		return err
	}
	if c.cq, err = shm.NewRing[Completion](seg, RingSize); err != nil {
		return err
	}
	spin := max(c.s.opts.Spin, 0)
	c.rq.Spin, c.cq.Spin = spin, spin
	if err := seg.SetRoot(rootReq, c.rq.Pointer()); err != nil {
		return err
	}
	return seg.SetRoot(rootCQ, c.cq.Pointer())
}

// watch blocks on the socket: the client never writes after the
// handshake, so EOF (it died or closed) or any byte ends the session.
func (c *conn) watch() {
	var b [64]byte
	n, err := c.sock.Read(b[:])
	switch {
	case n > 0:
		c.kill("wrote on the socket after the handshake")
	case err != nil && !errors.Is(err, net.ErrClosed):
		c.hangUp("hung up")
	default:
		c.hangUp("closed")
	}
}

// hangUp ends the session (idempotent); the poller notices within a slice.
func (c *conn) hangUp(reason string) {
	c.closeOnce.Do(func() {
		c.reasonMu.Lock()
		c.reason = reason
		c.reasonMu.Unlock()
		c.closing.Store(true)
		c.sock.Close()
	})
}

// kill disconnects a client that broke the protocol.
func (c *conn) kill(format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	if !c.closing.Load() {
		c.s.killed.Add(1)
		c.s.log.Warnf("client %d (pid %d): %s; disconnecting it", c.id, c.sess.PID, reason)
	}
	c.hangUp(reason)
}

// poll serves the request ring until the client goes.
func (c *conn) poll() {
	for !c.closing.Load() {
		req, err := c.rq.Dequeue(pollSlice)
		if errors.Is(err, shm.ErrTimeout) {
			continue
		}
		if err != nil {
			c.kill("request ring: %v", err)
			return
		}
		c.handle(req)
	}
}

// handle checks one request and runs it, inline if nothing is queued
// behind it, else on the worker pool.
func (c *conn) handle(req Request) {
	c.s.requests.Add(1)
	if n := c.inflight.Add(1) + int64(c.cq.Len()); n > int64(c.cq.Cap()) {
		c.kill("%d requests outstanding, at most %d", n, c.cq.Cap())
		c.inflight.Add(-1)
		return
	}
	t, err := c.task(req)
	if err != nil {
		c.s.badRequests.Add(1)
		c.complete(req, t, runtime.TaskResult{State: runtime.Failed, Err: err})
		return
	}
	c.tasks.Add(1)
	if c.rq.Len() == 0 {
		c.complete(req, t, c.s.rt.Exec(c.s.ctx, t))
		c.tasks.Done()
		return
	}
	c.s.rt.Go(t, func(res runtime.TaskResult) {
		c.complete(req, t, res)
		c.tasks.Done()
	})
}

// task validates req against the segment and the registry and builds the
// runtime task. On error the returned task still carries a usable Out (or
// none) for the error message.
func (c *conn) task(req Request) (*runtime.Task, error) {
	t := &runtime.Task{ModuleID: req.Module, MethodID: req.Method, ByID: true, Session: c.sess}
	lo, hi := uint64(shmHeapStart), uint64(len(c.buf))
	if span(req.OutOff, req.OutLen, lo, hi) {
		t.Out = c.region(req.OutOff, req.OutLen)
	}
	switch {
	case !span(req.OutOff, req.OutLen, lo, hi):
		return t, fmt.Errorf("output [%#x,+%d) outside the segment: %w", req.OutOff, req.OutLen, runtime.ErrInvalid)
	case !span(req.InOff, req.InLen, lo, hi):
		return t, fmt.Errorf("input [%#x,+%d) outside the segment: %w", req.InOff, req.InLen, runtime.ErrInvalid)
	case !span(req.ArgOff, uint64(req.ArgLen), lo, hi):
		return t, fmt.Errorf("arguments [%#x,+%d) outside the segment: %w", req.ArgOff, req.ArgLen, runtime.ErrInvalid)
	case req.ArgLen > MaxArgs:
		return t, fmt.Errorf("%d bytes of arguments, at most %d: %w", req.ArgLen, MaxArgs, runtime.ErrInvalid)
	case req.Flags != 0:
		return t, fmt.Errorf("flags %#x: %w", req.Flags, runtime.ErrInvalid)
	}
	if _, err := c.s.rt.Lookup(req.Module, req.Method); err != nil {
		return t, err
	}
	if req.ArgLen > 0 {
		// A private copy: the client may rewrite its buffer while the
		// module decodes.
		t.Args = append([]byte(nil), c.region(req.ArgOff, uint64(req.ArgLen))...)
	}
	t.In = c.region(req.InOff, req.InLen)
	return t, nil
}

// region is buf[off:off+n] with capacity capped, nil for n == 0. The caller
// checked the span.
func (c *conn) region(off, n uint64) []byte {
	if n == 0 {
		return nil
	}
	return c.buf[off : off+n : off+n]
}

// complete posts the completion of req. On error the message goes to the
// output buffer (as much as fits) unless the method already wrote there.
func (c *conn) complete(req Request, t *runtime.Task, res runtime.TaskResult) {
	defer c.inflight.Add(-1)
	comp := Completion{Tag: req.Tag, Code: runtime.Code(res.Err), Value: res.Value}
	n := uint64(max(res.N, 0))
	if t != nil && n > uint64(len(t.Out)) {
		n = uint64(len(t.Out))
	}
	comp.N = n
	if res.Err != nil && t != nil && n == 0 {
		comp.N = uint64(copy(t.Out, res.Err.Error()))
	}
	if c.closing.Load() {
		return
	}
	if err := c.cq.Enqueue(comp, completeWait); err != nil {
		c.kill("completion ring: %v", err)
	}
}

// teardown runs after the poller stopped: wait for the client's tasks,
// close its handles, record what its segment held and unmap it.
func (c *conn) teardown() {
	c.hangUp("server closing")
	c.tasks.Wait()
	handles := c.sess.Handles()
	if err := c.sess.Close(); err != nil {
		c.s.log.Warnf("client %d: closing handles: %v", c.id, err)
	}
	r := Reclaim{Client: c.id, PID: c.sess.PID, SegmentBytes: c.size, Handles: handles, At: time.Now()}
	c.reasonMu.Lock()
	r.Reason = c.reason
	c.reasonMu.Unlock()
	if st, err := c.seg.Stats(); err == nil {
		r.Allocations, r.Allocated = st.Allocations, st.Allocated
	}
	c.unmap()
	c.s.reclaimed.Add(1)
	c.s.mu.Lock()
	c.s.last = r
	c.s.mu.Unlock()
	c.s.remove(c) // last: Stats with no client show its reclaim
	c.s.log.Debugf("client %d (pid %d) %s: segment of %d bytes reclaimed (%d blocks live), %d handles closed",
		c.id, r.PID, r.Reason, r.SegmentBytes, r.Allocations, r.Handles)
}

func (c *conn) unmap() {
	if err := c.mem.Close(); err != nil {
		c.s.log.Warnf("client %d: unmap segment: %v", c.id, err)
	}
}
