package omni

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
)

// Errors of the model and its parsers, matched with errors.Is.
var (
	// ErrNotFound: no such variable, group, dimension or attribute.
	ErrNotFound = errors.New("not found")
	// ErrNotSupported: a valid file or request using a feature iowarp does not handle.
	ErrNotSupported = errors.New("not supported")
	// ErrInvalid: a malformed path, selection, schema or job file.
	ErrInvalid = errors.New("invalid")
	// ErrCorrupt: the file's bytes contradict its own format.
	ErrCorrupt = errors.New("corrupt file")
)

// Dataset is one file (or store) seen through the OMNI model.
type Dataset struct {
	Path   string `json:"path"`   // the file the dataset was read from
	Format string `json:"format"` // hdf5, netcdf3, netcdf4, zarr, csv, jsonl, parquet
	Root   *Group `json:"root"`
}

// Group is a node of the dataset tree. Compound HDF5 datasets are groups
// with Compound set, their fields being the group's variables.
type Group struct {
	Name      string       `json:"name"` // "" for the root
	Path      string       `json:"path"` // "/" for the root, else "/a/b"
	NXClass   string       `json:"nx_class,omitempty"`
	Compound  bool         `json:"compound,omitempty"`
	Attrs     []Attribute  `json:"attrs,omitempty"`
	Dims      []*Dimension `json:"dims,omitempty"`
	Variables []*Variable  `json:"variables,omitempty"`
	Groups    []*Group     `json:"groups,omitempty"`

	// idx finds children by name (built at the first lookup; rebuilt
	// when Groups or Variables changed length or an entry moved), so
	// that looking up each of N children costs N, not N².
	idx atomic.Pointer[groupIndex]
}

type groupIndex struct {
	groups map[string]*Group
	vars   map[string]*Variable
	ng, nv int
}

// index returns g's current index of children.
func (g *Group) index() *groupIndex {
	if x := g.idx.Load(); x != nil && x.ng == len(g.Groups) && x.nv == len(g.Variables) {
		return x
	}
	x := &groupIndex{groups: make(map[string]*Group, len(g.Groups)), vars: make(map[string]*Variable, len(g.Variables)),
		ng: len(g.Groups), nv: len(g.Variables)}
	for _, c := range g.Groups {
		if _, dup := x.groups[c.Name]; !dup {
			x.groups[c.Name] = c
		}
	}
	for _, v := range g.Variables {
		if _, dup := x.vars[v.Name]; !dup {
			x.vars[v.Name] = v
		}
	}
	g.idx.Store(x)
	return x
}

// SubGroup returns the child group called name, or nil.
func (g *Group) SubGroup(name string) *Group {
	c := g.index().groups[name]
	if c != nil && c.Name != name { // an entry was replaced in place
		g.idx.Store(nil)
		c = g.index().groups[name]
	}
	return c
}

// Variable returns the variable of g called name, or nil.
func (g *Group) Variable(name string) *Variable {
	v := g.index().vars[name]
	if v != nil && v.Name != name {
		g.idx.Store(nil)
		v = g.index().vars[name]
	}
	return v
}

// Dimension is a named axis declared in a group and visible below it.
type Dimension struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Coord     string `json:"coord,omitempty"` // path of the coordinate variable, "" if none
}

// Variable is an N-D array. Shape is empty for a scalar.
type Variable struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"` // "/group/name"
	DType   DType       `json:"dtype"`
	Shape   []int64     `json:"shape"`
	Dims    []string    `json:"dims"` // one name per axis
	Chunks  []int64     `json:"chunks,omitempty"`
	Filters []string    `json:"filters,omitempty"` // deflate, shuffle, fletcher32, zlib, ...
	Attrs   []Attribute `json:"attrs,omitempty"`
	// External: the data lives in other files (HDF5 external storage
	// or a virtual dataset), read with the reader's permissions; views
	// do not share such data between users.
	External bool `json:"external,omitempty"`
}

// NewDataset returns a dataset with an empty root group.
func NewDataset(path, format string) *Dataset {
	return &Dataset{Path: path, Format: format, Root: &Group{Path: "/"}}
}

// Child returns the child group name of g, creating it.
func (g *Group) Child(name string) *Group {
	if c := g.SubGroup(name); c != nil {
		return c
	}
	c := &Group{Name: name, Path: JoinPath(g.Path, name)}
	g.Groups = append(g.Groups, c)
	if x := g.idx.Load(); x != nil && x.ng == len(g.Groups)-1 {
		// Keep the index (building a group is not concurrent with
		// lookups in it): N children cost N, not N rebuilds.
		x.groups[name], x.ng = c, len(g.Groups)
	}
	return c
}

