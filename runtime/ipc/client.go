package ipc

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/shm"
)

// DialOptions tune a Client. Zero values pick defaults.
type DialOptions struct {
	SegmentSize int64         // default DefaultSegmentSize
	Spin        time.Duration // spin before sleeping on a completion; default shm.DefaultRingSpin; <0: none
	Timeout     time.Duration // for the handshake; default 5s
	// CallTimeout bounds each call's wait for a slot and for its
	// completion (ErrStalled); default DefaultCallTimeout, <0: none.
	CallTimeout time.Duration
	// DaemonSleeps asks the daemon not to spin waiting for this client's
	// requests but to sleep on the futex at once: each request then pays
	// a futex wake-up of the daemon, and the daemon burns no CPU for this
	// client (for clients that call rarely, and to measure that cost).
	DaemonSleeps bool
}

// Client is a process's connection to the daemon. Safe for concurrent use:
// any number of goroutines may issue calls at once, up to RingSize
// outstanding (more wait for a slot).
type Client struct {
	id        uint64
	daemonPid int
	sock      *net.UnixConn
	mem       *shm.Memfd
	seg       *shm.Segment
	rq        *shm.Ring[Request]
	cq        *shm.Ring[Completion]

	slots       chan struct{} // one token per outstanding call
	callTimeout time.Duration // <= 0: unbounded

	// mu guards pending and nextTag.
	mu      sync.Mutex
	pending map[uint64]*Call
	nextTag uint64

	// reap is held by the goroutine that consumes the completion ring;
	// leader is poked when it lets go.
	reap   sync.Mutex
	leader chan struct{}

	// mapMu is held shared by everything that touches the mapping and
	// exclusively by Close, which unmaps it.
	mapMu    sync.RWMutex
	unmapped bool

	dead     chan struct{}
	deadErr  atomic.Pointer[error]
	deadOnce sync.Once
	closed   atomic.Bool

	modMu sync.Mutex
	mods  []runtime.ModuleInfo
}

// Dial connects to the daemon at path and maps the segment it hands over.
func Dial(path string, opts DialOptions) (*Client, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.Spin == 0 {
		opts.Spin = shm.DefaultRingSpin
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	nc, err := net.DialTimeout("unix", path, opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w: %w", path, ErrDaemonGone, err)
	}
	sock := nc.(*net.UnixConn)
	c, err := handshake(sock, opts)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("connect %s: %w", path, err)
	}
	go c.watch()
	return c, nil
}

