package tier

import (
	"bytes"
	"errors"
	"testing"
)

// scratchKind is a kind registered by the test: file segments in a
// directory, not persistent (no journal).
type scratchKind struct{}

func (scratchKind) Name() string   { return "scratch-test" }
func (scratchKind) Traits() Traits { return Traits{Dir: DirRequired} }
func (scratchKind) Open(name, dir string) (Backend, error) {
	return scratchBackend{dir: dir}, nil
}

type scratchBackend struct{ dir string }

func (s scratchBackend) NewSegment(label string) (*Segment, error) {
	return newFileSegment(s.dir, sanitize(label))
}
func (scratchBackend) Close() error { return nil }

func TestRegistry(t *testing.T) {
	if got := Kinds(); len(got) < 2 || got[0] != KindRAM || got[len(got)-1] != KindFile {
		t.Fatalf("kinds %v", got)
	}
	if tr, ok := TraitsOf(KindFile); !ok || !tr.Persistent || tr.Dir != DirRequired || tr.Memory {
		t.Fatalf("file traits %+v %v", tr, ok)
	}
	if tr, ok := TraitsOf(KindRAM); !ok || tr.Persistent || tr.Dir != DirNone || !tr.Memory {
		t.Fatalf("ram traits %+v %v", tr, ok)
	}
	if _, err := Open("scratch-test", "s", t.TempDir()); !errors.Is(err, ErrUnknownKind) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("unregistered kind: %v", err)
	}
	if err := Register(scratchKind{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unregister("scratch-test") })
	if err := Register(scratchKind{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second registration: %v", err)
	}
	if _, err := Open("scratch-test", "s", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no dir: %v", err)
	}
	d, err := Open("scratch-test", "s", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Kind() != "scratch-test" || d.Traits().Persistent {
		t.Fatalf("device %s %+v", d.Kind(), d.Traits())
	}
	if _, err := d.OpenJournal(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("journal on a kind without one: %v", err)
	}
	s, err := d.NewSegment("x")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WriteAt([]byte("hello"), 4096); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if err := s.ReadAt(buf, 4096); err != nil || !bytes.Equal(buf, []byte("hello")) {
		t.Fatalf("read %q %v", buf, err)
	}
}
