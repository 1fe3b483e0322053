package gdal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/formats/gdal"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/internal/reftest"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

var fx = reftest.Fixtures{Name: "gdal", Probe: "from osgeo import gdal", Missing: "python3-gdal"}

func TestMain(m *testing.M) {
	gdal.WarmUp() // PROJ keeps proj.db open for the process
	code := leakcheck.Run(m.Run)
	fx.Remove()
	os.Exit(code)
}

// fixtures runs testdata/make.py (GDAL's Python bindings, gdal_translate,
// gdalinfo) once.
func fixtures(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gdal_translate"); err != nil {
		t.Skip("gdal-bin missing (make deps)")
	}
	return fx.Dir(t)
}

// gdalinfo is the part of `gdalinfo -json` compared.
type gdalinfo struct {
	Driver string    `json:"driverShortName"`
	Size   []int64   `json:"size"`
	GT     []float64 `json:"geoTransform"`
	Bands  []struct {
		Type        string   `json:"type"`
		NoData      *float64 `json:"noDataValue"`
		Description string   `json:"description"`
	} `json:"bands"`
}

var gdalTypes = map[string]omni.DType{"Byte": omni.Uint8, "Int16": omni.Int16, "UInt16": omni.Uint16,
	"Int32": omni.Int32, "UInt32": omni.Uint32, "Float32": omni.Float32, "Float64": omni.Float64}

// TestGDALRasters: files made by gdal_translate (GeoTIFF tiled and
// deflated, GeoTIFF float, ENVI, HFA, PCIDSK, PNG, BMP) read as GDAL's
// Python bindings read them, band by band, whole and strided; size,
// band types, nodata, descriptions and the geotransform's pixel-centre
// coordinates as gdalinfo -json gives them.
func TestGDALRasters(t *testing.T) {
	dir := fixtures(t)
	for _, name := range []string{"gtiff.tif", "float.tif", "envi.bin", "hfa.img", "pcidsk.pix", "png.png", "bmp.bmp"} {
		t.Run(name, func(t *testing.T) {
			var info gdalinfo
			b, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &info); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name)
			if name == "envi.bin" {
				path = filepath.Join(dir, "envi.hdr")
			}
			if d, err := omni.Detect(path); err != nil || d.Name != "gdal" {
				t.Fatalf("detected %q, %v", d.Name, err)
			}
			f, err := gdal.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ds := f.Dataset()
			if got := omni.AttrString(ds.Root.Attrs, "gdal_driver"); got != info.Driver {
				t.Errorf("driver %q, gdalinfo %q", got, info.Driver)
			}
			for i, bi := range info.Bands {
				v, err := ds.Var(fmt.Sprintf("band_%d", i+1))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(v.Shape, []int64{info.Size[1], info.Size[0]}) || v.DType != gdalTypes[bi.Type] {
					t.Errorf("%s: %s %v, gdalinfo %s %v", v.Path, v.DType, v.Shape, bi.Type, info.Size)
				}
				if bi.Description != "" && omni.AttrString(v.Attrs, "long_name") != bi.Description {
					t.Errorf("%s: long_name %q, gdalinfo %q", v.Path, omni.AttrString(v.Attrs, "long_name"), bi.Description)
				}
				fill, ok := omni.Attr(v.Attrs, "_FillValue")
				if (bi.NoData != nil) != ok || (ok && fillValue(fill) != *bi.NoData) {
					t.Errorf("%s: _FillValue %v, gdalinfo %v", v.Path, fill.Value, bi.NoData)
				}
				want, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.band%d.bin", name, i+1)))
				if err != nil {
					t.Fatal(err)
				}
				reftest.CheckRead(t, f, v, want)
			}
			checkGeo(t, f, info)
		})
	}
}

func fillValue(a omni.Attribute) float64 {
	switch v := a.Value.(type) {
	case []float64:
		return v[0]
	case []int64:
		return float64(v[0])
	case []uint64:
		return float64(v[0])
	}
	return math.NaN()
}

