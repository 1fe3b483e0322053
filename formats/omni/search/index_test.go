package search

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
)

func grid(key, name string, updated time.Time) Dataset {
	return Dataset{Key: key, Name: name, Source: "/src/" + name, View: "/mnt/.omni/" + name, Updated: updated,
		Text: "title Global ocean reanalysis",
		Coords: []Coord{
			{Path: "/lat", Name: "lat", Units: "degrees_north", Min: -60, Max: 60, Values: []float64{-60, -20, 20, 60}},
			{Path: "/lon", Name: "lon", Units: "degrees_east", Min: 0, Max: 315, Values: []float64{0, 45, 90, 135, 180, 225, 270, 315}},
			{Path: "/time", Name: "time", Units: "days since 2024-01-01", Min: 0, Max: 90, Values: []float64{0, 30, 60, 90}},
		},
		Vars: []Var{
			{Path: "/sst", Name: "sst", DType: "float32", Dims: []string{"time", "lat", "lon"}, Shape: []int64{4, 4, 8},
				Coords: []string{"/time", "/lat", "/lon"}, StandardName: "sea_surface_temperature",
				LongName: "Sea surface temperature", Units: "K"},
			{Path: "/t2m", Name: "t2m", DType: "float32", Dims: []string{"time", "lat", "lon"}, Shape: []int64{4, 4, 8},
				Coords: []string{"/time", "/lat", "/lon"}, StandardName: "air_temperature",
				LongName: "2 metre temperature", Units: "K"},
			{Path: "/sal", Name: "salinity", DType: "float64", Dims: []string{"depth"}, Shape: []int64{3},
				Coords: []string{""}, Units: "psu", Attrs: "comment practical salinity scale"},
		},
	}
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Dataset + ":" + h.Variable
	}
	return out
}

// TestRanking: an exact standard name outranks a shared word; BM25 scores
// as the formula says for a one-term query.
func TestRanking(t *testing.T) {
	x := New(Options{})
	x.Update(grid("m:a.nc", "a.nc", time.Now()))
	hits := x.Search(Query{Text: "sea surface temperature"})
	if got := names(hits); len(got) < 2 || got[0] != "a.nc:/sst" || got[1] != "a.nc:/t2m" {
		t.Fatalf("hits %v, want sst then t2m", got)
	}
	if hits[0].Path != "/mnt/.omni/a.nc/sst" || hits[0].Units != "K" || hits[0].Source != "/src/a.nc" {
		t.Fatalf("hit %+v", hits[0])
	}
	// "psu" occurs in one of three documents, once (weight 1).
	hits = x.Search(Query{Text: "psu"})
	if len(hits) != 1 || hits[0].Variable != "/sal" {
		t.Fatalf("psu: %v", names(hits))
	}
	x.mu.RLock()
	var dl float64
	for _, d := range x.docs {
		if d.set.Vars[d.v].Name == "salinity" {
			dl = d.len
		}
	}
	avg := x.totalLen / float64(len(x.docs))
	x.mu.RUnlock()
	idf := math.Log(1 + (3-1+0.5)/(1+0.5))
	want := idf * 1 * (k1 + 1) / (1 + k1*(1-b+b*dl/avg))
	if math.Abs(hits[0].Score-want) > 1e-4 {
		t.Fatalf("score %v, want %v", hits[0].Score, want)
	}
	if hits := x.Search(Query{Text: "nothing-like-this"}); len(hits) != 0 {
		t.Fatalf("unknown term: %v", names(hits))
	}
	// Dataset attributes reach every variable, weakly.
	if hits := x.Search(Query{Text: "reanalysis"}); len(hits) != 3 {
		t.Fatalf("reanalysis: %v", names(hits))
	}
}

