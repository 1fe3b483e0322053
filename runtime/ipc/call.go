package ipc

import (
	"errors"
	"fmt"
	"time"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/shm"
)

// reapSlice bounds one futex sleep of a waiting call, so that a dead
// daemon is noticed even if its hang-up raced with the sleep.
const reapSlice = 10 * time.Millisecond

// Method names a module method by the ids the daemon assigned.
type Method struct {
	Module, Method uint32
}

// Call is one request in flight. Wait for it exactly once.
type Call struct {
	c        *Client
	tag      uint64
	out      Span
	done     chan struct{}
	comp     Completion
	err      error
	deadline time.Time // zero: none (CallTimeout < 0)
	pos      uint64    // its position in the request ring (Taken)
}

// timer returns a channel that fires at the client's call deadline from
// start (nil without one) and its stop function.
func (c *Client) timer(start time.Time) (<-chan time.Time, func() bool) {
	if c.callTimeout <= 0 {
		return nil, func() bool { return false }
	}
	t := time.NewTimer(time.Until(start.Add(c.callTimeout)))
	return t.C, t.Stop
}

// stalled gives the connection up: no answer within CallTimeout.
func (c *Client) stalled(what string) {
	c.fail(fmt.Errorf("%s after %v: %w", what, c.callTimeout, ErrStalled))
}

// Resolve looks up a method by module and method name (admin.modules,
// fetched once per client).
func (c *Client) Resolve(module, method string) (Method, error) {
	mods, err := c.Modules()
	if err != nil {
		return Method{}, err
	}
	for i, m := range mods {
		if m.Name != module {
			continue
		}
		for j, name := range m.Methods {
			if name == method {
				return Method{uint32(i), uint32(j)}, nil
			}
		}
		return Method{}, fmt.Errorf("method %s.%s: %w", module, method, runtime.ErrNoMethod)
	}
	return Method{}, fmt.Errorf("module %s: %w", module, runtime.ErrNoModule)
}

// Modules lists the daemon's modules (cached after the first call).
func (c *Client) Modules() ([]runtime.ModuleInfo, error) {
	c.modMu.Lock()
	defer c.modMu.Unlock()
	if c.mods != nil {
		return c.mods, nil
	}
	out, err := c.Alloc(64 << 10)
	if err != nil {
		return nil, err
	}
	defer out.Free()
	res, err := c.Do(Method{runtime.AdminID, 2}, Span{}, Span{}, out.All())
	if err != nil {
		return nil, fmt.Errorf("list modules: %w", err)
	}
	mods, err := runtime.DecodeModules(out.Bytes()[:res.N])
	if err != nil {
		return nil, fmt.Errorf("list modules: %w", err)
	}
	c.mods = mods
	return mods, nil
}

// Do calls m and waits for the result.
func (c *Client) Do(m Method, args, in, out Span) (runtime.Result, error) {
	call, err := c.Start(m, args, in, out)
	if err != nil {
		return runtime.Result{}, err
	}
	return call.Wait()
}

// Start submits a call of m; the spans must stay untouched until Wait
// returns. It waits for a free slot when RingSize calls are outstanding.
func (c *Client) Start(m Method, args, in, out Span) (*Call, error) {
	var req Request
	var err error
	req.Module, req.Method = m.Module, m.Method
	var argLen uint64
	if req.ArgOff, argLen, err = args.offset(); err != nil {
		return nil, err
	}
	if argLen > MaxArgs {
		return nil, fmt.Errorf("%d bytes of arguments: %w", argLen, runtime.ErrInvalid)
	}
	req.ArgLen = uint32(argLen)
	if req.InOff, req.InLen, err = in.offset(); err != nil {
		return nil, err
	}
	if req.OutOff, req.OutLen, err = out.offset(); err != nil {
		return nil, err
	}
	return c.submit(req, out)
}

// StartRaw submits a request exactly as given (tests, fuzzing): no checks
// on this side.
func (c *Client) StartRaw(req Request) (*Call, error) {
	return c.submit(req, Span{})
}

// submit takes a slot, registers the call under a new tag and enqueues
// req; on failure it gives both back.
func (c *Client) submit(req Request, out Span) (*Call, error) {
	start := time.Now()
	expired, stop := c.timer(start)
	select {
	case c.slots <- struct{}{}:
		stop()
	case <-c.dead:
		stop()
		return nil, c.Err()
	case <-expired:
		c.stalled("no free slot")
		return nil, c.Err()
	}
	call := &Call{c: c, out: out, done: make(chan struct{})}
	if c.callTimeout > 0 {
		call.deadline = start.Add(c.callTimeout)
	}
	c.mu.Lock()
	c.nextTag++
	call.tag = c.nextTag
	c.pending[call.tag] = call
	c.mu.Unlock()
	req.Tag = call.tag
	var err error
	if call.pos, err = c.enqueue(req); err != nil {
		c.mu.Lock()
		delete(c.pending, call.tag)
		c.mu.Unlock()
		<-c.slots
		return nil, err
	}
	return call, nil
}

func (c *Client) enqueue(req Request) (pos uint64, err error) {
	c.mapMu.RLock()
	defer c.mapMu.RUnlock()
	if c.unmapped {
		return 0, ErrClosed
	}
	if err := c.Err(); err != nil {
		return 0, err
	}
	if pos, err = c.rq.EnqueuePos(req, time.Second); err != nil {
		return 0, fmt.Errorf("request ring: %w", err)
	}
	return pos, nil
}

