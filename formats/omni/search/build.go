package search

import (
	"math"
	"sort"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// maxCoordRead bounds the elements of a coordinate whose values are read
// for the filters; a longer one is left without values (its axis then
// matches no filter).
const maxCoordRead = 1 << 20

// CoordReader reads the raw values of a coordinate variable.
type CoordReader = omni.CoordReader

// Describe fills the documents of d from the schema ds: every variable of
// every group, and the values of their 1-D numeric coordinates read
// with read (a coordinate that fails to read is left without values).
func Describe(d *Dataset, ds *omni.Dataset, read CoordReader) {
	d.Format = ds.Format
	d.Text = attrText(ds.Root.Attrs, nil)
	coords := map[string]*omni.Variable{}
	ds.Walk(func(g *omni.Group) {
		for _, v := range g.Variables {
			describeVar(d, ds, v, coords)
		}
	})
	paths := make([]string, 0, len(coords))
	for p := range coords {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if c, ok := coordOfVar(coords[p], read); ok {
			d.Coords = append(d.Coords, c)
		}
	}
}

func coordOfVar(v *omni.Variable, read CoordReader) (Coord, bool) {
	c := Coord{Path: v.Path, Name: v.Name, Units: v.Units(), Calendar: v.Calendar(), StandardName: v.StandardName(), Axis: v.Axis()}
	if v.Len() > maxCoordRead || v.Len() == 0 || read == nil {
		return c, false
	}
	raw, err := read(v)
	if err != nil {
		return c, false
	}
	vals, err := omni.Float64s(v.DType, raw)
	if err != nil || int64(len(vals)) != v.Len() {
		return c, false
	}
	vals = finite(vals)
	if len(vals) == 0 {
		return c, false
	}
	sort.Float64s(vals)
	c.Min, c.Max = vals[0], vals[len(vals)-1]
	if len(vals) <= MaxCoordValues {
		c.Values = vals
	}
	return c, true
}

// finite drops NaN and infinite values (fill values decoded as NaN).
func finite(vals []float64) []float64 {
	out := vals[:0]
	for _, x := range vals {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out = append(out, x)
		}
	}
	return out
}

// attrText is the attribute names and string values, for the attrs field
// (at most maxAttrText bytes).
func attrText(attrs []omni.Attribute, skip map[string]bool) string {
	var b strings.Builder
	for _, a := range attrs {
		if skip[a.Name] || strings.HasPrefix(a.Name, "_") {
			continue
		}
		b.WriteString(a.Name)
		b.WriteByte(' ')
		if a.Type.IsString() && a.Omitted == 0 {
			b.WriteString(a.String())
			b.WriteByte(' ')
		}
		if b.Len() > maxAttrText {
			break
		}
	}
	return cut(b.String(), maxAttrText)
}

func describeVar(d *Dataset, ds *omni.Dataset, v *omni.Variable, coords map[string]*omni.Variable) {
	doc := Var{Path: v.Path, Name: v.Name, DType: string(v.DType), Dims: v.Dims, Shape: v.Shape,
		LongName: omni.AttrString(v.Attrs, omni.AttrLongName), StandardName: v.StandardName(), Units: v.Units(),
		Attrs: attrText(v.Attrs, map[string]bool{omni.AttrLongName: true, omni.AttrStandardName: true, omni.AttrUnits: true})}
	if len(v.Dims) != len(v.Shape) {
		doc.Dims = nil
		doc.Shape = nil
	}
	for i := range doc.Dims {
		c, err := ds.Coord(v, i)
		if err != nil || c == nil || len(c.Shape) != 1 || c.DType.Size() == 0 || c.DType.IsString() {
			doc.Coords = append(doc.Coords, "")
			continue
		}
		coords[c.Path] = c
		doc.Coords = append(doc.Coords, c.Path)
	}
	if len(doc.Coords) != len(doc.Dims) {
		doc.Coords = nil
	}
	d.Vars = append(d.Vars, doc)
}
