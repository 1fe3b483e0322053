package omni

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"gopkg.in/yaml.v3"
)

// Job is the upstream IOWarp OMNI job file (content-assimilation-engine):
//
//	name: climate
//	transfers:
//	  - src: file::/lustre/proj/run1.h5
//	    dst: iowarp::run1
//	    format: hdf5
//	    range_off: 0
//	    range_size: 0        # 0 = to the end
//	    dataset_filter: /temperature
type Job struct {
	Name      string     `yaml:"name"`
	Transfers []Transfer `yaml:"transfers"`
}

// Transfer is one source to assimilate.
type Transfer struct {
	Src           string `yaml:"src"`
	Dst           string `yaml:"dst"`
	Format        string `yaml:"format"`
	DependsOn     string `yaml:"depends_on"`
	RangeOff      int64  `yaml:"range_off"`
	RangeSize     int64  `yaml:"range_size"`
	DatasetFilter string `yaml:"dataset_filter"`
}

// ParseJob parses and checks a job file; unknown keys are errors.
func ParseJob(b []byte) (*Job, error) {
	var j Job
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("omni job: %w: %v", ErrInvalid, err)
	}
	if j.Name == "" || len(j.Transfers) == 0 {
		return nil, fmt.Errorf("omni job: needs a name and at least one transfer: %w", ErrInvalid)
	}
	for i, t := range j.Transfers {
		if t.Src == "" || t.RangeOff < 0 || t.RangeSize < 0 {
			return nil, fmt.Errorf("omni job: transfer %d: src missing or negative range: %w", i, ErrInvalid)
		}
		if _, err := t.SrcPath(); err != nil {
			return nil, fmt.Errorf("omni job: transfer %d: %w", i, err)
		}
	}
	return &j, nil
}

// SrcPath is the local path of Src ("file::/p", "file:///p" or "/p").
func (t Transfer) SrcPath() (string, error) {
	s := t.Src
	for _, p := range []string{"file::", "file://"} {
		if strings.HasPrefix(s, p) {
			return strings.TrimPrefix(s, p), nil
		}
	}
	if strings.Contains(s, "::") || strings.Contains(s, "://") {
		return "", fmt.Errorf("source %q: only local files: %w", s, ErrNotSupported)
	}
	return s, nil
}

// DstName is the dataset name Dst asks for ("iowarp::name" → name), "" if none.
func (t Transfer) DstName() string {
	_, name, ok := strings.Cut(t.Dst, "::")
	if !ok {
		return t.Dst
	}
	return name
}

// MatchesFilter reports whether the variable at path p is kept by a job's
// dataset_filter f: p matches the glob f, or lies under the group f. An
// empty filter keeps everything.
func MatchesFilter(p, f string) bool {
	if f == "" {
		return true
	}
	f = path.Clean("/" + f)
	ok, _ := path.Match(f, p)
	return ok || p == f || strings.HasPrefix(p, f+"/")
}

// KeepMatching drops the variables that the dataset_filter f does not keep
// (MatchesFilter).
func (ds *Dataset) KeepMatching(f string) {
	if f == "" {
		return
	}
	ds.Walk(func(g *Group) {
		kept := g.Variables[:0]
		for _, v := range g.Variables {
			if MatchesFilter(v.Path, f) {
				kept = append(kept, v)
			}
		}
		g.Variables = kept
		g.idx.Store(nil) // the index of children is rebuilt
	})
}
