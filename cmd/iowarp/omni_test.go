package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/formats/omni"
)

// omniFixtures writes the formats fixtures (h5py, netCDF4, ncgen) into a
// temporary directory, or skips.
func omniFixtures(t *testing.T) string {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import h5py, netCDF4").CombinedOutput(); err != nil {
		// Absent is a skip; installed but broken is a failure, not a pass.
		if _, statErr := os.Stat(py); statErr != nil || strings.Contains(string(out), "ModuleNotFoundError") {
			t.Skip("python3 with h5py and netCDF4 missing (make deps)")
		}
		t.Fatalf("import h5py, netCDF4: %v\n%s", err, out)
	}
	_, self, _, _ := runtime.Caller(0)
	dir := t.TempDir()
	script := filepath.Join(filepath.Dir(self), "..", "..", "formats", "testdata", "fixtures.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("fixtures: %v\n%s", err, out)
	}
	return dir
}

func omniRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "iowarp", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(extraCommands()...)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestOmniCommands(t *testing.T) {
	dir := omniFixtures(t)
	reg := filepath.Join(t.TempDir(), "registry")
	nc := filepath.Join(dir, "climate.nc")

	out, err := omniRun(t, "describe", nc)
	if err != nil || !strings.Contains(out, "time = UNLIMITED") || !strings.Contains(out, "float32 temperature(time=53, lat=18, lon=24)") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	if _, err := omniRun(t, "assimilate", nc, "--name", "clim", "--eager", "--registry", reg); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(job, []byte("name: demo\ntransfers:\n  - src: file::"+filepath.Join(dir, "grid.h5")+
		"\n    dst: iowarp::grid\n    format: hdf5\n    dataset_filter: /temperature\n"), 0o644)
	if _, err := omniRun(t, "assimilate", job, "--registry", reg); err != nil {
		t.Fatal(err)
	}
	list, err := omni.Registry{Dir: reg}.List()
	if err != nil || len(list) != 2 || list[0].Name != "clim" || list[1].Variables != 1 || !list[0].Eager {
		t.Fatalf("registry %+v %v", list, err)
	}
	// A crafted file: a clear error, this process unharmed.
	// (The vendored corpus: a clone has it, so its absence is a failure.)
	mal := filepath.Join("..", "..", "formats", "testdata", "hdf5-malformed", "cve-2018-11205.h5")
	if _, err := os.Stat(mal); err != nil {
		t.Fatalf("the vendored malformed corpus: %v", err)
	}
	if _, err := omniRun(t, "assimilate", mal, "--eager", "--registry", reg); err == nil || !strings.Contains(err.Error(), "crashed") {
		t.Errorf("assimilate of a crashing file: %v", err)
	}
	if _, err := omniRun(t, "assimilate", filepath.Join(dir, "truncated.h5"), "--registry", reg); err == nil {
		t.Error("truncated file assimilated")
	}
	npy := filepath.Join(t.TempDir(), "q.npy")
	if _, err := omniRun(t, "query", "clim", "--registry", reg, "--var", "temperature",
		"--time", "2024-02-01:2024-06-30", "--lat", "-10:10", "--out", npy); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(npy)
	if !bytes.HasPrefix(b, []byte("\x93NUMPY")) || !bytes.Contains(b, []byte("'shape': (21, 2, 24)")) {
		t.Errorf("query npy header %q", b[:min(len(b), 128)])
	}
	// The job's dataset_filter (/temperature) applies to what "grid" shows.
	if _, err := omniRun(t, "query", "grid", "--registry", reg, "--var", "lat", "--out", filepath.Join(t.TempDir(), "l.csv")); err == nil || !strings.Contains(err.Error(), "dataset_filter") {
		t.Errorf("query of a variable the job's filter left out: %v", err)
	}
	gridNC := filepath.Join(t.TempDir(), "grid.nc")
	if _, err := omniRun(t, "export", "grid", gridNC, "--registry", reg); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("ncdump", "-h", gridNC).CombinedOutput(); err != nil || !strings.Contains(string(b), "temperature(") || strings.Contains(string(b), "float lat(") || strings.Contains(string(b), "double lat(") {
		t.Errorf("export of a filtered entry: %v\n%s", err, b)
	}
	outNC := filepath.Join(t.TempDir(), "x.nc")
	if _, err := omniRun(t, "export", "clim", outNC, "--registry", reg); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("ncdump", "-h", outNC).CombinedOutput(); err != nil {
		t.Errorf("ncdump of export: %v\n%s", err, b)
	}
}

