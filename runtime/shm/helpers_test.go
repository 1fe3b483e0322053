package shm

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

var nameSeq atomic.Uint64

// uniqueName returns a /dev/shm name no other test run uses.
func uniqueName(t testing.TB) string {
	return fmt.Sprintf("iowarp-shm-test-%d-%d", os.Getpid(), nameSeq.Add(1))
}

// newMemfdSegment formats a fresh memfd segment that is closed at cleanup.
func newMemfdSegment(t testing.TB, size int64) *Segment {
	t.Helper()
	b, err := CreateMemfd("test", size)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Format(b, 7, nil)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return s
}

// newPosixSegment formats a named segment, destroyed at cleanup.
func newPosixSegment(t testing.TB, size int64) (*Segment, string) {
	t.Helper()
	name := uniqueName(t)
	b, err := CreatePosix(name, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Destroy() })
	s, err := Format(b, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, name
}

// memBackend is a Backend over ordinary Go memory, for fuzzing.
type memBackend struct{ b []byte }

func (m *memBackend) Kind() string   { return "mem" }
func (m *memBackend) Name() string   { return "mem" }
func (m *memBackend) Bytes() []byte  { return m.b }
func (m *memBackend) Close() error   { return nil }
func (m *memBackend) Destroy() error { return nil }

// newMemBackend returns 8-byte-aligned zeroed memory.
func newMemBackend(size int) *memBackend {
	words := make([]uint64, size/8)
	return &memBackend{b: sliceBytes(words)}
}

func mustCheck(t testing.TB, s *Segment) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
}
