package omni

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names in the model are path components: every name a format stores
// (group, variable, dimension, attribute) goes through EscapeName when the
// file is opened (OpenFile), so that any name is reachable under
// `.omni/`, in view names and in schema.json (JSON strings cannot carry
// invalid UTF-8), and none collides with the entries the views add.
//
// The encoding, reversible (UnescapeName) and canonical (one encoded form
// per name):
//
//   - '%', '/', NUL, the view syntax '[', ']', '@', '=', ',' and every byte
//     of an invalid UTF-8 sequence become %XX (two upper-case hex digits);
//   - the empty name is "%", "." is "%2E" and ".." is "%2E%2E";
//   - a name equal to an entry the views add to a group ("attrs",
//     "schema.json") has its first byte escaped: "%61ttrs", "%73chema.json".
//
// Any other name, the usual case, is itself. Exports write the stored
// names back (UnescapeName).

// reservedNames are the entries the views add to a group directory.
var reservedNames = map[string]bool{"attrs": true, "schema.json": true}

const nameEscapes = "%/[]@=,"

// EscapeName returns the model form of a stored name.
func EscapeName(s string) string {
	switch s {
	case "":
		return "%"
	case ".", "..":
		return strings.Repeat("%2E", len(s))
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r == 0 || r < utf8.RuneSelf && strings.IndexByte(nameEscapes, byte(r)) >= 0 {
			fmt.Fprintf(&b, "%%%02X", s[i])
			i++
			continue
		}
		b.WriteString(s[i : i+n])
		i += n
	}
	out := b.String()
	if reservedNames[s] {
		out = fmt.Sprintf("%%%02X", s[0]) + out[1:]
	}
	return out
}

// UnescapeName returns the stored name of a model name. A string that is
// no EscapeName result (a stray '%', "%41" for "A") is an error.
func UnescapeName(s string) (string, error) {
	if s == "%" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", fmt.Errorf("name %q: %% without two hex digits: %w", s, ErrInvalid)
		}
		x, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
			return "", fmt.Errorf("name %q: bad escape %q: %w", s, s[i:i+3], ErrInvalid)
		}
		b.WriteByte(byte(x))
		i += 2
	}
	out := b.String()
	if EscapeName(out) != s {
		return "", fmt.Errorf("name %q is not the escaped form of %q: %w", s, out, ErrInvalid)
	}
	return out, nil
}

// StoredName is UnescapeName for names known to come from EscapeName
// (the model's): a name that is not one is returned as it is.
func StoredName(s string) string {
	if out, err := UnescapeName(s); err == nil {
		return out
	}
	return s
}

// escapeNames returns ds with every name escaped (a copy: the reader
// keeps its own tree) and, for every variable whose path changed, the
// reader's path by model path; nil when no name needed escaping.
func escapeNames(ds *Dataset) (*Dataset, map[string]string) {
	changed := false
	ds.Walk(func(g *Group) {
		changed = changed || needsEscape(g.Name) || attrsNeedEscape(g.Attrs)
		for _, d := range g.Dims {
			changed = changed || needsEscape(d.Name)
		}
		for _, v := range g.Variables {
			changed = changed || needsEscape(v.Name) || attrsNeedEscape(v.Attrs)
			for _, d := range v.Dims {
				changed = changed || needsEscape(d)
			}
		}
	})
	if !changed {
		return ds, nil
	}
	paths := map[string]string{} // model path → reader path
	byRaw := map[string]string{} // reader path → model path
	out := &Dataset{Path: ds.Path, Format: ds.Format}
	out.Root = escapeGroup(ds.Root, "/", paths, byRaw)
	out.Walk(func(g *Group) {
		for _, d := range g.Dims {
			if d.Coord != "" {
				if p, ok := byRaw[d.Coord]; ok {
					d.Coord = p
				}
			}
		}
	})
	return out, paths
}

func needsEscape(s string) bool { return EscapeName(s) != s }

func attrsNeedEscape(as []Attribute) bool {
	for _, a := range as {
		if needsEscape(a.Name) {
			return true
		}
	}
	return false
}

func escapeAttrs(as []Attribute) []Attribute {
	if as == nil {
		return nil
	}
	out := make([]Attribute, len(as))
	for i, a := range as {
		a.Name = EscapeName(a.Name)
		out[i] = a
	}
	return out
}

func escapeGroup(g *Group, p string, paths, byRaw map[string]string) *Group {
	c := &Group{Name: g.Name, Path: p, NXClass: g.NXClass, Compound: g.Compound, Attrs: escapeAttrs(g.Attrs)}
	if p != "/" {
		c.Name = EscapeName(g.Name)
	}
	for _, d := range g.Dims {
		nd := *d
		nd.Name = EscapeName(d.Name)
		c.Dims = append(c.Dims, &nd)
	}
	for _, v := range g.Variables {
		nv := *v
		nv.Name = EscapeName(v.Name)
		nv.Path = JoinPath(p, nv.Name)
		nv.Attrs = escapeAttrs(v.Attrs)
		nv.Dims = make([]string, len(v.Dims))
		for i, d := range v.Dims {
			nv.Dims[i] = EscapeName(d)
		}
		if nv.Path != v.Path {
			paths[nv.Path] = v.Path
		}
		byRaw[v.Path] = nv.Path
		c.Variables = append(c.Variables, &nv)
	}
	for _, sub := range g.Groups {
		sp := JoinPath(p, EscapeName(sub.Name))
		if sp != sub.Path {
			paths[sp] = sub.Path
		}
		c.Groups = append(c.Groups, escapeGroup(sub, sp, paths, byRaw))
	}
	return c
}

