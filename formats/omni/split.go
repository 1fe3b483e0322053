package omni

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Subset returns a dataset holding v and the coordinate variables of its
// axes, in its root group, for a flat writer to write v alone (long form
// with coordinate columns), and the ReadFunc reading them through read
// (by their paths in ds).
func Subset(ds *Dataset, v *Variable, read ReadFunc) (*Dataset, ReadFunc) {
	sub := NewDataset(ds.Path, ds.Format)
	orig := map[string]*Variable{}
	add := func(x *Variable) *Variable {
		c := *x
		c.Path = JoinPath("/", c.Name)
		orig[c.Path] = x
		sub.Root.Variables = append(sub.Root.Variables, &c)
		return &c
	}
	add(v)
	for i := range v.Dims {
		d := &Dimension{Name: v.Dims[i], Size: v.Shape[i]}
		if c, err := ds.Coord(v, i); err == nil && c.Path != v.Path && sub.Root.Variable(c.Name) == nil {
			d.Coord = add(c).Path
		}
		sub.Root.AddDim(d)
	}
	return sub, func(x *Variable) ([]byte, error) {
		if o, ok := orig[x.Path]; ok {
			return read(o)
		}
		return nil, fmt.Errorf("variable %s: %w", x.Path, ErrNotFound)
	}
}

// WriteSplit writes every variable of ds as its own file of drv's format
// (a flat one: CSV, Parquet) under dir: dir/<group path>/<name><ext>,
// the model's (escaped) names, each with the coordinate columns of its
// axes. It returns the files written.
func WriteSplit(drv Driver, dir string, ds *Dataset, read ReadFunc) ([]string, error) {
	if drv.Write == nil {
		return nil, fmt.Errorf("format %s cannot be written: %w", drv.Name, ErrNotSupported)
	}
	ext := "." + drv.Name
	if len(drv.Exts) > 0 {
		ext = drv.Exts[0]
	}
	var out []string
	for _, v := range ds.Variables() {
		rel := strings.TrimPrefix(v.Path, "/") + ext
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return out, err
		}
		sub, subRead := Subset(ds, v, read)
		if err := drv.Write(p, sub, subRead); err != nil {
			return out, fmt.Errorf("%s: %w", v.Path, err)
		}
		out = append(out, p)
	}
	return out, nil
}