// TestExportDeadline: --deadline bounds the whole export, not each
// helper request: an export of many variables, each read well within
// the deadline, fails with it once the total passes it.
func TestExportDeadline(t *testing.T) {
	omniFixtures(t)
	src := filepath.Join(t.TempDir(), "many.h5")
	script := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    x = np.sin(np.arange(1 << 17) / 7.0)
    for i in range(100):
        f.create_dataset("v%03d" % i, data=x + i, chunks=(1 << 14,), compression="gzip", shuffle=True)
`
	if out, err := exec.Command("/usr/bin/python3", "-c", script, src).CombinedOutput(); err != nil {
		t.Fatalf("h5py: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "x.h5")
	_, err := omniRun(t, "export", src, out, "--deadline", "200ms")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "--deadline") {
		t.Fatalf("export past its deadline: %v, want the --deadline error", err)
	}
	t0 := time.Now()
	if _, err := omniRun(t, "export", src, out+".2.h5", "--deadline", "5m"); err != nil {
		t.Fatalf("export within its deadline: %v", err)
	}
	t.Logf("export without a binding deadline: %v", time.Since(t0))
}

// TestQueryStreams: `iowarp query` reads through the view engine block
// by block (a 24 MiB variable is three blocks and more) and writes what
// netCDF4 reads for the same slice, as .npy and as CSV.
func TestQueryStreams(t *testing.T) {
	omniFixtures(t) // skips without python3-netCDF4
	dir := t.TempDir()
	nc := filepath.Join(dir, "big.nc")
	mk := `import sys, numpy as np, netCDF4
d = netCDF4.Dataset(sys.argv[1], "w")
d.createDimension("y", 3000); d.createDimension("x", 1000)
v = d.createVariable("f", "f8", ("y", "x"), chunksizes=(100, 1000))
v[:] = np.arange(3000 * 1000, dtype="f8").reshape(3000, 1000)
d.close()
`
	if out, err := exec.Command("/usr/bin/python3", "-c", mk, nc).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	npy := filepath.Join(dir, "q.npy")
	if out, err := omniRun(t, "query", nc, "--var", "f", "--slice", "5:2990:3,1:1000:7", "--out", npy); err != nil {
		t.Fatalf("query: %v\n%s", err, out)
	}
	check := `import sys, numpy as np, netCDF4
d = netCDF4.Dataset(sys.argv[1]); d.set_auto_maskandscale(False)
want = d.variables["f"][5:2990:3, 1:1000:7]
got = np.load(sys.argv[2])
assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
assert np.array_equal(got, want), "values differ"
print(got.size)
`
	if out, err := exec.Command("/usr/bin/python3", "-c", check, nc, npy).CombinedOutput(); err != nil {
		t.Fatalf("query .npy against netCDF4: %v\n%s", err, out)
	}
	csv := filepath.Join(dir, "q.csv")
	if out, err := omniRun(t, "query", nc, "--var", "f", "--slice", "2998:3000,998:1000", "--out", csv); err != nil {
		t.Fatalf("query csv: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(csv)
	want := "y,x,f\n2998,998,2.998998e+06\n2998,999,2.998999e+06\n2999,998,2.999998e+06\n2999,999,2.999999e+06\n"
	if string(b) != want {
		t.Fatalf("csv:\n%s\nwant:\n%s", b, want)
	}
}

// TestQueryEmpty: a selection with no values (a range outside the
// coordinates) is an error naming it, exit 1, unless --allow-empty.
func TestQueryEmpty(t *testing.T) {
	dir := omniFixtures(t)
	nc := filepath.Join(dir, "climate.nc")
	out := filepath.Join(t.TempDir(), "q.csv")
	_, err := omniRun(t, "query", nc, "--var", "temperature", "--lat", "1000:2000", "--out", out)
	if err == nil || !strings.Contains(err.Error(), "selection is empty") {
		t.Fatalf("empty selection: %v, want an error saying so", err)
	}
	if _, err := omniRun(t, "query", nc, "--var", "temperature", "--lat", "1000:2000", "--allow-empty", "--out", out); err != nil {
		t.Fatalf("--allow-empty: %v", err)
	}
	if b, _ := os.ReadFile(out); !strings.HasPrefix(string(b), "time,lat,lon,temperature\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("--allow-empty wrote %q, want the header alone", b)
	}
}

// cfMake writes a NetCDF-4 file exercising CF decoding: packed int16 with
// a fill value, float32 with _FillValue and missing_value, masked int32
// and uint8, _Unsigned int8, CF times (int days, float hours, standard
// and proleptic calendars) and a noleap time (the fallback).
const cfMake = `import sys, numpy as np, netCDF4
d = netCDF4.Dataset(sys.argv[1], "w")
def create(*a, **k):
    v = netCDF4.Dataset.createVariable(d, *a, **k)
    v.set_auto_maskandscale(False) # the stored values are written as given
    return v
d.createDimension("time", 4); d.createDimension("lat", 3); d.createDimension("lon", 5)
t = create("time", "i4", ("time",)); t.units = "days since 2000-01-01"; t.calendar = "standard"
t[:] = [0, 31, 60, 366]
la = create("lat", "f4", ("lat",)); la.units = "degrees_north"; la[:] = [-10, 0, 10.5]
lo = create("lon", "f8", ("lon",)); lo.units = "degrees_east"; lo[:] = np.arange(5) * 72.5
rng = np.random.default_rng(7)
raw = rng.integers(-30000, 30000, (4, 3, 5), dtype="i2"); raw[0, 0, :2] = -32768; raw[3, 2, 4] = -32768
v = create("temp", "i2", ("time", "lat", "lon"), fill_value=np.int16(-32768))
v.scale_factor = np.float32(0.01); v.add_offset = np.float32(273.15); v.units = "K"; v[:] = raw
p = create("precip", "f4", ("time", "lat", "lon"), fill_value=np.float32(1e20))
praw = rng.random((4, 3, 5)).astype("f4"); praw[1, 1, 1] = 1e20; praw[2, 0, 3] = -999; p.missing_value = np.float32(-999); p[:] = praw
c = create("count", "i4", ("time", "lat"), fill_value=np.int32(-1))
craw = np.arange(12, dtype="i4").reshape(4, 3); craw[2, 1] = -1; c[:] = craw
s = create("small", "u1", ("lat",), fill_value=np.uint8(255)); s.scale_factor = np.float64(0.5); s[:] = np.array([4, 255, 9], "u1")
s8 = create("only_scale", "i2", ("lon",)); s8.scale_factor = np.float32(0.25); s8[:] = np.arange(5, dtype="i2") - 2
u = create("flags", "i1", ("time",)); u._Unsigned = "true"; u[:] = np.array([-1, 0, 5, -128], "i1")
d.createDimension("step", 3)
h = create("step", "f8", ("step",)); h.units = "hours since 1990-01-01 06:00:00"; h.calendar = "proleptic_gregorian"; h[:] = [0.5, 1.25, 48]
n = create("nl", "f8", ("step",)); n.units = "days since 2001-01-01"; n.calendar = "noleap"; n[:] = [0, 59, 365]
d.createDimension("day", 3)
dd = create("day", "i4", ("day",)); dd.units = "days since 2001-02-27"; dd.calendar = "360_day"; dd[:] = [0, 3, 400]
create("snow", "f4", ("day",))[:] = [1, 2, 3]
d.close()
`

// cfCheck compares each query's .npy with xarray's default decoding of
// the same variable: dtype and values (NaN where masked, NaT for times).
const cfCheck = `import sys, os, numpy as np, xarray as xr
ds = xr.open_dataset(sys.argv[1])
raw = xr.open_dataset(sys.argv[1], mask_and_scale=False, decode_times=False)
out = sys.argv[2]
for name in ["time", "lat", "lon", "temp", "precip", "count", "small", "only_scale", "flags", "step"]:
    got = np.load(os.path.join(out, name + ".npy"))
    want = ds[name].values
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    same = np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
    assert same, (name, got, want)
    r = np.load(os.path.join(out, name + ".raw.npy"))
    assert r.dtype == raw[name].values.dtype and np.array_equal(r, raw[name].values), (name, r, raw[name].values)
# noleap: xarray gives cftime objects; iowarp keeps the numbers.
assert ds["nl"].values.dtype == object
assert np.array_equal(np.load(os.path.join(out, "nl.npy")), raw["nl"].values)
print("ok")
`

// TestQueryCF: `iowarp query` decodes values as xarray does by default
// (_FillValue and missing_value to NaN, masked integers as floats,
// scale_factor/add_offset in xarray's dtype, _Unsigned, CF times to
// datetime64[ns]); --raw gives the stored values; CSV carries the
// coordinate values, ISO 8601 for times.
func TestQueryCF(t *testing.T) {
	omniFixtures(t) // skips without python3-netCDF4
	if out, err := exec.Command("/usr/bin/python3", "-c", "import xarray").CombinedOutput(); err != nil {
		t.Skipf("python3-xarray missing: %s", out)
	}
	dir := t.TempDir()
	nc := filepath.Join(dir, "cf.nc")
	if out, err := exec.Command("/usr/bin/python3", "-c", cfMake, nc).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	for _, name := range []string{"time", "lat", "lon", "temp", "precip", "count", "small", "only_scale", "flags", "step", "nl"} {
		if msg, err := omniRun(t, "query", nc, "--var", name, "--out", filepath.Join(out, name+".npy")); err != nil {
			t.Fatalf("query %s: %v\n%s", name, err, msg)
		}
		if msg, err := omniRun(t, "query", nc, "--var", name, "--raw", "--out", filepath.Join(out, name+".raw.npy")); err != nil {
			t.Fatalf("query --raw %s: %v\n%s", name, err, msg)
		}
	}
	if msg, err := exec.Command("/usr/bin/python3", "-c", cfCheck, nc, out).CombinedOutput(); err != nil {
		t.Fatalf("against xarray: %v\n%s", err, msg)
	}
	csv := filepath.Join(dir, "q.csv")
	msg, err := omniRun(t, "query", nc, "--var", "temp", "--time", "2000-01-01:2000-02-01", "--lat", "-10:0", "--out", csv)
	if err != nil {
		t.Fatalf("query csv: %v\n%s", err, msg)
	}
	if !strings.Contains(msg, ", 2 masked)") {
		t.Errorf("query reports %q, want the 2 masked values counted", msg)
	}
	b, _ := os.ReadFile(csv)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1+2*2*5 || lines[0] != "time,lat,lon,temp" ||
		!strings.HasPrefix(lines[1], "2000-01-01T00:00:00,-10,0,NaN") || !strings.HasPrefix(lines[len(lines)-1], "2000-02-01T00:00:00,0,290,") {
		t.Fatalf("csv:\n%s", b)
	}
	// Every CSV value against xarray's to_dataframe of the same selection.
	check := `import sys, csv, numpy as np, pandas as pd, xarray as xr
ds = xr.open_dataset(sys.argv[1])
want = ds["temp"].sel(time=slice("2000-01-01", "2000-02-01"), lat=slice(-10, 0)).to_dataframe().reset_index()
rows = list(csv.reader(open(sys.argv[2])))[1:]
assert len(rows) == len(want), (len(rows), len(want))
for r, (_, w) in zip(rows, want.iterrows()):
    assert pd.Timestamp(r[0]) == w["time"], (r, w)
    assert float(r[1]) == w["lat"] and float(r[2]) == w["lon"], (r, w)
    assert (np.isnan(w["temp"]) and r[3] == "NaN") or np.float32(r[3]) == np.float32(w["temp"]), (r, w)
print("ok")
`
	if msg, err := exec.Command("/usr/bin/python3", "-c", check, nc, csv).CombinedOutput(); err != nil {
		t.Fatalf("csv against xarray: %v\n%s", err, msg)
	}
	// A calendar datetime64 cannot hold: dates in it, as cftime gives them.
	fsnow := filepath.Join(dir, "snow.csv")
	if msg, err := omniRun(t, "query", nc, "--var", "snow", "--out", fsnow); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	snowCheck := `import sys, csv, xarray as xr
ds = xr.open_dataset(sys.argv[1])
rows = list(csv.reader(open(sys.argv[2])))
assert rows[0] == ["day", "snow"], rows[0]
assert [r[0] for r in rows[1:]] == [t.isoformat() for t in ds["day"].values], (rows, ds["day"].values)
print("ok")
`
	if msg, err := exec.Command("/usr/bin/python3", "-c", snowCheck, nc, fsnow).CombinedOutput(); err != nil {
		t.Fatalf("360_day csv against xarray/cftime: %v\n%s", err, msg)
	}
	fstep := filepath.Join(dir, "step.csv")
	if msg, err := omniRun(t, "query", nc, "--var", "step", "--out", fstep); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	if b, _ := os.ReadFile(fstep); string(b) != "step\n1990-01-01T06:30:00\n1990-01-01T07:15:00\n1990-01-03T06:00:00\n" {
		t.Errorf("step csv %q", b)
	}
}

// TestDescribeNames: describe shows an escaped name (omni.EscapeName)
// beside its stored form, and query reads the variable under it.
func TestDescribeNames(t *testing.T) {
	omniFixtures(t) // skips without python3-h5py
	src := filepath.Join(t.TempDir(), "names.h5")
	mk := `import sys, numpy as np, h5py
f = h5py.File(sys.argv[1], "w")
for n in [b"..", b"\xff\xfe", b"attrs", b"a[b]"]:
    h5py.h5d.create(f.id, n, h5py.h5t.NATIVE_INT32, h5py.h5s.create_simple((2,))).write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 2], "i4"))
