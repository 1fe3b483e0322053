package runtime

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// MaxHandles bounds the handles one session may hold open.
const MaxHandles = 4096

// Session is one client of the daemon (one connection of runtime/ipc):
// who it is and the handles it holds. Modules keep per-client state as
// handles, so that everything a client opened is closed when it goes away,
// however it goes. Safe for concurrent use.
type Session struct {
	ID  uint64
	PID int32
	UID uint32
	GID uint32

	mu      sync.Mutex
	next    uint64
	handles map[uint64]io.Closer
	closed  bool
}

// NewSession makes a session for a client with these credentials.
func NewSession(id uint64, pid int32, uid, gid uint32) *Session {
	return &Session{ID: id, PID: pid, UID: uid, GID: gid, handles: map[uint64]io.Closer{}}
}

// Open records c and returns its handle (never 0).
func (s *Session) Open(c io.Closer) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("session %d: %w", s.ID, ErrShutdown)
	}
	if len(s.handles) >= MaxHandles {
		return 0, fmt.Errorf("session %d: %d handles open: %w", s.ID, len(s.handles), ErrNoSpace)
	}
	s.next++
	s.handles[s.next] = c
	return s.next, nil
}

// Handle returns the object of handle h.
func (s *Session) Handle(h uint64) (io.Closer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.handles[h]
	if c == nil {
		return nil, fmt.Errorf("handle %d: %w", h, ErrInvalid)
	}
	return c, nil
}

// CloseHandle closes and forgets handle h.
func (s *Session) CloseHandle(h uint64) error {
	s.mu.Lock()
	c := s.handles[h]
	delete(s.handles, h)
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("handle %d: %w", h, ErrInvalid)
	}
	return c.Close()
}

// Handles is the number of open handles.
func (s *Session) Handles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.handles)
}

// Close closes every handle; later Opens fail.
func (s *Session) Close() error {
	s.mu.Lock()
	hs := s.handles
	s.handles = map[uint64]io.Closer{}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, c := range hs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