func handshake(sock *net.UnixConn, opts DialOptions) (*Client, error) {
	sock.SetDeadline(time.Now().Add(opts.Timeout))
	defer sock.SetDeadline(time.Time{})
	h := hello{magic: helloMagic, version: helloVersion, size: uint64(opts.SegmentSize)}
	if opts.DaemonSleeps {
		h.flags |= helloNoSpin
	}
	if err := sendFd(sock, h.encode(), nil); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	b, f, err := recvFd(sock, welcomeLen)
	if err != nil {
		return nil, fmt.Errorf("welcome: %w: %w", ErrDaemonGone, err)
	}
	w, err := decodeWelcome(b)
	if err == nil && w.status != statusOK {
		err = fmt.Errorf("status %d: %w", w.status, ErrRefused)
	}
	if err == nil && f == nil {
		err = errors.New("no segment attached to the welcome")
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, err
	}
	mem, err := shm.OpenMemfd(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &Client{id: w.id, daemonPid: int(w.pid), sock: sock, mem: mem, slots: make(chan struct{}, RingSize),
		pending: map[uint64]*Call{}, leader: make(chan struct{}, 1), dead: make(chan struct{}),
		callTimeout: opts.CallTimeout}
	if err := c.attach(opts.Spin); err != nil {
		mem.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) attach(spin time.Duration) error {
	seg, err := shm.Attach(c.mem, nil)
	if err != nil {
		return err
	}
	c.seg = seg
	open := func(name string) (shm.Pointer, error) { return seg.Root(name) }
	p, err := open(rootReq)
	if err != nil {
		return err
	}
	if c.rq, err = shm.OpenRing[Request](seg, p); err != nil {
		return err
	}
	if p, err = open(rootCQ); err != nil {
		return err
	}
	if c.cq, err = shm.OpenRing[Completion](seg, p); err != nil {
		return err
	}
	spin = max(spin, 0)
	c.rq.Spin, c.cq.Spin = spin, spin
	return nil
}

// ID is the id the daemon gave this client.
func (c *Client) ID() uint64 { return c.id }

// DaemonPid is the daemon's process id.
func (c *Client) DaemonPid() int { return c.daemonPid }

// Segment is the client's shared segment (for statistics and tests).
func (c *Client) Segment() *shm.Segment { return c.seg }

// watch blocks on the socket; the daemon never writes after the welcome,
// so any return means it closed the connection or died.
func (c *Client) watch() {
	var b [16]byte
	_, err := c.sock.Read(b[:])
	if c.closed.Load() {
		c.fail(ErrClosed)
		return
	}
	c.fail(fmt.Errorf("%w (%v)", ErrDaemonGone, err))
}

// fail marks the connection dead; every waiting and later call fails.
func (c *Client) fail(err error) {
	c.deadOnce.Do(func() {
		c.deadErr.Store(&err)
		close(c.dead)
	})
}

// Err is nil while the connection is usable, else why not.
func (c *Client) Err() error {
	if p := c.deadErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close hangs up. Calls in flight fail with ErrClosed; the daemon reclaims
// the segment. Buffers become invalid.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.fail(ErrClosed)
	err := c.sock.Close()
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	c.unmapped = true
	c.mem.Close()
	return err
}

// Buffer is a piece of the client's segment: data placed there crosses to
// the daemon without a copy. Not safe for concurrent Free.
type Buffer struct {
	c *Client
	p shm.Pointer
	b []byte
}

// Alloc returns a buffer of n bytes (zeroed) in the segment.
func (c *Client) Alloc(n int) (*Buffer, error) { return c.alloc(n, true) }

// AllocUninit is Alloc without the zeroing: the bytes are stale contents
// of this client's own segment. For buffers filled at once.
func (c *Client) AllocUninit(n int) (*Buffer, error) { return c.alloc(n, false) }

func (c *Client) alloc(n int, zero bool) (*Buffer, error) {
	c.mapMu.RLock()
	defer c.mapMu.RUnlock()
	if c.unmapped {
		return nil, ErrClosed
	}
	if n < 0 {
		return nil, fmt.Errorf("alloc %d bytes: %w", n, runtime.ErrInvalid)
	}
	allocate := c.seg.AllocUninit
	if zero {
		allocate = c.seg.Alloc
	}
	p, err := allocate(uint64(n))
	if err != nil {
		return nil, fmt.Errorf("segment of %d bytes: %w: %w", len(c.mem.Bytes()), runtime.ErrNoSpace, err)
	}
	b, err := c.seg.Bytes(p)
	if err != nil {
		return nil, err
	}
	return &Buffer{c: c, p: p, b: b[:n:n]}, nil
}

// Bytes is the buffer's memory (shared with the daemon).
func (b *Buffer) Bytes() []byte { return b.b }

// Len is the buffer's size.
func (b *Buffer) Len() int { return len(b.b) }

// Free returns the buffer to the segment. It must not be part of a call
// in flight. After Close it does nothing.
func (b *Buffer) Free() {
	if b == nil || b.p.IsNil() {
		return
	}
	b.c.mapMu.RLock()
	if !b.c.unmapped {
		b.c.seg.Free(b.p)
	}
	b.c.mapMu.RUnlock()
	b.p, b.b = shm.Pointer{}, nil
}

// Span names bytes [Off, Off+Len) of a buffer as a call's argument, input
// or output. The zero Span is no buffer.
type Span struct {
	Buf      *Buffer
	Off, Len int
}

// All spans a whole buffer (nil: none).
func (b *Buffer) All() Span {
	if b == nil {
		return Span{}
	}
	return Span{Buf: b, Len: len(b.b)}
}

// Slice spans b[off:off+n].
func (b *Buffer) Slice(off, n int) Span { return Span{Buf: b, Off: off, Len: n} }

// Bytes is the spanned memory.
func (s Span) Bytes() []byte {
	if s.Buf == nil {
		return nil
	}
	return s.Buf.b[s.Off : s.Off+s.Len]
}

// offset of the span in the segment, checked against its buffer.
func (s Span) offset() (uint64, uint64, error) {
	if s.Buf == nil || s.Len == 0 {
		return 0, 0, nil
	}
	if s.Off < 0 || s.Len < 0 || s.Off+s.Len > len(s.Buf.b) || s.Buf.p.IsNil() {
		return 0, 0, fmt.Errorf("span [%d,+%d) of a %d-byte buffer: %w", s.Off, s.Len, len(s.Buf.b), runtime.ErrInvalid)
	}
	return s.Buf.p.Offset + uint64(s.Off), uint64(s.Len), nil
}