f.close()
`
	if out, err := exec.Command("/usr/bin/python3", "-c", mk, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := omniRun(t, "describe", src)
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{`int32 %2E%2E(phony_dim_0=2) (stored as "..")`, `%FF%FE(phony_dim_0=2) (stored as "\xff\xfe")`,
		`%61ttrs(phony_dim_0=2) (stored as "attrs")`, `a%5Bb%5D(phony_dim_0=2) (stored as "a[b]")`} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %s:\n%s", want, out)
		}
	}
	csv := filepath.Join(t.TempDir(), "q.csv")
	if msg, err := omniRun(t, "query", src, "--var", "a%5Bb%5D", "--out", csv); err != nil {
		t.Fatalf("query: %v\n%s", err, msg)
	}
	if b, _ := os.ReadFile(csv); string(b) != "a[b]\n1\n2\n" { // CSV headers hold the stored names
		t.Errorf("query csv %q", b)
	}
	// An HDF5 export writes the stored names back, byte for byte.
	back := filepath.Join(t.TempDir(), "back.h5")
	if msg, err := omniRun(t, "export", src, back); err != nil {
		t.Fatalf("export: %v\n%s", err, msg)
	}
	check := `import sys, h5py
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
assert sorted(a.id.__iter__()) == sorted(b.id.__iter__()), (sorted(a.id.__iter__()), sorted(b.id.__iter__()))
print("ok")
`
	if msg, err := exec.Command("/usr/bin/python3", "-c", check, src, back).CombinedOutput(); err != nil {
		t.Fatalf("names after export: %v\n%s", err, msg)
	}
}

// exportGroupsMake writes an HDF5 file of nested groups, variables on
// different dimensions, and names that are escaped in the model.
const exportGroupsMake = `import sys, numpy as np, h5py
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("t", data=np.arange(4, dtype="f8"))
    f["t"].make_scale("t")
    a = f.create_dataset("air", data=np.arange(12, dtype="f4").reshape(4, 3))
    a.dims[0].attach_scale(f["t"])
    a.attrs["units"] = "K"
    g = f.create_group("obs/station")
    g.attrs["site"] = "north"
    g.create_dataset("count", data=np.arange(5, dtype="i4"))
    g.create_dataset("a[b]", data=np.array([1.5, 2.5]))
    f.create_group("model").create_dataset("grid", data=np.ones((2, 2, 2), dtype="i2"))
