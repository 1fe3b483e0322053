package view

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/sys"
)

// staging is a memfd mapped shared: a helper decodes a block straight
// into it (ReadTo), the daemon copies the pages into the pool from the
// mapping.
type staging struct {
	f   *os.File
	mem []byte
}

// maxIdleStaging bounds the staging memfds kept for reuse.
const maxIdleStaging = 2

// stagingPool recycles staging memfds. Safe for concurrent use.
type stagingPool struct {
	mu   sync.Mutex
	idle []*staging
}

// get returns a staging area of at least n bytes.
func (s *stagingPool) get(n int64) (*staging, error) {
	s.mu.Lock()
	for i, st := range s.idle {
		if int64(len(st.mem)) >= n {
			s.idle = append(s.idle[:i], s.idle[i+1:]...)
			s.mu.Unlock()
			return st, nil
		}
	}
	s.mu.Unlock()
	f, err := sys.MemfdCreate("omni-staging")
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(n); err != nil {
		f.Close()
		return nil, fmt.Errorf("staging memfd of %d bytes: %w", n, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map staging memfd of %d bytes: %w", n, err)
	}
	return &staging{f: f, mem: mem}, nil
}

// put gives st back, or frees it when enough are idle.
func (s *stagingPool) put(st *staging) {
	s.mu.Lock()
	if len(s.idle) < maxIdleStaging {
		s.idle = append(s.idle, st)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	st.close()
}

func (st *staging) close() {
	unix.Munmap(st.mem)
	st.f.Close()
}

// close frees every idle staging area.
func (s *stagingPool) close() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, st := range idle {
		st.close()
	}
}

// groupsOf returns the supplementary groups of thread tid (nil when it
// is gone: the request then runs with its uid and gid alone).
func groupsOf(tid uint32) []uint32 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(tid)) + "/status")
	if err != nil {
		return nil
	}
	var out []uint32
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("Groups:")); ok {
			for _, f := range bytes.Fields(v) {
				if g, err := strconv.ParseUint(string(f), 10, 32); err == nil {
					out = append(out, uint32(g))
				}
			}
		}
	}
	return out
}
