package helper

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/internal/fixture"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/tabular"
)

// exportScript compares every variable and attribute of a source file
// (read by h5py or netCDF4) with an exported file (netCDF4, h5py or zarr).
const exportScript = `
import sys, numpy as np, h5py, netCDF4
src, out, kind = sys.argv[1:4]
HIDDEN = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"}
def norm(x):
    a = np.asarray(x)
    if a.dtype.kind in "OSU":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in a.ravel()]
    return a
def same(a, b):
    a, b = norm(a), norm(b)
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and [s.rstrip("\0") for s in a] == [s.rstrip("\0") for s in b]
    return a.shape == b.shape and np.array_equal(a.astype(np.float64) if a.dtype.kind in "iub" else a, b.astype(np.float64) if b.dtype.kind in "iub" else b, equal_nan=a.dtype.kind == "f")
def same_attr(a, b):
    a, b = norm(a), norm(b)
    if isinstance(a, list) or isinstance(b, list):
        return norm(a) == norm(b) if isinstance(a, list) and isinstance(b, list) else False
    return np.allclose(a.ravel().astype(float), b.ravel().astype(float), equal_nan=True)
items = []
if src.endswith(".h5"):
    f = h5py.File(src, "r")
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            if obj.dtype.names:
                for fld in obj.dtype.names:
                    items.append(("/" + name + "/" + fld, obj[fld], {}))
            else:
                items.append(("/" + name, obj[()], {k: obj.attrs[k] for k in obj.attrs}))
    f.visititems(visit)
else:
    f = netCDF4.Dataset(src)
    f.set_auto_maskandscale(False); f.set_always_mask(False); f.set_auto_chartostring(False)
    def walk(g, path):
        for n, v in g.variables.items():
            v.set_auto_maskandscale(False); v.set_always_mask(False); v.set_auto_chartostring(False)
            items.append((path + "/" + n, v[...], {k: v.getncattr(k) for k in v.ncattrs()}))
        for n, c in g.groups.items():
            walk(c, path + "/" + n)
    walk(f, "")
if kind == "netcdf":
    o = netCDF4.Dataset(out); o.set_auto_maskandscale(False); o.set_always_mask(False)
    def get(p):
        v = o[p.lstrip("/")]; v.set_auto_maskandscale(False); v.set_always_mask(False)
        return v[...], {k: v.getncattr(k) for k in v.ncattrs()}
elif kind == "hdf5":
    o = h5py.File(out, "r")
    def get(p):
        d = o[p]; return d[()], {k: d.attrs[k] for k in d.attrs}
else:
    import zarr
    o = zarr.open_group(out, mode="r")
    def get(p):
        a = o[p.lstrip("/")]; return a[...], dict(a.attrs)
bad = 0
for p, data, attrs in items:
    got, gattrs = get(p)
    if not same(data, got):
        bad += 1; print("DATA", p, np.asarray(data).dtype, np.asarray(got).dtype, np.asarray(data).shape, np.asarray(got).shape)
    for k, v in attrs.items():
        if k in HIDDEN or (kind == "omni" and k == "_FillValue"):
            continue
        if k not in gattrs or not same_attr(v, gattrs[k]):
            bad += 1; print("ATTR", p, k, v, gattrs.get(k))
if kind == "omni":
    import xarray as xr
    ds = xr.open_zarr(out, decode_cf=False, consolidated=False)
    ref = dict((p, d) for p, d, _ in items)
    t = ds["temperature"].values
    if not same(ref["/temperature"], t):
        bad += 1; print("XARRAY temperature")
print("compared", len(items), "variables")
sys.exit(1 if bad else 0)
`

// TestExport writes each fixture as NetCDF-4, HDF5 and OMNI (Zarr) and
// checks the results with ncdump/h5dump and with netCDF4, h5py, zarr and
// xarray against the source, attributes included.
func TestExport(t *testing.T) {
	dir := fixture.Dir(t)
	py := fixture.Python(t)
	hasZarr := exec.Command(py, "-c", "import zarr, xarray").Run() == nil
	p := newPool(t, 30*time.Second)
	ctx := context.Background()
	out := t.TempDir()
	for _, src := range []string{"grid.h5", "climate.nc", "classic.nc"} {
		path := filepath.Join(dir, src)
		ds, err := p.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		read := func(v *omni.Variable) ([]byte, error) { return p.ReadAll(ctx, path, v) }
		for _, format := range []string{"netcdf", "hdf5", "omni"} {
			if format == "omni" && (!hasZarr || src == "classic.nc") {
				continue // xarray cannot open a store of char arrays with a record dim: not our concern here
			}
			drv, err := omni.DriverNamed(format)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(out, strings.TrimSuffix(src, filepath.Ext(src))+"."+format)
			if err := drv.Write(dst, ds, read); err != nil {
				t.Fatalf("export %s as %s: %v", src, format, err)
			}
			switch format {
			case "netcdf":
				if b, err := exec.Command("ncdump", "-h", dst).CombinedOutput(); err != nil {
					t.Fatalf("ncdump %s: %v\n%s", dst, err, b)
				}
			case "hdf5":
				if b, err := exec.Command("h5dump", "-H", dst).CombinedOutput(); err != nil {
					t.Fatalf("h5dump %s: %v\n%s", dst, err, b)
				}
			}
			t.Logf("%s → %s: %s", src, format, strings.TrimSpace(fixture.Run(t, exportScript, path, dst, format)))
			// and our own readers read the export back to the same schema shape
			back, err := p.Open(ctx, dst)
			if err != nil {
				t.Fatalf("reopen %s: %v", dst, err)
			}
			if len(back.Variables()) != len(ds.Variables()) {
				t.Errorf("%s: %d variables, source %d", dst, len(back.Variables()), len(ds.Variables()))
			}
		}
	}
}

