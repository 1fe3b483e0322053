package omni

import (
	"fmt"
	"strconv"
)

// CoordReader reads a whole coordinate variable as raw bytes.
type CoordReader func(c *Variable) ([]byte, error)

// Select turns coordinate filters on v into a hyperslab: each filter names
// an axis (by dimension name or CF role, see AxisMatches) whose coordinate
// variable must be monotonic; the values in range become the index range.
// Axes without a filter are taken whole.
func (ds *Dataset) Select(v *Variable, filters []Filter, read CoordReader) (Hyperslab, error) {
	h := All(v.Shape)
	done := make([]bool, len(v.Shape))
	for _, f := range filters {
		i, c, err := ds.findAxis(v, f.Dim)
		if err != nil {
			return Hyperslab{}, err
		}
		if done[i] {
			return Hyperslab{}, fmt.Errorf("axis %s of %s filtered twice: %w", v.Dims[i], v.Path, ErrInvalid)
		}
		done[i] = true
		if c == nil {
			return Hyperslab{}, fmt.Errorf("dimension %s of %s has no coordinate variable: %w", v.Dims[i], v.Path, ErrNotFound)
		}
		start, count, err := ds.selectAxis(c, f, read)
		if err != nil {
			return Hyperslab{}, fmt.Errorf("select %s on %s: %w", f.Dim, v.Path, err)
		}
		h.Start[i], h.Count[i] = start, count
	}
	return h, nil
}

func (ds *Dataset) findAxis(v *Variable, name string) (int, *Variable, error) {
	for i := range v.Dims {
		c, _ := ds.Coord(v, i)
		if AxisMatches(v, i, c, name) {
			return i, c, nil
		}
	}
	return 0, nil, fmt.Errorf("%s has no axis %q (dims %v): %w", v.Path, name, v.Dims, ErrNotFound)
}

func (ds *Dataset) selectAxis(c *Variable, f Filter, read CoordReader) (int64, int64, error) {
	lo, hi, hiOpen, err := f.Bounds(c)
	if err != nil {
		return 0, 0, err
	}
	raw, err := read(c)
	if err != nil {
		return 0, 0, err
	}
	values, err := Float64s(c.DType, raw)
	if err != nil {
		return 0, 0, err
	}
	if int64(len(values)) != c.Len() {
		return 0, 0, fmt.Errorf("coordinate %s: %d values for %d elements: %w", c.Path, len(values), c.Len(), ErrCorrupt)
	}
	return SelectRange(values, lo, hi, hiOpen)
}

// Resolve resolves a parsed view on the dataset: dir is the group the name
// was looked up in. It returns the variable and the hyperslab to read.
func (ds *Dataset) Resolve(dir string, view View, read CoordReader) (*Variable, Hyperslab, error) {
	v, err := ds.Var(JoinPath(cleanPath(dir), view.Var))
	if err != nil {
		return nil, Hyperslab{}, err
	}
	switch {
	case view.Filters != nil:
		h, err := ds.Select(v, view.Filters, read)
		return v, h, err
	default:
		h, err := view.Hyperslab(v.Shape)
		return v, h, err
	}
}

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }
