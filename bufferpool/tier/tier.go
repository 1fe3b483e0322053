package tier

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The built-in kinds (ram_linux.go, file_linux.go); the buffer pool's
// KindRAM/KindFile have the same values.
const (
	KindRAM  = "ram"
	KindFile = "file"
)

// ErrInvalid reports a bad device configuration.
var ErrInvalid = errors.New("tier: invalid argument")

// Device is one tier: a Backend of a registered Kind. Safe for
// concurrent use.
type Device struct {
	kind Kind
	name string
	dir  string
	b    Backend
	inst *instance // a backend with an instance directory: that directory
}

// instanced is a backend with an instance directory (file_linux.go).
type instanced interface{ instance() *instance }

// Open returns the device of the registered kind called kind (KindRAM,
// KindFile, ...) called name. A file device creates dir if needed, and
// its instance directory in it; it locks the instance directories of
// dead daemons it finds there (Stale).
func Open(kind, name, dir string) (*Device, error) {
	k, ok := Lookup(kind)
	if !ok {
		return nil, fmt.Errorf("tier %s: unknown kind %q (known: %s): %w", name, kind,
			strings.Join(Kinds(), ", "), errors.Join(ErrInvalid, ErrUnknownKind))
	}
	if k.Traits().Dir == DirRequired && dir == "" {
		return nil, fmt.Errorf("tier %s: %s tier needs a directory: %w", name, kind, ErrInvalid)
	}
	b, err := k.Open(name, dir)
	if err != nil {
		return nil, err
	}
	d := &Device{kind: k, name: name, dir: dir, b: b}
	if in, ok := b.(instanced); ok {
		d.inst = in.instance()
	}
	return d, nil
}

// Stale lists the instance directories of dead daemons that Open found
// (and locked) in a persistent tier's directory, for the owner to replay
// and Remove.
func (d *Device) Stale() []*Stale {
	if j, ok := d.b.(Journaled); ok {
		return j.Stale()
	}
	return nil
}

// OpenJournal creates the journal of this process's instance
// (persistent tiers only).
func (d *Device) OpenJournal() (*Journal, error) {
	j, ok := d.b.(Journaled)
	if !ok {
		return nil, fmt.Errorf("tier %s: journal on a %s tier: %w", d.name, d.kind.Name(), ErrInvalid)
	}
	return j.OpenJournal()
}

// Close closes the backend: a file tier removes its instance directory
// (every segment must be closed) and releases stale directories nobody
// removed.
func (d *Device) Close() error { return d.b.Close() }

// Stale is the instance directory of a dead daemon, locked by this
// process until Remove (or Close of the device).
type Stale struct {
	in *instance
	// Bytes is what its files take on disk.
	Bytes int64

	mu   sync.Mutex
	done bool
}

// Dir is the directory.
func (s *Stale) Dir() string { return s.in.dir }

// Started is when the dead daemon started (UnixNano, from the name).
func (s *Stale) Started() int64 {
	_, start, _ := strings.Cut(strings.TrimPrefix(filepath.Base(s.in.dir), instancePrefix), "-")
	n, _ := strconv.ParseInt(start, 10, 64)
	return n
}

// ReadJournal reads and parses the directory's journal (no journal: no
// records). rest is the bytes of a torn or corrupt tail left unread.
func (s *Stale) ReadJournal() (recs []Record, rest int, err error) {
	path := filepath.Join(s.in.dir, journalName)
	if _, err := os.Lstat(path); err == nil && !ownedPrivate(path) {
		return nil, 0, fmt.Errorf("journal %s is not private to this user: ignored: %w", path, ErrCorrupt)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read journal in %s: %w", s.in.dir, err)
	}
	recs, rest = ParseJournal(b)
	return recs, rest, nil
}

// ReadSegment fills buf from offset off of the segment file called name;
// bytes past its end read as zero, as in a live segment. A segment file
// that is gone is an error.
func (s *Stale) ReadSegment(name string, off int64, buf []byte) error {
	if name == "" || name != filepath.Base(name) || name == lockName || name == journalName {
		return fmt.Errorf("segment %q: %w", name, ErrCorrupt)
	}
	f, err := os.Open(filepath.Join(s.in.dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(buf, off)
	if err == io.EOF {
		clear(buf[n:])
		return nil
	}
	if err != nil {
		return fmt.Errorf("read segment %s at %d: %w", name, off, err)
	}
	return nil
}

// Remove deletes the directory and its files.
func (s *Stale) Remove() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	return s.in.remove()
}

// release unlocks the directory, leaving it for a later daemon.
func (s *Stale) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done = true
		s.in.lock.Close()
	}
}

// Name is the tier name.
func (d *Device) Name() string { return d.name }

// Kind is the name of the device's kind (KindRAM, KindFile, ...).
func (d *Device) Kind() string { return d.kind.Name() }

// Traits are the traits of the device's kind.
func (d *Device) Traits() Traits { return d.kind.Traits() }

// Dir is the directory of a tier that has one ("" for RAM).
func (d *Device) Dir() string { return d.dir }

// NewSegment creates an empty segment; label names it for debugging
// (memfd name, or part of the file name).
func (d *Device) NewSegment(label string) (*Segment, error) {
	return d.b.NewSegment(label)
}

// sanitize keeps a label usable inside a file name.
func sanitize(label string) string {
	if len(label) > 32 {
		label = label[:32]
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, label)
}
