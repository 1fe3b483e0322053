package tier

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Device kinds; the buffer pool's KindRAM/KindFile have the same values.
const (
	KindRAM  = "ram"
	KindFile = "file"
)

// ErrInvalid reports a bad device configuration.
var ErrInvalid = errors.New("tier: invalid argument")

// Device is one tier. Safe for concurrent use.
type Device struct {
	kind string
	name string
	dir  string // KindFile only
}

// Open returns the device of kind ("ram" or "file") called name. A file
// device creates dir if needed.
func Open(kind, name, dir string) (*Device, error) {
	d := &Device{kind: kind, name: name, dir: dir}
	switch kind {
	case KindRAM:
		return d, nil
	case KindFile:
		if dir == "" {
			return nil, fmt.Errorf("tier %s: file tier needs a directory: %w", name, ErrInvalid)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("tier %s: %w", name, err)
		}
		return d, nil
	default:
		return nil, fmt.Errorf("tier %s: unknown kind %q: %w", name, kind, ErrInvalid)
	}
}

// Name is the tier name.
func (d *Device) Name() string { return d.name }

// Kind is KindRAM or KindFile.
func (d *Device) Kind() string { return d.kind }

// Dir is the directory of a file tier ("" for RAM).
func (d *Device) Dir() string { return d.dir }

// NewSegment creates an empty segment; label names it for debugging
// (memfd name, or part of the file name).
func (d *Device) NewSegment(label string) (*Segment, error) {
	if d.kind == KindRAM {
		return newMemfdSegment(d.name + ":" + label)
	}
	return newFileSegment(d.dir, sanitize(label))
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
