package omni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Registry records assimilated datasets in a directory: <name>.json holds
// the Entry and <name>.schema.json the schema. Writes go through a
// temporary file and rename, so a reader sees the old or the new entry,
// never half of one. A Registry is safe for concurrent use by processes
// on one host (last writer of a name wins).
type Registry struct {
	Dir string
}

// Entry is one assimilated dataset.
type Entry struct {
	Name        string    `json:"name"`
	Source      string    `json:"source"` // absolute path of the file or store
	Format      string    `json:"format"`
	Size        int64     `json:"size"`     // of Source when assimilated
	ModTime     time.Time `json:"mod_time"` // of Source when assimilated
	Assimilated time.Time `json:"assimilated"`
	Eager       bool      `json:"eager,omitempty"` // every chunk was read at assimilation
	Variables   int       `json:"variables"`
	Bytes       int64     `json:"bytes"`                    // raw size of all fixed-size variables
	Filter      string    `json:"dataset_filter,omitempty"` // from a job file
	RangeOff    int64     `json:"range_off,omitempty"`
	RangeSize   int64     `json:"range_size,omitempty"`
	Job         string    `json:"job,omitempty"`
}

// Range is the job's byte range and dataset_filter the entry's views apply.
func (e Entry) Range() Range { return Range{Off: e.RangeOff, Size: e.RangeSize, Filter: e.Filter} }

// ValidName reports a usable dataset name: one path component, no dot first.
func ValidName(name string) bool {
	return validName(name) && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "\x00")
}

// Add records e and its schema, replacing an entry of the same name.
func (r Registry) Add(e Entry, ds *Dataset) error {
	if !ValidName(e.Name) {
		return fmt.Errorf("dataset name %q: %w", e.Name, ErrInvalid)
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return err
	}
	schema, err := ds.Schema()
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(r.Dir, e.Name+".schema.json"), schema); err != nil {
		return err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(r.Dir, e.Name+".json"), append(b, '\n'))
}

// Get returns the entry name.
func (r Registry) Get(name string) (Entry, error) {
	if !ValidName(name) {
		return Entry{}, fmt.Errorf("dataset name %q: %w", name, ErrInvalid)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, name+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return Entry{}, fmt.Errorf("dataset %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("registry entry %s: %w: %v", name, ErrCorrupt, err)
	}
	return e, nil
}

// Schema returns the recorded schema of name.
func (r Registry) Schema(name string) (*Dataset, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("dataset name %q: %w", name, ErrInvalid)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, name+".schema.json"))
	if err != nil {
		return nil, err
	}
	return DecodeSchema(b)
}

// List returns every entry, sorted by name; unreadable entries are skipped.
func (r Registry) List() ([]Entry, error) {
	des, err := os.ReadDir(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || strings.HasSuffix(name, ".schema") || !ValidName(name) {
			continue
		}
		if e, err := r.Get(name); err == nil {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Remove forgets name.
func (r Registry) Remove(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("dataset name %q: %w", name, ErrInvalid)
	}
	err := os.Remove(filepath.Join(r.Dir, name+".json"))
	os.Remove(filepath.Join(r.Dir, name+".schema.json"))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dataset %s: %w", name, ErrNotFound)
	}
	return err
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// DefaultRegistryDir is where assimilated datasets are recorded:
// $IOWARP_STATE_DIR/omni, else /var/lib/iowarp/omni for root, else
// $XDG_STATE_HOME/iowarp/omni (~/.local/state/iowarp/omni).
func DefaultRegistryDir() string {
	if d := os.Getenv("IOWARP_STATE_DIR"); d != "" {
		return filepath.Join(d, "omni")
	}
	if os.Geteuid() == 0 {
		return "/var/lib/iowarp/omni"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "iowarp", "omni")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "iowarp", "omni")
}