`

// exportGroupsCheck reads an export with the reference reader of its
// format and compares every variable of every group with h5py reading the
// source, at the same path under the same (stored) name.
const exportGroupsCheck = `import sys, numpy as np, h5py
src, out, kind = sys.argv[1:4]
want = {}
h5py.File(src).visititems(lambda n, o: want.__setitem__("/" + n, o[()]) if isinstance(o, h5py.Dataset) else None)
if kind == "netcdf":
    import netCDF4
    o = netCDF4.Dataset(out)
    get = lambda p: o[p.lstrip("/")][...]
    assert o["obs/station"].site == "north" and o["air"].units == "K"
elif kind == "hdf5":
    o = h5py.File(out)
    get = lambda p: o[p][()]
    assert o["obs/station"].attrs["site"] in ("north", b"north")
else:
    import zarr
    o = zarr.open_group(out, mode="r")
    get = lambda p: o[p.lstrip("/")][...]
    assert o["obs/station"].attrs["site"] == "north"
for p, w in want.items():
    g = np.asarray(get(p))
    assert g.shape == w.shape and np.array_equal(g, w), (p, g, w)
print(len(want))
`

// TestExportGroups: an export to NetCDF-4, HDF5 and Zarr carries every
// variable of every group (groups as groups, stored names); CSV fails
// naming what one table cannot hold; --split writes one CSV per variable,
// which pandas reads back equal.
func TestExportGroups(t *testing.T) {
	omniFixtures(t) // skips without python3-h5py
	dir := t.TempDir()
	src := filepath.Join(dir, "groups.h5")
	if out, err := exec.Command("/usr/bin/python3", "-c", exportGroupsMake, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	hasZarr := exec.Command("/usr/bin/python3", "-c", "import zarr").Run() == nil
	for _, c := range []struct{ out, kind string }{{"g.nc", "netcdf"}, {"g.h5", "hdf5"}, {"g.zarr", "omni"}} {
		if c.kind == "omni" && !hasZarr {
			continue
		}
		out := filepath.Join(dir, c.out)
		if msg, err := omniRun(t, "export", src, out); err != nil {
			t.Fatalf("export %s: %v\n%s", c.out, err, msg)
		}
		msg, err := exec.Command("/usr/bin/python3", "-c", exportGroupsCheck, src, out, c.kind).CombinedOutput()
		if err != nil || strings.TrimSpace(string(msg)) != "5" {
			t.Fatalf("%s against its reader: %v\n%s", c.out, err, msg)
		}
	}
	_, err := omniRun(t, "export", src, filepath.Join(dir, "g.csv"))
	if err == nil || !strings.Contains(err.Error(), "/obs/station/count (phony_dim_") || !strings.Contains(err.Error(), "--split") {
		t.Fatalf("export to one CSV: %v, want an error naming the variables left over", err)
	}
	split := filepath.Join(dir, "split")
	if msg, err := omniRun(t, "export", src, split, "--format", "csv", "--split"); err != nil {
		t.Fatalf("export --split: %v\n%s", err, msg)
	}
	check := `import sys, os, numpy as np, pandas as pd, h5py
