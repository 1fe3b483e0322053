package tier

import (
	"fmt"
	"os"
	"path/filepath"
)

// The file kind: one sparse file per segment in this daemon's instance
// directory under the tier's directory (instance_linux.go), with a
// journal; the instances of dead daemons found at Open are Stale.

func init() { mustRegister(fileKind{}) }

type fileKind struct{}

func (fileKind) Name() string   { return KindFile }
func (fileKind) Traits() Traits { return Traits{Dir: DirRequired, Persistent: true} }

func (fileKind) Open(name, dir string) (Backend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tier %s: %w", name, err)
	}
	stale, err := findStale(dir)
	if err != nil {
		return nil, fmt.Errorf("tier %s: %w", name, err)
	}
	fb := &fileBackend{name: name}
	if fb.inst, err = newInstance(dir); err != nil {
		releaseAll(stale)
		return nil, fmt.Errorf("tier %s: %w", name, err)
	}
	for _, in := range stale {
		fb.stale = append(fb.stale, &Stale{in: in, Bytes: diskUsage(in.dir)})
	}
	return fb, nil
}

// fileBackend is an open file tier.
type fileBackend struct {
	name  string
	inst  *instance // this process's instance directory
	stale []*Stale  // instance directories of dead daemons
}

var _ Journaled = (*fileBackend)(nil)

func (f *fileBackend) NewSegment(label string) (*Segment, error) {
	return newFileSegment(f.inst.dir, sanitize(label))
}

func (f *fileBackend) instance() *instance { return f.inst }

func (f *fileBackend) Stale() []*Stale { return f.stale }

func (f *fileBackend) OpenJournal() (*Journal, error) {
	path := filepath.Join(f.inst.dir, journalName)
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("tier %s: %w", f.name, err)
	}
	return &Journal{path: path, f: fl}, nil
}

// Close removes the instance directory (every segment must be closed)
// and releases stale directories nobody removed.
func (f *fileBackend) Close() error {
	for _, s := range f.stale {
		s.release()
	}
	return f.inst.remove()
}