// AddVariable appends v to g, setting its Path.
func (g *Group) AddVariable(v *Variable) *Variable {
	v.Path = JoinPath(g.Path, v.Name)
	g.Variables = append(g.Variables, v)
	if x := g.idx.Load(); x != nil && x.nv == len(g.Variables)-1 {
		if _, dup := x.vars[v.Name]; !dup {
			x.vars[v.Name] = v
		}
		x.nv = len(g.Variables)
	}
	return v
}

// AddDim declares d in g, replacing a dimension of the same name.
func (g *Group) AddDim(d *Dimension) *Dimension {
	for i, old := range g.Dims {
		if old.Name == d.Name {
			g.Dims[i] = d
			return d
		}
	}
	g.Dims = append(g.Dims, d)
	return d
}

// JoinPath joins a group path and a name.
func JoinPath(dir, name string) string {
	if dir == "" || dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// cleanPath makes p absolute and clean ("a/b" → "/a/b").
func cleanPath(p string) string {
	return path.Clean("/" + p)
}

// Walk calls fn for every group, parents first.
func (ds *Dataset) Walk(fn func(g *Group)) {
	var walk func(g *Group)
	walk = func(g *Group) {
		fn(g)
		for _, c := range g.Groups {
			walk(c)
		}
	}
	if ds.Root != nil {
		walk(ds.Root)
	}
}

// Variables returns every variable of the dataset, in tree order.
func (ds *Dataset) Variables() []*Variable {
	var out []*Variable
	ds.Walk(func(g *Group) { out = append(out, g.Variables...) })
	return out
}

// Group returns the group at path p.
func (ds *Dataset) Group(p string) (*Group, error) {
	p = cleanPath(p)
	g := ds.Root
	if p == "/" {
		return g, nil
	}
	for _, part := range strings.Split(p[1:], "/") {
		next := g.SubGroup(part)
		if next == nil {
			return nil, fmt.Errorf("group %s: %w", p, ErrNotFound)
		}
		g = next
	}
	return g, nil
}

// Var returns the variable at path p ("temperature" is "/temperature"),
// or the variable of an omitted attribute's value (AttrVar).
func (ds *Dataset) Var(p string) (*Variable, error) {
	if strings.Contains(p, attrSep) {
		if v, ok := ds.attrVar(p); ok {
			return v, nil
		}
	}
	p = cleanPath(p)
	dir, name := path.Split(p)
	g, err := ds.Group(dir)
	if err != nil {
		return nil, fmt.Errorf("variable %s: %w", p, ErrNotFound)
	}
	if v := g.Variable(name); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("variable %s: %w", p, ErrNotFound)
}

// Dim resolves the dimension name as seen from the group at path from:
// the nearest declaration walking up to the root.
func (ds *Dataset) Dim(from, name string) (*Dimension, error) {
	for p := cleanPath(from); ; p = path.Dir(p) {
		if g, err := ds.Group(p); err == nil {
			for _, d := range g.Dims {
				if d.Name == name {
					return d, nil
				}
			}
		}
		if p == "/" {
			return nil, fmt.Errorf("dimension %s: %w", name, ErrNotFound)
		}
	}
}

// Coord returns the coordinate variable of axis i of v, if any: the
// dimension's declared Coord, else a 1-D variable named like the dimension
// in v's group or above (the NetCDF convention).
func (ds *Dataset) Coord(v *Variable, i int) (*Variable, error) {
	if i < 0 || i >= len(v.Dims) {
		return nil, fmt.Errorf("axis %d of %s: %w", i, v.Path, ErrNotFound)
	}
	dir := path.Dir(v.Path)
	if d, err := ds.Dim(dir, v.Dims[i]); err == nil && d.Coord != "" {
		return ds.Var(d.Coord)
	}
	for p := dir; ; p = path.Dir(p) {
		if c, err := ds.Var(JoinPath(p, v.Dims[i])); err == nil && len(c.Shape) == 1 && c.Shape[0] == v.Shape[i] {
			return c, nil
		}
		if p == "/" {
			return nil, fmt.Errorf("coordinate of %s axis %s: %w", v.Path, v.Dims[i], ErrNotFound)
		}
	}
}

// Attr returns the attribute name of attrs.
func Attr(attrs []Attribute, name string) (Attribute, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attribute{}, false
}

// AttrString returns the string attribute name, or "".
func AttrString(attrs []Attribute, name string) string {
	a, ok := Attr(attrs, name)
	if !ok {
		return ""
	}
	return a.String()
}

// Len is the number of elements of v (1 for a scalar).
func (v *Variable) Len() int64 { return NumElements(v.Shape) }

// NumElements is the product of shape (1 for a scalar).
func NumElements(shape []int64) int64 {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	return n
}