func filters(t *testing.T, s string) []omni.Filter {
	t.Helper()
	fs, err := ParseWithin(s)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestWithin: ranges answered from coordinate values, dates through CF
// time units, longitudes modulo 360 and wrapping, missing axes excluded.
func TestWithin(t *testing.T) {
	x := New(Options{})
	x.Update(grid("m:a.nc", "a.nc", time.Now()))
	for _, c := range []struct {
		within string
		want   []string
	}{
		{"lat=0:30", []string{"a.nc:/sst", "a.nc:/t2m"}},
		{"lat=0:10", nil}, // inside [min, max] but between the values
		{"latitude=-70:-50", []string{"a.nc:/sst", "a.nc:/t2m"}},
		{"lon=350:10", []string{"a.nc:/sst", "a.nc:/t2m"}},   // wraps to 0
		{"lon=-100:-80", []string{"a.nc:/sst", "a.nc:/t2m"}}, // 270 modulo 360
		{"lon=10:40", nil},
		{"time=2024-01-31:2024-02-01", []string{"a.nc:/sst", "a.nc:/t2m"}}, // day 30
		{"time=2024-01-02:2024-01-30", nil},
		{"time=2025-01-01:", nil},
		{"lat=0:30,time=2024-03-01:2024-03-31", []string{"a.nc:/sst", "a.nc:/t2m"}},
		{"depth=0:10", nil}, // an axis without coordinate values
	} {
		got := names(x.Search(Query{Text: "temperature salinity", Within: filters(t, c.within)}))
		if len(got) == 0 {
			got = nil
		}
		sort.Strings(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("within %s: %v, want %v", c.within, got, c.want)
		}
	}
	hits := x.Search(Query{Within: filters(t, "lat=0:30")})
	if len(hits) != 2 || hits[0].Path != "/mnt/.omni/a.nc/sst@lat=0:30" || hits[1].Variable != "/t2m" {
		t.Fatalf("no text, lat=0:30: %+v", hits)
	}
	hits = x.Search(Query{Text: "sst", Within: filters(t, "lon=-100:-80")})
	if len(hits) != 1 || hits[0].Path != "/mnt/.omni/a.nc/sst@lon=260:280" {
		t.Fatalf("a shifted longitude range: %+v", hits)
	}
	if _, err := ParseWithin("lat=0:30,,"); err == nil {
		t.Fatal("a bad --within parsed")
	}
	// A coordinate too long to keep its values answers from min and max.
	d := grid("m:b.nc", "b.nc", time.Now())
	d.Coords[0].Values = make([]float64, MaxCoordValues+1)
	x.Update(d)
	got, _ := x.Get("m:b.nc")
	if got.Coords[0].Values != nil {
		t.Fatal("values past MaxCoordValues kept")
	}
	if hits := x.Search(Query{Text: "sst", Within: filters(t, "lat=0:10")}); len(hits) != 1 || hits[0].Dataset != "b.nc" {
		t.Fatalf("min/max coordinate: %v", names(hits))
	}
}

// TestBounded: past MaxVariables or MaxDatasets the least recently
// indexed datasets go; replacing a dataset leaves no postings behind.
func TestBounded(t *testing.T) {
	x := New(Options{MaxVariables: 7, MaxDatasets: 10})
	t0 := time.Now()
	for i := range 3 {
		x.Update(grid(fmt.Sprint("m:", i), fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second)))
	}
	if n, v := x.Len(); n != 2 || v != 6 {
		t.Fatalf("%d datasets, %d variables; want 2, 6", n, v)
	}
	if _, ok := x.Get("m:0"); ok {
		t.Fatal("the oldest dataset was kept")
	}
	d := grid("m:1", "1", t0.Add(time.Hour))
	d.Vars = d.Vars[:1]
	d.Vars[0].Name, d.Vars[0].StandardName, d.Vars[0].LongName = "zz", "", ""
	x.Update(d)
	x.mu.RLock()
	for term, p := range x.postings {
		for id := range p {
			if x.docs[id] == nil {
				t.Errorf("posting of %q names a removed document", term)
			}
		}
	}
	x.mu.RUnlock()
	if hits := x.Search(Query{Text: "zz"}); len(hits) != 1 {
		t.Fatalf("zz: %v", names(hits))
	}
	x.Remove("m:1")
	x.Remove("m:2")
	if n, v := x.Len(); n != 0 || v != 0 || len(x.postings) != 0 || x.totalLen > 1e-9 {
		t.Fatalf("after removing all: %d %d %d postings, length %v", n, v, len(x.postings), x.totalLen)
	}
	// The bytes held are bounded: coordinate values go first.
	z := New(Options{MaxBytes: 4096})
	d = grid("m:big", "big", t0)
	d.Coords[0].Values = make([]float64, 1000)
	z.Update(d)
	if got, ok := z.Get("m:big"); !ok || got.Coords[0].Values != nil || len(got.Vars) != 3 {
		t.Fatalf("a dataset over MaxBytes: %+v", got)
	}
	for i := range 50 {
		z.Update(grid(fmt.Sprint("m:", i), fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second)))
	}
	z.mu.RLock()
	held := z.bytes
	z.mu.RUnlock()
	if n, _ := z.Len(); held > 4096 || n == 0 || n > 4 {
		t.Fatalf("%d bytes in %d datasets held, bound 4096", held, n)
	}
	// Text fields are cut.
	d = grid("m:long", "long", t0)
	d.Vars[0].Attrs = string(make([]byte, 10*maxAttrText))
	x.Update(d)
	if got, _ := x.Get("m:long"); len(got.Vars[0].Attrs) > maxAttrText {
		t.Fatalf("attrs of %d bytes kept", len(got.Vars[0].Attrs))
	}
}

