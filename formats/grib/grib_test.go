package grib_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iowarp/iowarp/formats/grib"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/internal/reftest"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

var fx = reftest.Fixtures{Name: "grib", Probe: "import eccodes, cfgrib, xarray", Missing: "python3-cfgrib"}

func TestMain(m *testing.M) {
	code := leakcheck.Run(m.Run)
	fx.Remove()
	os.Exit(code)
}

// fixtures runs testdata/make.py (eccodes, cfgrib) once.
func fixtures(t *testing.T) string {
	t.Helper()
	return fx.Dir(t)
}

type msgMeta struct {
	Name     string   `json:"name"`
	Shape    []int64  `json:"shape"`
	Units    string   `json:"units"`
	LongName string   `json:"long_name"`
	Dims     []string `json:"dims"`
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGRIBReference: messages on regular lat/lon grids (two grids, two
// levels of one parameter, a bitmap of missing points), a reduced
// Gaussian and a polar stereographic grid read as cfgrib reads them:
// values (float32, missing NaN), shape, units, long_name, and the
// latitude/longitude coordinates of each message's axes.
func TestGRIBReference(t *testing.T) {
	dir := fixtures(t)
	for _, name := range []string{"ll.grib2", "gg.grib2", "ps.grib2"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if d, err := omni.Detect(path); err != nil || d.Name != "grib" {
				t.Fatalf("detected %q, %v", d.Name, err)
			}
			f, err := grib.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ds := f.Dataset()
			var meta []msgMeta
			if err := json.Unmarshal(readFile(t, path+".json"), &meta); err != nil {
				t.Fatal(err)
			}
			for _, m := range meta {
				v, err := ds.Var(m.Name)
				if err != nil {
					t.Errorf("%v (have %d variables)", err, len(ds.Variables()))
					continue
				}
				if !slices.Equal(v.Shape, m.Shape) || v.DType != omni.Float32 {
					t.Errorf("%s: %s %v, cfgrib float32 %v", m.Name, v.DType, v.Shape, m.Shape)
					continue
				}
				if omni.AttrString(v.Attrs, "units") != m.Units || omni.AttrString(v.Attrs, "long_name") != m.LongName {
					t.Errorf("%s: units %q long_name %q, cfgrib %q %q", m.Name, omni.AttrString(v.Attrs, "units"),
						omni.AttrString(v.Attrs, "long_name"), m.Units, m.LongName)
				}
				reftest.CheckRead(t, f, v, readFile(t, filepath.Join(dir, name+"."+m.Name+".bin")))
				checkCoords(t, ds, f, v, readFile(t, filepath.Join(dir, name+"."+m.Name+".lat.bin")),
					readFile(t, filepath.Join(dir, name+"."+m.Name+".lon.bin")))
			}
			if len(meta) == 0 {
				t.Fatal("no messages")
			}
		})
	}
}

// checkCoords compares the latitude and longitude of v with cfgrib's:
// the coordinate variables of its axes on a regular grid, else the
// variables its coordinates attribute names.
func checkCoords(t *testing.T, ds *omni.Dataset, r omni.Reader, v *omni.Variable, lat, lon []byte) {
	t.Helper()
	var cs []*omni.Variable
	if len(v.Shape) == 2 && omni.AttrString(v.Attrs, "coordinates") == "" {
		for i := range v.Shape {
			c, err := ds.Coord(v, i)
			if err != nil {
				t.Errorf("%s: %v", v.Path, err)
				return
			}
			cs = append(cs, c)
		}
	} else {
		for _, n := range []string{"latitude", "longitude"} {
			c, err := ds.Var(n + trimSuffix(v.Dims[0]))
			if err != nil {
				t.Errorf("%s: %v", v.Path, err)
				return
			}
			cs = append(cs, c)
		}
	}
	for i, want := range [][]byte{lat, lon} {
		got, err := omni.ReadAll(r, cs[i])
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: coordinate %s differs from cfgrib's (%d vs %d bytes, %v)", v.Path, cs[i].Path, len(got), len(want), err)
		}
	}
}

// trimSuffix returns the grid suffix ("_1") of a dimension name.
func trimSuffix(d string) string {
	for i := len(d) - 1; i >= 0; i-- {
		if d[i] == '_' {
			return d[i:]
		}
		if d[i] < '0' || d[i] > '9' {
			return ""
		}
	}
	return ""
}

// TestHelperGRIB reads through a helper process confined to the
// fixtures (Landlock lets eccodes read its definitions).
func TestHelperGRIB(t *testing.T) {
	dir := fixtures(t)
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	path := filepath.Join(dir, "ll.grib2")
	ds, err := p.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ds.Var("msl")
	if err != nil {
		t.Fatal(err)
	}
	want := readFile(t, filepath.Join(dir, "ll.grib2.msl.bin"))
	if got, err := p.ReadAll(ctx, path, v); err != nil || string(got) != string(want) {
		t.Errorf("%s: %d bytes, %v", v.Path, len(got), err)
	}
}

// TestGRIBMalformed: the vendored corpus fails in a helper with a clear
// error.
func TestGRIBMalformed(t *testing.T) {
	files, _ := filepath.Glob("../testdata/grib-malformed/*.grib2")
	reftest.Malformed(t, files, "")
}

// TestGRIBMutants: 60 seeded mutants of a file of five messages, opened
// and read in a helper: each ends in data or an error, in time, and the
// helper pool keeps serving; where cfgrib reads a message of a mutant
// (testdata/ref_mutants.py: one message selected by its keys) and the
// helper read it too, the values are cfgrib's, bit for bit (both decode
// with eccodes, so a damaged message decodes alike); where cfgrib does
// not, the helper's read is not checked.
func TestGRIBMutants(t *testing.T) {
	dir := fixtures(t)
	ms := reftest.Mutants(t, filepath.Join(dir, "ll.grib2"), t.TempDir(), 60, 7)
	reftest.Reference(t, "testdata/ref_mutants.py", ms)
	read, compared := 0, 0
	for _, m := range ms {
		read += len(m.Data)
		for p, got := range m.Data {
			want, err := os.ReadFile(reftest.RefPath(m, p, ".bin"))
			if err != nil {
				continue // cfgrib did not read this message (or names it otherwise)
			}
			compared++
			if string(got) != string(want) {
				t.Errorf("%s %s: %d bytes differ from cfgrib's %d", filepath.Base(m.Path), p, len(got), len(want))
			}
		}
	}
	t.Logf("%d variables read from mutants, %d compared with cfgrib", read, compared)
	if compared == 0 {
		t.Error("no variable of a mutant compared with cfgrib")
	}
}