// TestTables reads CSV and JSON lines, writes CSV and Parquet, and reads
// them back: the same columns and values.
func TestTables(t *testing.T) {
	dir := fixture.Dir(t)
	p := newPool(t, 30*time.Second)
	ctx := context.Background()
	out := t.TempDir()
	src := filepath.Join(dir, "table.csv")
	ds, err := p.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]omni.DType{"id": omni.Int64, "value": omni.Float64, "name": omni.String, "flag": omni.Bool}
	for name, dt := range want {
		v, err := ds.Var(name)
		if err != nil || v.DType != dt || v.Shape[0] != 50 || v.Dims[0] != "row" {
			t.Errorf("column %s: %+v %v", name, v, err)
		}
	}
	check := func(path string) {
		t.Helper()
		other, err := p.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		for name := range want {
			a, _ := ds.Var(name)
			b, err := other.Var(name)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			da, _ := p.ReadAll(ctx, src, a)
			db, _ := p.ReadAll(ctx, path, b)
			if string(da) != string(db) {
				t.Errorf("%s column %s differs", path, name)
			}
		}
	}
	read := func(v *omni.Variable) ([]byte, error) { return p.ReadAll(ctx, src, v) }
	for _, format := range []string{"csv", "parquet"} {
		drv, _ := omni.DriverNamed(format)
		dst := filepath.Join(out, "t."+format)
		if err := drv.Write(dst, ds, read); err != nil {
			t.Fatal(err)
		}
		check(dst)
	}
	js, err := p.Open(ctx, filepath.Join(dir, "table.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := js.Var("value")
	b, _ := p.ReadAll(ctx, js.Path, v)
	if vals, _ := omni.Float64s(v.DType, b); len(vals) != 50 || vals[3] != 1.5 {
		t.Errorf("jsonl value column %v", vals)
	}
	// A dataset of variables on different dimensions is no one table: an
	// error naming those left over, never a silent drop; split, each
	// variable flattens to long form with coordinate columns.
	nc := filepath.Join(dir, "climate.nc")
	cds, _ := p.Open(ctx, nc)
	drv, _ := omni.DriverNamed("parquet")
	ncRead := func(v *omni.Variable) ([]byte, error) { return p.ReadAll(ctx, nc, v) }
	err = drv.Write(filepath.Join(out, "climate.parquet"), cds, ncRead)
	if !errors.Is(err, tabular.ErrNotFlat) || !strings.Contains(err.Error(), "/forecast/precip (step,lat)") || !strings.Contains(err.Error(), "/station (lat)") {
		t.Fatalf("climate.nc as one table: %v, want ErrNotFlat naming /station and /forecast/precip", err)
	}
	files, err := omni.WriteSplit(drv, filepath.Join(out, "climate"), cds, ncRead)
	if err != nil || len(files) != len(cds.Variables()) {
		t.Fatalf("split: %d files for %d variables: %v", len(files), len(cds.Variables()), err)
	}
	dst := filepath.Join(out, "climate", "temperature.parquet")
	flat, err := p.Open(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	tv, _ := flat.Var("temperature")
	src3, _ := cds.Var("temperature")
	if tv == nil || tv.Shape[0] != src3.Len() {
		t.Fatalf("flattened temperature %+v", tv)
	}
	a, _ := p.ReadAll(ctx, nc, src3)
	b, _ = p.ReadAll(ctx, dst, tv)
	if string(a) != string(b) {
		t.Error("flattened temperature differs from the source")
	}
	for _, c := range []string{"time", "lat", "lon"} {
		if _, err := flat.Var(c); err != nil {
			t.Errorf("coordinate column %s: %v", c, err)
		}
	}
}
