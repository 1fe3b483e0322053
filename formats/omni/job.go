package omni

import (
	"bytes"
	"fmt"
	"math"
	"path"
	"slices"
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

// Range is a job's byte range (range_off, range_size; Size 0: to the end)
// with its dataset_filter, as an Entry records them.
type Range struct {
	Off, Size int64
	Filter    string
}

// IsZero reports a range that keeps everything.
func (r Range) IsZero() bool { return r.Off == 0 && r.Size == 0 }

// Cut is what a job's byte range keeps of a dataset. The upstream engine
// copies bytes [off, off+size) of a raw source; for an array format the
// bytes that mean something are those of a variable in C order, whose
// outermost axis is the only one whose slices are contiguous. So the range
// counts the bytes of one variable, the reference (the largest fixed-size
// variable with an axis that the dataset_filter keeps; the first of equal
// size), and keeps the records of its outermost dimension D whose first
// byte lies in the range: record i, of R bytes (the element size times the
// product of the other axes), is kept when off <= i*R < off+size. Ranges
// that follow each other ([0,S), [S,2S) ...) thus share no record and miss
// none, as upstream's byte ranges split a file. Every variable with an axis
// on D (its coordinate, the other variables of a NetCDF record dimension)
// is cut the same way, so coordinates stay aligned with the data, and D's
// size becomes the count kept.
type Cut struct {
	Var          string // path of the reference variable
	Dim          string // its outermost dimension's name
	Record       int64  // bytes of one record of the reference
	Start, Count int64  // the records of Dim kept
	stored       map[string]cutVar
}

type cutVar struct {
	v    *Variable // the variable as stored (before the cut)
	axes []int     // its axes on Dim
}

// ApplyRange cuts ds to the byte range r (Cut) and returns the cut, or
// nil when r keeps everything. A range in which no record starts, or past
// the reference's bytes, is an error (ErrInvalid) naming the record size.
func (ds *Dataset) ApplyRange(r Range) (*Cut, error) {
	if r.Off < 0 || r.Size < 0 {
		return nil, fmt.Errorf("range_off %d range_size %d: %w", r.Off, r.Size, ErrInvalid)
	}
	if r.IsZero() {
		return nil, nil
	}
	var ref *Variable
	var refBytes int64
	for _, v := range ds.Variables() {
		if len(v.Shape) == 0 || v.DType.Size() == 0 || !MatchesFilter(v.Path, r.Filter) {
			continue
		}
		if b := v.Len() * int64(v.DType.Size()); ref == nil || b > refBytes {
			ref, refBytes = v, b
		}
	}
	if ref == nil {
		return nil, fmt.Errorf("range_off/range_size: no fixed-size variable with an axis for the byte range to count: %w", ErrInvalid)
	}
	rec := int64(ref.DType.Size()) * NumElements(ref.Shape[1:])
	if rec == 0 {
		return nil, fmt.Errorf("range_off/range_size: %s (shape %v) has no bytes: %w", ref.Path, ref.Shape, ErrInvalid)
	}
	n := ref.Shape[0]
	start := (r.Off + rec - 1) / rec
	end := n
	if r.Size > 0 && r.Off <= math.MaxInt64-r.Size {
		end = min(n, (r.Off+r.Size+rec-1)/rec)
	}
	if start >= end {
		return nil, fmt.Errorf("range_off %d range_size %d: no record of %s starts there (%d records of %d bytes, shape %v): %w",
			r.Off, r.Size, ref.Path, n, rec, ref.Shape, ErrInvalid)
	}
	dimName := ""
	if len(ref.Dims) > 0 {
		dimName = ref.Dims[0]
	}
	c := &Cut{Var: ref.Path, Dim: dimName, Record: rec, Start: start, Count: end - start, stored: map[string]cutVar{}}
	dim, derr := ds.Dim(path.Dir(ref.Path), dimName)
	for _, v := range ds.Variables() {
		var axes []int
		if v == ref {
			axes = []int{0}
		} else if derr == nil {
			for i, name := range v.Dims {
				if i < len(v.Shape) && v.Shape[i] == n {
					if d, err := ds.Dim(path.Dir(v.Path), name); err == nil && d == dim {
						axes = append(axes, i)
					}
				}
			}
		}
		if len(axes) == 0 {
			continue
		}
		orig := *v
		orig.Shape = slices.Clone(v.Shape)
		c.stored[v.Path] = cutVar{v: &orig, axes: axes}
		for _, a := range axes {
			v.Shape[a] = c.Count
		}
	}
	if derr == nil {
		dim.Size = c.Count
	}
	return c, nil
}

// Stored maps the selection h of v, as the cut dataset shows v, to the
// variable as stored and the selection of it to read. A nil Cut, or a
// variable it does not cut, maps to itself.
func (c *Cut) Stored(v *Variable, h Hyperslab) (*Variable, Hyperslab) {
	if c == nil {
		return v, h
	}
	cv, ok := c.stored[v.Path]
	if !ok {
		return v, h
	}
	out := Hyperslab{Start: slices.Clone(h.Start), Count: h.Count, Stride: h.Stride}
	for _, a := range cv.axes {
		if a < len(out.Start) {
			out.Start[a] += c.Start
		}
	}
	return cv.v, out
}

// ReadAll reads the whole of v as the cut dataset shows it, with
// readAll reading a whole stored variable (raw form: EncodeStrings for
// strings): the stored variable is read and the cut kept, in memory. For
// small variables (coordinates); large ones should read their selection.
func (c *Cut) ReadAll(v *Variable, readAll func(*Variable) ([]byte, error)) ([]byte, error) {
	sv, h := c.Stored(v, All(v.Shape))
	raw, err := readAll(sv)
	if err != nil || sv == v {
		return raw, err
	}
	idx := flatIndices(sv.Shape, h)
	if sv.DType == String {
		ss, err := DecodeStrings(raw)
		if err != nil {
			return nil, err
		}
		if int64(len(ss)) != sv.Len() {
			return nil, fmt.Errorf("%s: %d strings for %d elements: %w", sv.Path, len(ss), sv.Len(), ErrCorrupt)
		}
		out := make([]string, len(idx))
		for i, j := range idx {
			out[i] = ss[j]
		}
		return EncodeStrings(out), nil
	}
	es := int64(sv.DType.Size())
	if int64(len(raw)) != sv.Len()*es {
		return nil, fmt.Errorf("%s: %d bytes for %d elements of %s: %w", sv.Path, len(raw), sv.Len(), sv.DType, ErrCorrupt)
	}
	out := make([]byte, 0, int64(len(idx))*es)
	for _, j := range idx {
		out = append(out, raw[j*es:(j+1)*es]...)
	}
	return out, nil
}

// flatIndices lists the C-order flat indices in shape of the elements h
// selects, in C order of h.
func flatIndices(shape []int64, h Hyperslab) []int64 {
	n := h.Len()
	out := make([]int64, 0, n)
	if n == 0 {
		return out
	}
	pos := make([]int64, len(shape))
	for {
		var flat int64
		for i := range shape {
			flat = flat*shape[i] + h.Start[i] + pos[i]*h.StrideAt(i)
		}
		out = append(out, flat)
		i := len(shape) - 1
		for ; i >= 0; i-- {
			if pos[i]++; pos[i] < h.Count[i] {
				break
			}
			pos[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}
