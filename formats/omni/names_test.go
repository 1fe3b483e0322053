package omni

import (
	"testing"
	"unicode/utf8"
)

// TestEscapeName: every name becomes a path component that is neither a
// view-syntax character nor a synthetic entry, and comes back.
func TestEscapeName(t *testing.T) {
	cases := map[string]string{
		"temperature": "temperature", "": "%", ".": "%2E", "..": "%2E%2E", "/": "%2F", "a/b": "a%2Fb",
		"a[b]": "a%5Bb%5D", "x@y=z": "x%40y%3Dz", "a,b": "a%2Cb", "50%": "50%25", "\xff\xfe": "%FF%FE",
		"attrs": "%61ttrs", "schema.json": "%73chema.json", "attrs2": "attrs2", "ĺat": "ĺat", "nul\x00": "nul%00",
		"...": "...",
	}
	for in, want := range cases {
		got := EscapeName(in)
		if got != want {
			t.Errorf("EscapeName(%q) = %q, want %q", in, got, want)
		}
		if back, err := UnescapeName(got); err != nil || back != in {
			t.Errorf("UnescapeName(%q) = %q, %v, want %q", got, back, err, in)
		}
		if !utf8.ValidString(got) || !validName(got) {
			t.Errorf("%q is no valid path component", got)
		}
		if _, err := ParseView(got); err != nil {
			t.Errorf("ParseView(%q): %v", got, err)
		}
	}
	for _, bad := range []string{"%", "%4", "%41", "%zz", "a%2fb", "attrs%"} {
		if bad == "%" {
			continue
		}
		if got, err := UnescapeName(bad); err == nil {
			t.Errorf("UnescapeName(%q) = %q, want an error", bad, got)
		}
	}
}

// FuzzEscapeName: EscapeName is injective and UnescapeName inverts it.
func FuzzEscapeName(f *testing.F) {
	for _, s := range []string{"", ".", "..", "a/b", "\xff", "attrs", "%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := EscapeName(s)
		back, err := UnescapeName(e)
		if err != nil || back != s {
			t.Fatalf("%q → %q → %q, %v", s, e, back, err)
		}
		if !utf8.ValidString(e) || len(e) <= maxNameBytes && !validName(e) || reservedNames[e] {
			t.Fatalf("%q → %q: not a safe component", s, e)
		}
		if u, err := UnescapeName(s); err == nil && EscapeName(u) != s {
			t.Fatalf("UnescapeName(%q) = %q, which escapes to %q", s, u, EscapeName(u))
		}
	})
}

// pathReader is a Reader over a dataset built in the test, recording the
// paths it is asked for.
type pathReader struct {
	ds    *Dataset
	asked []string
}

func (r *pathReader) Dataset() *Dataset { return r.ds }
func (r *pathReader) ReadInto(p string, h Hyperslab, dst []byte) error {
	r.asked = append(r.asked, p)
	return nil
}
func (r *pathReader) ReadStrings(p string, h Hyperslab) ([]string, error) {
	r.asked = append(r.asked, p)
	return nil, nil
}
func (r *pathReader) Close() error { return nil }

// TestEscapedReader: the model shows escaped names and paths (dimension
// coordinates following), validates, and every read reaches the reader
// under its stored path, an omitted attribute's value too.
func TestEscapedReader(t *testing.T) {
	ds := NewDataset("x.h5", "hdf5")
	g := ds.Root.Child("..")
	g.AddDim(&Dimension{Name: "t/x", Size: 2, Coord: "/../t/x"})
	g.AddVariable(&Variable{Name: "t/x", DType: Int32, Shape: []int64{2}, Dims: []string{"t/x"}})
	g.AddVariable(&Variable{Name: "attrs", DType: Float32, Shape: []int64{2}, Dims: []string{"t/x"},
		Attrs: []Attribute{{Name: "big/one", Type: Float64, Omitted: 80, Elems: 10}}})
	r := &pathReader{ds: ds}
	er := EscapedReader(r)
	m := er.Dataset()
	if err := m.Validate(); err != nil {
		t.Fatalf("escaped model: %v", err)
	}
	v, err := m.Var("/%2E%2E/%61ttrs")
	if err != nil || v.Dims[0] != "t%2Fx" {
		t.Fatalf("escaped variable: %+v %v", v, err)
	}
	if c, err := m.Coord(v, 0); err != nil || c.Path != "/%2E%2E/t%2Fx" {
		t.Fatalf("coordinate: %+v %v", c, err)
	}
	er.ReadInto(v.Path, All(v.Shape), make([]byte, 8))
	av, err := m.Var(AttrVar(v.Path, Attribute{Name: "big%2Fone"}).Path)
	if err != nil || av.Shape[0] != 10 || av.DType != Float64 {
		t.Fatalf("attribute variable: %+v %v", av, err)
	}
	er.ReadInto(av.Path, All(av.Shape), make([]byte, 80))
	want := []string{"/../attrs", ReaderAttrPath("/../attrs", "big/one")}
	if len(r.asked) != 2 || r.asked[0] != want[0] || r.asked[1] != want[1] {
		t.Fatalf("reader asked for %q, want %q", r.asked, want)
	}
	if ds.Root.Groups[0].Name != ".." {
		t.Error("the reader's own tree changed")
	}
}