src, d = sys.argv[1:3]
f = h5py.File(src)
air = pd.read_csv(os.path.join(d, "air.csv"))
assert list(air.columns[[0, 2]]) == ["t", "air"] and air.columns[1].startswith("phony_dim_"), air.columns
assert np.array_equal(air["air"].values, f["air"][()].ravel()) and np.array_equal(air["t"].values, np.repeat(f["t"][()], 3))
c = pd.read_csv(os.path.join(d, "obs", "station", "count.csv"))
assert np.array_equal(c["count"].values, f["obs/station/count"][()])
ab = pd.read_csv(os.path.join(d, "obs", "station", "a%5Bb%5D.csv"))
assert list(ab.columns) == ["a[b]"] and np.array_equal(ab["a[b]"].values, f["obs/station/a[b]"][()])
g = pd.read_csv(os.path.join(d, "model", "grid.csv"))
assert len(g) == 8 and list(g.columns)[-1] == "grid"
n = sum(len(fs) for _, _, fs in os.walk(d))
assert n == 5, n
print("ok")
`
	if msg, err := exec.Command("/usr/bin/python3", "-c", check, src, split).CombinedOutput(); err != nil {
		t.Fatalf("split CSVs against h5py: %v\n%s", err, msg)
	}
}

// TestJobRange: an upstream OMNI job's range_off/range_size keep the
// records of temperature's outermost dimension (time) whose first byte
// lies in the range (omni.Cut), with time cut alike, in query (through
// the view engine) and in export, as netCDF4 and xarray read them.
func TestJobRange(t *testing.T) {
	dir := omniFixtures(t)
	reg := filepath.Join(t.TempDir(), "registry")
	nc := filepath.Join(dir, "climate.nc")
	const rec = 18 * 24 * 4 // bytes of one time step of temperature (float32, 18×24)
	job := filepath.Join(t.TempDir(), "job.yaml")
	// Records 10 to 14: 10*rec-5 rounds up to record 10; the range ends
	// 5 bytes into record 15, which starts outside it.
	os.WriteFile(job, []byte("name: demo\ntransfers:\n  - src: file::"+nc+"\n    dst: iowarp::part\n    format: netcdf4\n"+
		"    range_off: "+itoa(10*rec-5)+"\n    range_size: "+itoa(5*rec)+"\n"), 0o644)
	if _, err := omniRun(t, "assimilate", job, "--registry", reg, "--eager"); err != nil {
		t.Fatal(err)
	}
	e, err := omni.Registry{Dir: reg}.Get("part")
	if err != nil || e.RangeOff != 10*rec-5 || e.RangeSize != 5*rec {
		t.Fatalf("entry %+v %v", e, err)
	}
	out := t.TempDir()
	if _, err := omniRun(t, "export", "part", filepath.Join(out, "part.nc"), "--registry", reg); err != nil {
		t.Fatal(err)
	}
	for _, q := range [][]string{
		{"--var", "temperature", "--raw", "--out", filepath.Join(out, "raw.npy")},
		{"--var", "temperature", "--slice", "1:3,:,:", "--raw", "--out", filepath.Join(out, "slice.npy")},
		{"--var", "time", "--out", filepath.Join(out, "time.npy")},
		{"--var", "temperature", "--time", "2024-03-18:2024-03-31", "--raw", "--out", filepath.Join(out, "sel.npy")},
	} {
		if msg, err := omniRun(t, append([]string{"query", "part", "--registry", reg}, q...)...); err != nil {
			t.Fatalf("query %v: %v\n%s", q, err, msg)
		}
	}
	check := `import sys, os, numpy as np, netCDF4, xarray as xr
