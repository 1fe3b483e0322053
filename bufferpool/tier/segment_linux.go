package tier

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/sys"
)

// Segment is one bucket's sparse image on a device. Not safe for
// concurrent mutation; see the package comment.
type Segment struct {
	f    *os.File
	fd   int
	path string // file tier: the file to remove on Close

	// size is the physical file size as this Segment left it; bytes past
	// it read as zero.
	size int64

	// m is the RAM tier's mapping of the memfd (see mmap_linux.go); nil
	// for the file tier.
	m *mapping
}

func newMemfdSegment(name string) (*Segment, error) {
	f, err := sys.MemfdCreate(name)
	if err != nil {
		return nil, err
	}
	return &Segment{f: f, fd: int(f.Fd()), m: new(mapping)}, nil
}

func newFileSegment(dir, label string) (*Segment, error) {
	f, err := os.CreateTemp(dir, "seg-"+label+"-*")
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	return &Segment{f: f, fd: int(f.Fd()), path: f.Name()}, nil
}

// Name is the base name of a file-tier segment's file in the instance
// directory ("" for the RAM tier).
func (s *Segment) Name() string {
	if s.path == "" {
		return ""
	}
	return filepath.Base(s.path)
}

// Sync is fdatasync of the segment's file. Unlike the other methods it
// may run concurrently with anything, even after Close (then it returns
// an error wrapping os.ErrClosed).
func (s *Segment) Sync() error {
	if s.path == "" {
		return nil // RAM: nothing to make durable
	}
	raw, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("sync segment %s: %w", s.f.Name(), serr)
	}
	return nil
}

// Fd is the segment's file descriptor, owned by the Segment.
func (s *Segment) Fd() int { return s.fd }

// Size is the physical size of the segment.
func (s *Segment) Size() int64 { return s.size }

// ReadAt fills p from off; bytes past the end of the file read as zero.
func (s *Segment) ReadAt(p []byte, off int64) error {
	if s.m != nil && off >= 0 && off < s.size {
		valid := min(int64(len(p)), s.size-off)
		if s.m.readAt(p[:valid], off) {
			clear(p[valid:])
			return nil
		}
	}
	n, err := s.f.ReadAt(p, off)
	if err == io.EOF {
		clear(p[n:])
		return nil
	}
	if err != nil {
		return fmt.Errorf("read segment %s at %d: %w", s.f.Name(), off, err)
	}
	return nil
}

// WriteAt writes p at off.
func (s *Segment) WriteAt(p []byte, off int64) error {
	end := off + int64(len(p))
	if len(p) == 0 {
		return nil
	}
	if s.m != nil && end <= s.size && s.m.writeAt(p, off) {
		return nil
	}
	if _, err := s.f.WriteAt(p, off); err != nil {
		return fmt.Errorf("write segment %s at %d: %w", s.f.Name(), off, err)
	}
	s.size = max(s.size, end)
	if s.m != nil {
		s.m.wroteLocked(off, end)
		s.m.growLocked(s.fd, s.size)
	}
	return nil
}

var zeros [64 << 10]byte

// Punch releases [off, off+n): afterwards it reads as zero. Where the
// file system cannot punch holes, zeros are written instead.
func (s *Segment) Punch(off, n int64) error {
	if n <= 0 || off >= s.size {
		return nil
	}
	n = min(n, s.size-off)
	if s.m != nil {
		s.m.pages.clear(off, off+n)
	}
	err := sys.PunchHole(s.f, off, n)
	if err == nil || !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	for n > 0 {
		c := min(n, int64(len(zeros)))
		if _, err := s.f.WriteAt(zeros[:c], off); err != nil {
			return fmt.Errorf("zero segment %s at %d: %w", s.f.Name(), off, err)
		}
		off += c
		n -= c
	}
	return nil
}

// SealShrink makes the segment impossible to shrink, by anyone, from now
// on: it is about to be mapped by clients. It reports false where the
// segment cannot be sealed (a file-tier segment is not a memfd).
func (s *Segment) SealShrink() (bool, error) {
	if s.path != "" {
		return false, nil
	}
	if err := sys.SealShrink(s.f); err != nil {
		return false, err
	}
	return true, nil
}

// SetSize sets the file size.
func (s *Segment) SetSize(size int64) error {
	if size < 0 {
		return fmt.Errorf("segment size %d: %w", size, ErrInvalid)
	}
	if s.m != nil && size < s.size {
		s.m.shrinkLocked(size) // nothing may map what is about to go
	}
	if err := s.f.Truncate(size); err != nil {
		if s.m != nil {
			s.m.growLocked(s.fd, s.size)
		}
		return fmt.Errorf("truncate segment: %w", err)
	}
	s.size = size
	if s.m != nil {
		s.m.growLocked(s.fd, size)
	}
	return nil
}

// Grow extends the file to at least size bytes (sparse): a mapping of
// the segment then covers [0, size).
func (s *Segment) Grow(size int64) error {
	if size <= s.size {
		return nil
	}
	if err := s.f.Truncate(size); err != nil {
		return fmt.Errorf("grow segment: %w", err)
	}
	s.size = size
	if s.m != nil {
		s.m.growLocked(s.fd, size)
	}
	return nil
}

// Close unmaps and closes the fd, and removes the file of a file-tier
// segment.
func (s *Segment) Close() error {
	if s.m != nil {
		s.m.closeLocked()
	}
	err := s.f.Close()
	if s.path != "" {
		if rerr := os.Remove(s.path); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