// TestSaveLoad: the saved index loads equal; a corrupt file is
// ErrCorrupt and an empty index; Prune drops files of gone mounts.
func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	x := New(Options{})
	x.Update(grid("m:a.nc", "a.nc", time.Now().UTC().Round(0)))
	p := filepath.Join(dir, "idx.json")
	if err := x.Save(p, dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("saved index: %v %v", st.Mode(), err)
	}
	y, err := Load(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := x.Get("m:a.nc")
	b, _ := y.Get("m:a.nc")
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("loaded %+v\nwant %+v", b, a)
	}
	if !reflect.DeepEqual(names(x.Search(Query{Text: "temperature"})), names(y.Search(Query{Text: "temperature"}))) {
		t.Fatal("the loaded index ranks otherwise")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":1,"mount":"/nowhere","datasets":[{"key":"k","vars":[{"dims":["a"]}]}]}`), 0o600)
	z, err := Load(bad, Options{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt index: %v", err)
	}
	if n, _ := z.Len(); n != 0 {
		t.Fatal("a corrupt index loaded something")
	}
	if m, ok := mountOfFile(p); !ok || m != dir {
		t.Fatalf("mount of the file: %q %v", m, ok)
	}
	Prune(dir, "")
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the index of a gone mount was kept")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal("the index of a live mount was pruned")
	}
}

// FuzzLoad: an index file either loads whole (and searches) or is
// ErrCorrupt with nothing loaded.
func FuzzLoad(f *testing.F) {
	x := New(Options{})
	x.Update(grid("m:a.nc", "a.nc", time.Unix(1, 0)))
	dir := f.TempDir()
	p := filepath.Join(dir, "seed.json")
	x.Save(p, "/")
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add([]byte(`{"version":1,"datasets":[null]}`))
	f.Add([]byte(`{"version":1,"datasets":[{"key":"k","coords":[{"values":[2,1]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sets, err := decode(b)
		if err != nil {
			if sets != nil || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v with %d datasets", err, len(sets))
			}
			return
		}
		y := New(Options{MaxVariables: 1000, MaxDatasets: 100})
		for _, d := range sets {
			y.Update(*d)
		}
		y.Search(Query{Text: "temperature", Within: []omni.Filter{{Dim: "lat", Lo: "0", Hi: "10"}, {Dim: "time", Lo: "2024-01-01"}}})
	})
}

// TestTokens: words, joined words kept whole too, bounded.
func TestTokens(t *testing.T) {
	got := tokens("Sea_Surface-Temperature (K), tas.mean 2m")
	want := []string{"sea", "surface", "temperature", "sea_surface_temperature", "k", "tas", "mean", "tas_mean", "2m"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("tokens %q", got)
	}
	if n := len(tokens(string(make([]byte, 0)) + repeat("a ", 10000))); n != maxTokens {
		t.Fatalf("%d tokens", n)
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}
