package omni

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseView(t *testing.T) {
	cases := []struct {
		name, in string
		want     View
		err      bool
	}{
		{"plain", "temperature", View{Var: "temperature"}, false},
		{"slices", "temperature[0:2,10:20,:]", View{Var: "temperature", Slices: []Slice{
			{Start: 0, Stop: 2, HasStart: true, HasStop: true},
			{Start: 10, Stop: 20, HasStart: true, HasStop: true}, {}}}, false},
		{"step and index", "t[::2,-1]", View{Var: "t", Slices: []Slice{
			{Step: 2, HasStep: true}, {Start: -1, HasStart: true, Index: true}}}, false},
		{"filters", "temperature@time=2024-01-01:2024-06-30,lat=-10:10", View{Var: "temperature", Filters: []Filter{
			{Dim: "time", Lo: "2024-01-01", Hi: "2024-06-30"}, {Dim: "lat", Lo: "-10", Hi: "10"}}}, false},
		{"date with time", "v@time=2024-01-01T00:00:00:2024-01-02T12:30", View{Var: "v", Filters: []Filter{
			{Dim: "time", Lo: "2024-01-01T00:00:00", Hi: "2024-01-02T12:30"}}}, false},
		{"open range", "v@lat=:5", View{Var: "v", Filters: []Filter{{Dim: "lat", Hi: "5"}}}, false},
		{"single value", "v@lev=850", View{Var: "v", Filters: []Filter{{Dim: "lev", Lo: "850", Hi: "850"}}}, false},
		{"empty", "", View{}, true},
		{"unclosed", "t[0:2", View{}, true},
		{"step zero", "t[::0]", View{}, true},
		{"too many colons", "t[1:2:3:4]", View{}, true},
		{"bad index", "t[a:b]", View{}, true},
		{"bad filter", "t@time", View{}, true},
		{"twice", "t@lat=1:2,lat=3:4", View{}, true},
		{"not a value", "t@lat=north:south", View{}, true},
		{"empty brackets", "t[]", View{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseView(c.in)
			if (err != nil) != c.err {
				t.Fatalf("ParseView(%q) error %v, want error %v", c.in, err, c.err)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseView(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

// TestSliceSemantics checks View.Hyperslab against Python slicing of range(n).
func TestSliceSemantics(t *testing.T) {
	cases := []struct {
		in   string
		n    int64
		want []int64 // the selected indices, as list(range(n))[slice]
	}{
		{"v[2:5]", 10, []int64{2, 3, 4}},
		{"v[::3]", 10, []int64{0, 3, 6, 9}},
		{"v[-3:]", 10, []int64{7, 8, 9}},
		{"v[1:-1:4]", 10, []int64{1, 5}},
		{"v[5:2]", 10, nil},
		{"v[-100:100]", 4, []int64{0, 1, 2, 3}},
		{"v[7]", 10, []int64{7}},
		{"v[-1]", 10, []int64{9}},
	}
	for _, c := range cases {
		v, err := ParseView(c.in)
		if err != nil {
			t.Fatal(err)
		}
		h, err := v.Hyperslab([]int64{c.n})
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		var got []int64
		for k := int64(0); k < h.Count[0]; k++ {
			got = append(got, h.Start[0]+k*h.StrideAt(0))
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s on %d: %v, want %v", c.in, c.n, got, c.want)
		}
		if err := h.Check([]int64{c.n}); err != nil {
			t.Errorf("%s: resolved hyperslab fails Check: %v", c.in, err)
		}
	}
	if _, err := (View{Var: "v", Slices: []Slice{{Start: 10, HasStart: true, Index: true}}}).Hyperslab([]int64{10}); err == nil {
		t.Error("index 10 of 10 accepted")
	}
}

func TestTimeUnits(t *testing.T) {
	cases := []struct {
		units, cal, date string
		want             float64
	}{
		{"days since 1970-01-01", "", "1970-01-11", 10},
		{"days since 1970-01-01 00:00:00", "standard", "2024-01-01", 19723},
		{"hours since 2000-01-01", "gregorian", "2000-01-02T06:00:00", 30},
		{"seconds since 2024-01-01T00:00:00Z", "", "2024-01-01T00:01:00", 60},
		{"days since 2000-01-01", "noleap", "2001-01-01", 365},
		{"days since 2000-01-01", "360_day", "2000-03-01", 60},
		{"days since 2000-01-01", "all_leap", "2001-01-01", 366},
	}
	for _, c := range cases {
		u, err := ParseTimeUnits(c.units, c.cal)
		if err != nil {
			t.Fatalf("%q: %v", c.units, err)
		}
		d, _, err := ParseDate(c.date)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Value(d); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s in %q (%s) = %v, want %v", c.date, c.units, c.cal, got, c.want)
		}
	}
	for _, bad := range []string{"months since 2000-01-01", "K", "days since yesterday"} {
		if _, err := ParseTimeUnits(bad, ""); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSelectRange(t *testing.T) {
	inc := []float64{-90, -60, -30, 0, 30, 60, 90}
	dec := []float64{90, 60, 30, 0, -30, -60, -90}
	cases := []struct {
		name          string
		vals          []float64
		lo, hi        float64
		open          bool
		start, count  int64
		wantErrString string
	}{
		{"inclusive", inc, -30, 30, false, 2, 3, ""},
		{"half open", inc, -30, 30, true, 2, 2, ""},
		{"between points", inc, -45, 45, false, 2, 3, ""},
		{"decreasing", dec, -30, 30, false, 2, 3, ""},
		{"empty", inc, 91, 100, false, 0, 0, ""},
		{"unbounded", inc, math.Inf(-1), math.Inf(1), false, 0, 7, ""},
		{"not monotonic", []float64{0, 2, 1}, 0, 1, false, 0, 0, "monotonic"},
		{"nan", []float64{0, math.NaN()}, 0, 1, false, 0, 0, "NaN"},
	}
	for _, c := range cases {
		s, n, err := SelectRange(c.vals, c.lo, c.hi, c.open)
		if c.wantErrString != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrString) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.wantErrString)
			}
			continue
		}
		if err != nil || s != c.start || n != c.count {
			t.Errorf("%s: (%d, %d, %v), want (%d, %d)", c.name, s, n, err, c.start, c.count)
		}
	}
}

func TestNPYHeader(t *testing.T) {
	h, err := NPYHeader(Float32, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(h)%64 != 0 || !strings.HasPrefix(string(h), "\x93NUMPY\x01\x00") || h[len(h)-1] != '\n' {
		t.Fatalf("bad header %q", h)
	}
	if !strings.Contains(string(h), "'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") {
		t.Errorf("header dict %q", h[10:])
	}
	h1, _ := NPYHeader(Int16, []int64{5})
	if !strings.Contains(string(h1), "'shape': (5,)") {
		t.Errorf("1-D shape: %q", h1)
	}
	h0, _ := NPYHeader(Uint8, nil)
	if !strings.Contains(string(h0), "'shape': ()") {
		t.Errorf("scalar shape: %q", h0)
	}
	if _, err := NPYHeader(String, []int64{1}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("vlen string header: %v", err)
	}
}

func TestWriteCSV(t *testing.T) {
	v := &Variable{Name: "t", DType: Int16, Shape: []int64{2, 3}, Dims: []string{"y", "x"}}
	h := Hyperslab{Start: []int64{0, 1}, Count: []int64{2, 1}, Stride: []int64{1, 1}}
	var b strings.Builder
	if err := WriteCSV(&b, v, h, []byte{1, 0, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	if want := "y,x,t\n0,1,1\n1,1,-1\n"; b.String() != want {
		t.Errorf("csv %q, want %q", b.String(), want)
	}
}

func sampleDataset() *Dataset {
	ds := NewDataset("/data/x.nc", "netcdf4")
	ds.Root.Attrs = []Attribute{StringAttr("title", "x"), FloatAttr("nan", math.NaN(), math.Inf(1)),
		{Name: "u", Type: Uint16, Value: []uint64{7}}}
	ds.Root.AddDim(&Dimension{Name: "time", Size: 3, Unlimited: true, Coord: "/time"})
	ds.Root.AddVariable(&Variable{Name: "time", DType: Float64, Shape: []int64{3}, Dims: []string{"time"},
		Attrs: []Attribute{StringAttr("units", "days since 2024-01-01")}})
	g := ds.Root.Child("g")
	g.NXClass = "NXentry"
	g.AddVariable(&Variable{Name: "v", DType: Int32, Shape: []int64{3, 2}, Dims: []string{"time", "x"}, Chunks: []int64{1, 2}})
	return ds
}

func TestSchemaRoundTrip(t *testing.T) {
	ds := sampleDataset()
	b, err := ds.Schema()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSchema(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := back.Schema()
	if string(b) != string(b2) {
		t.Errorf("schema changed on round trip:\n%s\n%s", b, b2)
	}
	if f := back.Root.Attrs[1].Value.([]float64); !math.IsNaN(f[0]) || !math.IsInf(f[1], 1) {
		t.Errorf("non-finite floats lost: %v", f)
	}
	v, err := back.Var("g/v")
	if err != nil || v.Chunks[1] != 2 {
		t.Fatalf("Var(g/v) = %v, %v", v, err)
	}
	if d, err := back.Dim("/g", "time"); err != nil || !d.Unlimited {
		t.Errorf("Dim from /g: %v %v", d, err)
	}
	if c, err := back.Coord(v, 0); err != nil || c.Path != "/time" {
		t.Errorf("Coord: %v %v", c, err)
	}
}

func TestSelectByDate(t *testing.T) {
	ds := sampleDataset()
	_, _ = ds.Var("/g/v")
	read := func(c *Variable) ([]byte, error) {
		out := make([]byte, 0, 24)
		for _, x := range []float64{0, 31, 60} { // Jan 1, Feb 1, Mar 1 2024
			out = append(out, f64(x)...)
		}
		return out, nil
	}
	view, err := ParseView("v@time=2024-01-15:2024-02")
	if err != nil {
		t.Fatal(err)
	}
	_, h, err := ds.Resolve("/g", view, read)
	if err != nil {
		t.Fatal(err)
	}
	if h.Start[0] != 1 || h.Count[0] != 1 || h.Count[1] != 2 {
		t.Errorf("hyperslab %+v, want time index 1 only", h)
	}
}

func f64(x float64) []byte {
	b := make([]byte, 8)
	u := math.Float64bits(x)
	for i := range b {
		b[i] = byte(u >> (8 * i))
	}
	return b
}

func TestRegistry(t *testing.T) {
	r := Registry{Dir: t.TempDir()}
	if err := r.Add(Entry{Name: "a", Source: "/x.h5"}, sampleDataset()); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(Entry{Name: "../evil"}, sampleDataset()); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad name: %v", err)
	}
	list, err := r.List()
	if err != nil || len(list) != 1 || list[0].Source != "/x.h5" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if ds, err := r.Schema("a"); err != nil || ds.Root.Groups[0].NXClass != "NXentry" {
		t.Errorf("Schema: %v", err)
	}
	if err := r.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("a"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove: %v", err)
	}
}

func TestParseJob(t *testing.T) {
	j, err := ParseJob([]byte(`name: demo
transfers:
  - src: file::/data/run1.h5
    dst: iowarp::run1
    format: hdf5
    range_off: 0
    range_size: 0
    dataset_filter: /temperature
`))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := j.Transfers[0].SrcPath(); p != "/data/run1.h5" || j.Transfers[0].DstName() != "run1" {
		t.Errorf("job %+v", j)
	}
	for _, bad := range []string{"name: x\n", "transfers: [{src: a}]\n", "name: x\ntransfers: [{src: s3::b/k}]\n", "name: x\nbogus: 1\ntransfers: [{src: a}]\n"} {
		if _, err := ParseJob([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// FuzzParseView: no panic; an error leaves no partial result; a success
// renders back to a name that parses to the same view.
func FuzzParseView(f *testing.F) {
	for _, s := range []string{"temperature[0:2,10:20,:]", "t@time=2024-01-01:2024-06-30,lat=-10:10", "v[::2,-1]", "x@lev=850", "a[", "@", "v@t=2024-01-01T00:00:00:2024-01-02"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseView(s)
		if err != nil {
			if !reflect.DeepEqual(v, View{}) {
				t.Fatalf("error %v with partial result %+v", err, v)
			}
			return
		}
		back, err := ParseView(v.String())
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("%q → %q → %+v, %v; want %+v", s, v.String(), back, err, v)
		}
		if h, err := v.Hyperslab([]int64{5, 7, 9}); err == nil {
			if err := h.Check([]int64{5, 7, 9}); err != nil {
				t.Fatalf("resolved %q fails Check: %v", s, err)
			}
		}
	})
}

// FuzzDecodeSchema: no panic; an error returns nil; a success re-encodes.
func FuzzDecodeSchema(f *testing.F) {
	b, _ := sampleDataset().Schema()
	f.Add(b)
	f.Add([]byte(`{"root":{"name":"","path":"/","variables":[{"name":"v","path":"/v","dtype":"S3","shape":[2],"dims":["x"]}]}}`))
	f.Add([]byte(`{"root":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := DecodeSchema(b)
		if err != nil {
			if ds != nil {
				t.Fatal("error with a dataset")
			}
			return
		}
		out, err := ds.Schema()
		if err != nil {
			t.Fatalf("valid schema does not encode: %v", err)
		}
		if _, err := DecodeSchema(out); err != nil {
			t.Fatalf("re-encoded schema does not decode: %v", err)
		}
		var sink strings.Builder
		Describe(&sink, ds)
		json.Valid(out)
	})
}
