package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/iowarp/iowarp/internal/unixsock"
)

// Request is one call in the request ring. Offsets are byte offsets from
// the start of the segment; a zero length means no buffer.
type Request struct {
	Tag    uint64 // chosen by the client, echoed in the Completion
	Module uint32 // module id (runtime registry)
	Method uint32 // method id within the module
	ArgOff uint64
	InOff  uint64
	OutOff uint64
	ArgLen uint32
	Flags  uint32 // reserved, must be 0
	InLen  uint64
	OutLen uint64
}

// Completion answers one Request.
type Completion struct {
	Tag  uint64
	Code uint32 // runtime.Code of the error; 0 = success
	_    uint32
	// N is the number of bytes written at the start of the output buffer:
	// the result, or on error the error message.
	N     uint64
	Value uint64 // the method's scalar result (ErrShortBuffer: size needed)
}

// Limits of the protocol.
const (
	// MaxArgs bounds a request's encoded arguments.
	MaxArgs = 64 << 10
	// RingSize is the number of slots of each ring, and so the most
	// requests a client may have outstanding.
	RingSize = 256
	// DefaultSegmentSize is the segment a client gets unless it asks for
	// another size (between MinSegmentSize and the server's maximum).
	DefaultSegmentSize = 64 << 20
	MinSegmentSize     = 1 << 20
	// DefaultMaxSegmentSize is the largest segment a server hands out.
	DefaultMaxSegmentSize = 1 << 30

	helloMagic   = 0x50495749 // "IWIP"
	helloVersion = 2
	helloLen     = 24
	welcomeLen   = 32

	rootReq = "req"
	rootCQ  = "cq"
)

// Handshake status codes.
const (
	statusOK uint32 = iota
	statusDenied
	statusBadHello
	statusBusy
	statusError
)

// Errors of the transport, matched with errors.Is.
var (
	// ErrDaemonGone: the daemon died or closed the connection; calls in
	// flight and later calls fail with it.
	ErrDaemonGone = errors.New("ipc: daemon connection lost")
	// ErrRefused: the daemon refused the handshake (wrong user, too many
	// clients, bad version).
	ErrRefused = errors.New("ipc: connection refused by daemon")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("ipc: client closed")
	// ErrStalled: a call got no completion (or no slot) within the
	// client's CallTimeout. The daemon may still be working on it, so
	// the connection is given up (it fails like ErrDaemonGone, which it
	// wraps): no later completion can land in a buffer the caller reused.
	ErrStalled = fmt.Errorf("ipc: daemon did not answer in time: %w", ErrDaemonGone)
)

// DefaultCallTimeout bounds how long a call waits for its completion.
const DefaultCallTimeout = 2 * time.Minute

// SocketPath is the ipc socket of the daemon serving mount (absolute; ""
// for a daemon without a mount) in dir ("" = the per-user default
// directory): the control socket's name with ".ipc" for ".sock"
// (unixsock.Path).
func SocketPath(dir, mount string) string {
	return unixsock.Path(dir, mount, ".ipc")
}

type hello struct {
	magic, version uint32
	size           uint64
	flags          uint64 // helloNoSpin; other bits must be 0
}

// helloNoSpin asks the daemon's poller of this client to sleep on the
// futex at once instead of spinning first (DialOptions.DaemonSleeps).
const helloNoSpin = 1 << 0

func (h hello) encode() []byte {
	b := make([]byte, helloLen)
	binary.LittleEndian.PutUint32(b[0:], h.magic)
	binary.LittleEndian.PutUint32(b[4:], h.version)
	binary.LittleEndian.PutUint64(b[8:], h.size)
	binary.LittleEndian.PutUint64(b[16:], h.flags)
	return b
}

func decodeHello(b []byte) (hello, error) {
	if len(b) != helloLen {
		return hello{}, fmt.Errorf("hello of %d bytes", len(b))
	}
	h := hello{binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]),
		binary.LittleEndian.Uint64(b[16:])}
	if h.magic != helloMagic || h.version != helloVersion {
		return hello{}, fmt.Errorf("hello magic %#x version %d", h.magic, h.version)
	}
	if h.flags&^helloNoSpin != 0 {
		return hello{}, fmt.Errorf("hello flags %#x", h.flags)
	}
	return h, nil
}

type welcome struct {
	magic, status uint32
	id, size      uint64
	pid           uint64
}

func (w welcome) encode() []byte {
	b := make([]byte, welcomeLen)
	binary.LittleEndian.PutUint32(b[0:], w.magic)
	binary.LittleEndian.PutUint32(b[4:], w.status)
	binary.LittleEndian.PutUint64(b[8:], w.id)
	binary.LittleEndian.PutUint64(b[16:], w.size)
	binary.LittleEndian.PutUint64(b[24:], w.pid)
	return b
}

func decodeWelcome(b []byte) (welcome, error) {
	if len(b) != welcomeLen {
		return welcome{}, fmt.Errorf("welcome of %d bytes", len(b))
	}
	w := welcome{binary.LittleEndian.Uint32(b[0:]), binary.LittleEndian.Uint32(b[4:]),
		binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])}
	if w.magic != helloMagic {
		return welcome{}, fmt.Errorf("welcome magic %#x", w.magic)
	}
	return w, nil
}

// span checks that [off, off+n) lies inside [lo, hi) without overflow.
func span(off, n, lo, hi uint64) bool {
	if n == 0 {
		return true
	}
	return off >= lo && off <= hi && n <= hi-off
}

// shmHeapStart is where a segment's heap begins (shm's header page): no
// buffer a client names may start before it.
const shmHeapStart = 4096