// Taken reports whether the daemon has taken the call off the request
// ring: false while it waits there behind the calls the daemon is busy
// with (a task Pending). Taken, the daemon runs it at once where nothing
// waits behind it, else hands it to its worker pool, where it may still
// wait for a worker: the ring does not tell those apart. A completed call,
// or one of a closed client, is taken.
func (call *Call) Taken() bool {
	select {
	case <-call.done:
		return true
	default:
	}
	c := call.c
	c.mapMu.RLock()
	defer c.mapMu.RUnlock()
	if c.unmapped {
		return true
	}
	return c.rq.Consumed() > call.pos
}

// Wait blocks until the call completes and returns its result; a method's
// error comes back as the runtime sentinel of its code, wrapped with the
// daemon's message.
func (call *Call) Wait() (runtime.Result, error) {
	c := call.c
	var expired <-chan time.Time
	if !call.deadline.IsZero() {
		t := time.NewTimer(time.Until(call.deadline))
		defer t.Stop()
		expired = t.C
	}
	for {
		select {
		case <-call.done:
			return call.result()
		default:
		}
		if c.reap.TryLock() {
			c.reapUntil(call)
			c.reap.Unlock()
			select { // let a waiting goroutine take over the ring
			case c.leader <- struct{}{}:
			default:
			}
			return call.result()
		}
		select {
		case <-call.done:
			return call.result()
		case <-c.leader:
		case <-expired:
			c.stalled(fmt.Sprintf("no completion for call %d", call.tag))
			expired = nil // dead now: the next round fails the call
		case <-c.dead:
			// Whoever holds the ring fails every pending call, ours too.
			if c.reap.TryLock() {
				c.reapUntil(call)
				c.reap.Unlock()
			}
			<-call.done
			return call.result()
		}
	}
}

// Done is closed once the call completed.
func (call *Call) Done() <-chan struct{} { return call.done }

// Poll reports whether the call completed, first taking the completions
// the daemon posted so far when no other goroutine is reaping them. It
// never blocks (a dead connection fails the call, as Wait would).
func (call *Call) Poll() bool {
	select {
	case <-call.done:
		return true
	default:
	}
	c := call.c
	if c.reap.TryLock() {
		c.mapMu.RLock()
		c.drainLocked()
		if c.unmapped || c.Err() != nil {
			c.failAll()
		}
		c.mapMu.RUnlock()
		c.reap.Unlock()
	}
	select {
	case <-call.done:
		return true
	default:
		return false
	}
}

func (call *Call) result() (runtime.Result, error) {
	if call.err != nil {
		return runtime.Result{}, call.err
	}
	res := runtime.Result{N: int(call.comp.N), Value: call.comp.Value}
	if call.comp.Code == 0 {
		return res, nil
	}
	sentinel := runtime.CodeError(call.comp.Code)
	msg := ""
	if b := call.out.Bytes(); res.N > 0 && res.N <= len(b) {
		msg = string(b[:res.N])
	}
	res.N = 0
	if msg == "" {
		return res, sentinel
	}
	return res, &RemoteError{Msg: msg, Err: sentinel}
}

// RemoteError is a method's error as the daemon reported it: its message,
// and the runtime sentinel of its code (errors.Is works on it).
type RemoteError struct {
	Msg string
	Err error
}

func (e *RemoteError) Error() string { return e.Msg }
func (e *RemoteError) Unwrap() error { return e.Err }

// reapUntil consumes completions, delivering each to its call, until
// call is done or the connection is dead (then every pending call fails).
// The caller holds c.reap.
func (c *Client) reapUntil(call *Call) {
	c.mapMu.RLock()
	defer c.mapMu.RUnlock()
	for {
		select {
		case <-call.done:
			return
		default:
		}
		if c.unmapped || c.Err() != nil {
			c.drainLocked()
			c.failAll()
			return
		}
		comp, err := c.cq.Dequeue(reapSlice)
		switch {
		case err == nil:
			c.deliver(comp)
		case errors.Is(err, shm.ErrTimeout):
			if !call.deadline.IsZero() && time.Now().After(call.deadline) {
				c.stalled(fmt.Sprintf("no completion for call %d", call.tag))
			}
		default:
			c.fail(fmt.Errorf("completion ring: %w: %w", ErrDaemonGone, err))
		}
	}
}

// drainLocked delivers completions already posted before the daemon went.
func (c *Client) drainLocked() {
	if c.unmapped {
		return
	}
	for {
		comp, ok := c.cq.TryDequeue()
		if !ok {
			return
		}
		c.deliver(comp)
	}
}

func (c *Client) deliver(comp Completion) {
	c.mu.Lock()
	call := c.pending[comp.Tag]
	delete(c.pending, comp.Tag)
	c.mu.Unlock()
	if call == nil {
		return // not ours: a daemon bug or a replay; ignore
	}
	call.comp = comp
	close(call.done)
	<-c.slots
}

// failAll fails every pending call with the connection's error.
func (c *Client) failAll() {
	err := c.Err()
	c.mu.Lock()
	calls := c.pending
	c.pending = map[uint64]*Call{}
	c.mu.Unlock()
	for _, call := range calls {
		call.err = err
		close(call.done)
		<-c.slots
	}
}