// checkGeo: x and y at pixel centres of gdalinfo's geotransform.
func checkGeo(t *testing.T, r omni.Reader, info gdalinfo) {
	t.Helper()
	ds := r.Dataset()
	if info.GT == nil {
		if _, err := ds.Var("x"); err == nil {
			t.Error("x coordinate without a geotransform")
		}
		return
	}
	if a, _ := omni.Attr(ds.Root.Attrs, "geotransform"); !slices.Equal(a.Value.([]float64), info.GT) {
		t.Errorf("geotransform %v, gdalinfo %v", a.Value, info.GT)
	}
	for _, c := range []struct {
		name         string
		n            int64
		origin, step float64
	}{{"x", info.Size[0], info.GT[0], info.GT[1]}, {"y", info.Size[1], info.GT[3], info.GT[5]}} {
		v, err := ds.Var(c.name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := omni.ReadAll(r, v)
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := omni.Float64s(omni.Float64, b)
		if int64(len(vals)) != c.n || vals[0] != c.origin+0.5*c.step || vals[c.n-1] != c.origin+(float64(c.n)-0.5)*c.step {
			t.Errorf("%s: %d values from %v to %v", c.name, len(vals), vals[0], vals[len(vals)-1])
		}
	}
}

// TestGDALMultidim: an HDF4 file (gdal_translate -of HDF4Image) through
// GDAL's multidimensional API: every array, its dimensions and its
// values as gdal.OpenEx(OF_MULTIDIM_RASTER) reads them, whole and
// strided (GDALMDArrayRead steps).
func TestGDALMultidim(t *testing.T) {
	dir := fixtures(t)
	path := filepath.Join(dir, "hdf4.hdf")
	var meta []struct {
		Path  string   `json:"path"`
		Shape []int64  `json:"shape"`
		Dims  []string `json:"dims"`
	}
	b, err := os.ReadFile(path + ".md.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	f, err := gdal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(meta) == 0 || len(f.Dataset().Variables()) != len(meta) {
		t.Fatalf("%d variables, GDAL %d arrays", len(f.Dataset().Variables()), len(meta))
	}
	for _, m := range meta {
		v, err := f.Dataset().Var(m.Path)
		if err != nil {
			t.Error(err)
			continue
		}
		if !slices.Equal(v.Shape, m.Shape) || !slices.Equal(v.Dims, m.Dims) {
			t.Errorf("%s: %v %v, GDAL %v %v", m.Path, v.Shape, v.Dims, m.Shape, m.Dims)
		}
		want, err := os.ReadFile(filepath.Join(dir, "hdf4.hdf.md."+strings.ReplaceAll(m.Path[1:], "/", "~")+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		reftest.CheckRead(t, f, v, want)
	}
}

// TestHelperGDAL reads a GeoTIFF and the HDF4 file through a helper
// process confined to the fixtures.
func TestHelperGDAL(t *testing.T) {
	dir := fixtures(t)
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	for _, c := range []struct{ file, v, want string }{{"gtiff.tif", "band_2", "gtiff.tif.band2.bin"}, {"envi.hdr", "band_1", "envi.bin.band1.bin"}} {
		path := filepath.Join(dir, c.file)
		ds, err := p.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		v, err := ds.Var(c.v)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(filepath.Join(dir, c.want))
		if got, err := p.ReadAll(ctx, path, v); err != nil || string(got) != string(want) {
			t.Errorf("%s %s: %d bytes, %v", c.file, v.Path, len(got), err)
		}
	}
}

// TestGDALMalformed: the vendored corpus fails in a helper with a clear
// error.
func TestGDALMalformed(t *testing.T) {
	files, _ := filepath.Glob("../testdata/gdal-malformed/*")
	var in []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".py") && !strings.HasSuffix(f, ".md") {
			in = append(in, f)
		}
	}
	reftest.Malformed(t, in, "")
}

// TestGDALMutants: 50 seeded mutants each of the tiled, deflated
// GeoTIFF and of the PNG, read in a helper: each ends in an error or in
// data, and where GDAL's Python bindings read a band too, the bytes are
// theirs.
func TestGDALMutants(t *testing.T) {
	dir := fixtures(t)
	mdir := t.TempDir()
	compared := 0
	for i, name := range []string{"gtiff.tif", "png.png"} {
		ms := reftest.Mutants(t, filepath.Join(dir, name), mdir, 50, uint64(i+1))
		reftest.Reference(t, "testdata/ref_mutants.py", ms)
		for _, m := range ms {
			for p, got := range m.Data {
				if !strings.HasPrefix(p, "/band_") {
					continue
				}
				want, err := os.ReadFile(reftest.RefPath(m, p, ".bin"))
				if err != nil {
					continue // GDAL's bindings refused it
				}
				compared++
				if string(got) != string(want) {
					t.Errorf("%s %s: %d bytes differ from GDAL's %d", filepath.Base(m.Path), p, len(got), len(want))
				}
			}
		}
	}
	t.Logf("%d bands of mutants compared with GDAL's Python bindings", compared)
}