// escapedReader shows a reader's dataset with escaped names and reads
// through the reader's own paths.
type escapedReader struct {
	Reader
	ds    *Dataset
	paths map[string]string
}

func (r *escapedReader) Dataset() *Dataset { return r.ds }

func (r *escapedReader) path(p string) string {
	if obj, name, ok := splitAttrPath(p); ok {
		if q, ok := r.paths[obj]; ok {
			obj = q
		}
		return ReaderAttrPath(obj, StoredName(name))
	}
	if q, ok := r.paths[p]; ok {
		return q
	}
	return p
}

func (r *escapedReader) ReadInto(p string, h Hyperslab, dst []byte) error {
	return r.Reader.ReadInto(r.path(p), h, dst)
}

func (r *escapedReader) ReadStrings(p string, h Hyperslab) ([]string, error) {
	return r.Reader.ReadStrings(r.path(p), h)
}

// EscapedReader returns r showing escaped names (r itself when no name
// needs escaping).
func EscapedReader(r Reader) Reader {
	// Always wrapped: attributes omitted later (CapAttrs) are read
	// through the path translation too.
	ds, paths := escapeNames(r.Dataset())
	return &escapedReader{Reader: r, ds: ds, paths: paths}
}

// attrSep joins an object's model path and an attribute's name in the
// path of the variable AttrVar makes: escaped names never hold '@'.
const attrSep = "/@"

// AttrVar returns the 1-D variable through which the omitted value of
// attribute name of the object (group or variable) at model path obj is
// read: path obj + "/@" + name, one dimension of a.Elems elements.
// Readers read it like any variable; Var resolves such paths.
func AttrVar(obj string, a Attribute) *Variable {
	p := strings.TrimSuffix(obj, "/") + attrSep + a.Name
	return &Variable{Name: "@" + a.Name, Path: p, DType: a.Type, Shape: []int64{a.Elems}, Dims: []string{"@" + a.Name}}
}

// splitAttrPath splits an AttrVar path into the object's path and the
// attribute's name.
func splitAttrPath(p string) (obj, name string, ok bool) {
	i := strings.LastIndex(p, attrSep)
	if i < 0 || strings.Contains(p[i+len(attrSep):], "/") {
		return "", "", false
	}
	obj = p[:i]
	if obj == "" {
		obj = "/"
	}
	return obj, p[i+len(attrSep):], true
}

// ReaderAttrPath is how a Reader is asked for an omitted attribute's
// value: ReadInto of the object's stored path, NUL, the attribute's
// stored name (NUL is in no stored name a format allows). Readers that
// hold no omitted attributes need not know it.
func ReaderAttrPath(obj, name string) string { return obj + "\x00" + name }

// SplitReaderAttrPath is the inverse of ReaderAttrPath.
func SplitReaderAttrPath(p string) (obj, name string, ok bool) {
	return strings.Cut(p, "\x00")
}

// attrVar resolves an AttrVar path in ds.
func (ds *Dataset) attrVar(p string) (*Variable, bool) {
	obj, name, ok := splitAttrPath(p)
	if !ok {
		return nil, false
	}
	var attrs []Attribute
	if g, err := ds.Group(obj); err == nil {
		attrs = g.Attrs
	} else if v, err := ds.Var(obj); err == nil {
		attrs = v.Attrs
	} else {
		return nil, false
	}
	a, ok := Attr(attrs, name)
	if !ok || a.Elems <= 0 || a.Type.IsString() {
		return nil, false
	}
	return AttrVar(obj, a), true
}

// ExportName is the name a writer gives a model name: the stored name
// (UnescapeName) where it is valid UTF-8 and a path component (no '/',
// NUL, empty, "." or ".."), else the escaped name itself, which is one.
func ExportName(name string) string {
	return WritableName(name, func(s string) bool {
		return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00") && utf8.ValidString(s)
	})
}

// WritableName is the stored name of a model name where the format's
// rule ok accepts it, else the escaped name (HDF5 links may be ".." or
// invalid UTF-8; Zarr keys and NetCDF names may not).
func WritableName(name string, ok func(string) bool) string {
	if s := StoredName(name); ok(s) {
		return s
	}
	return name
}

// ColumnName is the name of a table column (a CSV header, a Parquet
// field) for a model name: the stored name where it is valid UTF-8
// (any such string is a column name: "", "..", "a/b"), else the escaped.
func ColumnName(name string) string { return WritableName(name, utf8.ValidString) }