src, out = sys.argv[1], sys.argv[2]
s = netCDF4.Dataset(src); s.set_auto_mask(False)
x = netCDF4.Dataset(os.path.join(out, "part.nc")); x.set_auto_mask(False)
assert len(x.dimensions["time"]) == 5, x.dimensions["time"]
assert np.array_equal(x["temperature"][:], s["temperature"][10:15])
assert np.array_equal(x["time"][:], s["time"][10:15])
assert np.array_equal(x["lat"][:], s["lat"][:]) and list(x["station"][:]) == list(s["station"][:])
assert np.array_equal(x["forecast/precip"][:], s["forecast/precip"][:])
assert np.array_equal(np.load(os.path.join(out, "raw.npy")), s["temperature"][10:15])
assert np.array_equal(np.load(os.path.join(out, "slice.npy")), s["temperature"][11:13])
t = xr.open_dataset(src)["time"].values
assert np.array_equal(np.load(os.path.join(out, "time.npy")), t[10:15])
want = xr.open_dataset(src, mask_and_scale=False)["temperature"][10:15].sel(time=slice("2024-03-18", "2024-03-31")).values
got = np.load(os.path.join(out, "sel.npy"))
assert got.shape[0] > 0 and np.array_equal(got, want), (got.shape, want.shape)
print("ok")
`
	if b, err := exec.Command("/usr/bin/python3", "-c", check, nc, out).CombinedOutput(); err != nil || !strings.Contains(string(b), "ok") {
		t.Fatalf("check: %v\n%s", err, b)
	}
	// A range in which no record starts is a clear error, nothing recorded.
	os.WriteFile(job, []byte("name: demo\ntransfers:\n  - src: "+nc+"\n    dst: iowarp::none\n    range_off: 1\n    range_size: 100\n"), 0o644)
	if _, err := omniRun(t, "assimilate", job, "--registry", reg); err == nil || !strings.Contains(err.Error(), "no record of /temperature starts") {
		t.Errorf("assimilate of a range holding no record: %v", err)
	}
	if _, err := (omni.Registry{Dir: reg}).Get("none"); !errors.Is(err, omni.ErrNotFound) {
		t.Errorf("a failed assimilation was recorded: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
