package fusefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
)

// omniHelperDeadline bounds one helper request in these tests: the file
// that makes libhdf5 loop costs this much.
const omniHelperDeadline = 4 * time.Second

type omniMount struct {
	dir, backing, registry string
	srv                    *Server
	fmts                   *helper.Pool

	logMu sync.Mutex
	logs  []string
}

func (om *omniMount) logf(format string, args ...any) {
	om.logMu.Lock()
	om.logs = append(om.logs, fmt.Sprintf(format, args...))
	om.logMu.Unlock()
}

func (om *omniMount) logLines(substr string) int {
	om.logMu.Lock()
	defer om.logMu.Unlock()
	n := 0
	for _, l := range om.logs {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// omniPython returns a python3 with h5py, netCDF4, numpy and xarray. It
// skips t when none is installed, and fails t when one is but its
// imports fail other than by a missing module (a broken install).
func omniPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		out, err := exec.Command(p, "-c", "import h5py, netCDF4, numpy, xarray").CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return p
		case errors.As(err, &exit) && !strings.Contains(string(out), "ModuleNotFoundError"):
			t.Fatalf("%s: %v\n%s", p, err, out)
		}
	}
	t.Skip("python3 with h5py, netCDF4, numpy, xarray not found (make deps)")
	return ""
}

// newOMNIMount mounts a writeback file system with the /.omni views on,
// format helpers being this test binary.
func newOMNIMount(t *testing.T) *omniMount {
	t.Helper()
	return newOMNIMountMode(t, files.Writeback)
}

// newOMNIMountMode is newOMNIMount in the given mode.
func newOMNIMountMode(t *testing.T, mode files.Mode) *omniMount {
	t.Helper()
	return newOMNIMountWith(t, omniConfig{mode: mode})
}

// omniConfig varies the test mount.
type omniConfig struct {
	mode       files.Mode
	allowOther bool
	retryAfter time.Duration
	wrap       func(Formats) Formats // around the helper pool
	helperMem  uint64                // helper.Options.MemoryLimit
	deadline   time.Duration         // helper.Options.Deadline; 0: omniHelperDeadline
}

// newOMNIMountWith is newOMNIMountMode as c says.
func newOMNIMountWith(t *testing.T, c omniConfig) *omniMount {
	t.Helper()
	mode := c.mode
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	base := t.TempDir()
	om := &omniMount{dir: filepath.Join(base, "mnt"), backing: filepath.Join(base, "backing"), registry: filepath.Join(base, "registry")}
	for _, d := range []string{"mnt", "backing", "tier", "scratch"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 64 << 20},
		{Name: "nvme", Kind: bufferpool.KindFile, Dir: filepath.Join(base, "tier"), Capacity: 256 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	fopts := files.Options{Backing: om.backing, Mode: mode, ScratchDir: filepath.Join(base, "scratch"), NoSpaceWait: 5 * time.Second}
	if mode == files.Scratch {
		fopts.Backing, om.backing = "", ""
	}
	fsys, err := files.New(pool, fopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	if c.deadline == 0 {
		c.deadline = omniHelperDeadline
	}
	om.fmts = helper.New(helper.Options{Size: 2, Deadline: c.deadline, MemoryLimit: c.helperMem})
	t.Cleanup(func() { om.fmts.Close() })
	var fmts Formats = om.fmts
	if c.wrap != nil {
		fmts = c.wrap(fmts)
	}
	om.srv, err = Mount(om.dir, fsys, Options{AllowOther: c.allowOther, OMNI: &OMNIOptions{
		Formats: fmts, Pool: pool, Registry: om.registry, BlockSize: 64 << 10, Logf: om.logf, RetryAfter: c.retryAfter,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50; i++ {
			if om.srv.Unmount() == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		exec.Command("umount", "-l", om.dir).Run()
	})
	if mode == files.Scratch {
		// Helpers keep the files they read open through the mount: stop
		// them before the unmount above.
		t.Cleanup(func() { om.fmts.Close() })
	}
	return om
}

// omniFixtures writes formats/testdata/fixtures.py's files to a temporary
// directory.
func omniFixtures(t *testing.T, py string) string {
	t.Helper()
	if _, err := exec.LookPath("ncgen"); err != nil {
		t.Skip("ncgen not found (netcdf-bin)")
	}
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "formats", "testdata", "fixtures.py")
	dir := t.TempDir()
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("fixtures.py: %v\n%s", err, out)
	}
	return dir
}

// copyIn copies a file into the mount: its pages are dirty in the pool,
// not yet on the backing file, which the helper must still see.
func copyIn(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// omniCheck is run by python3 against the mount: every comparison with
// h5py, netCDF4 and xarray reading the fixtures directly.
const omniCheck = `
import json, os, sys
import numpy as np, h5py, netCDF4, xarray as xr
mnt, fx = sys.argv[1], sys.argv[2]
o = os.path.join(mnt, ".omni", "data")

def same(name, got, want):
    want = np.asarray(want)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), (name, got, want)

with h5py.File(os.path.join(fx, "grid.h5")) as f:
    for name in ["temperature", "time", "lat", "lon", "series", "codes",
                 "entry/instrument/detector/counts", "entry/instrument/detector/mask",
                 "entry/instrument/detector/u16", "entry/instrument/detector/i8",
                 "entry/instrument/detector/u64", "entry/instrument/detector/big",
                 "entry/instrument/detector/scalar", "particles/x", "particles/tag"]:
        if name.startswith("particles/"):
            want = f["particles"][name.split("/")[1]]
        else:
            want = f[name][()]
        d = os.path.join(o, "grid.h5", name)
        stored = want
        if name == "temperature": # scale_factor 1.5, decoded as xarray does (in float32)
            want = want * np.float64(1.5)
            same(name + " data.raw", np.frombuffer(open(os.path.join(d, "data.raw"), "rb").read(), dtype="f4").reshape(want.shape), stored)
        if name == "time": # CF time: datetime64[ns]
            want = np.datetime64("2024-01-01", "ns") + (want * 86400e9).astype("i8").astype("m8[ns]")
        got = np.load(os.path.join(d, "data.npy"))
        same(name, got, want)
        same(name + " mmap", np.load(os.path.join(d, "data.npy"), mmap_mode="r"), want)
        raw = open(os.path.join(d, "data"), "rb").read()
        same(name + " raw", np.frombuffer(raw, dtype=got.dtype).reshape(got.shape), want)
        assert json.load(open(os.path.join(d, "shape"))) == list(np.shape(want)), name
    labels = [s if isinstance(s, bytes) else s.encode() for s in f["labels"][()]]
    assert np.load(os.path.join(o, "grid.h5", "labels", "data.npy")).tolist() == labels
    t = f["temperature"][()] * np.float64(1.5)
    for view, want in [("temperature[0:2,10:20,:]", t[0:2, 10:20, :]),
                       ("temperature[::2,3,5:25:3]", t[::2, 3:4, 5:25:3]),
                       ("temperature[-1]", t[-1:]),
                       ("entry/instrument/detector/counts[1:4,::3]", f["entry/instrument/detector/counts"][1:4, ::3])]:
        p = os.path.join(o, "grid.h5", view, "data.npy")
        same(view, np.load(p), want)
        same(view + " mmap", np.load(p, mmap_mode="r"), want)
    tv = os.path.join(o, "grid.h5", "temperature")
    assert open(os.path.join(tv, "attrs", "units")).read() == "K\n"
    assert os.getxattr(tv, "user.units") == b"K"
    assert "user.valid_range" in os.listxattr(tv)
    assert open(os.path.join(tv, "dtype")).read() == "float32\n"
    assert json.load(open(os.path.join(tv, "dims"))) == ["time", "lat", "lon"]
    assert os.getxattr(os.path.join(o, "grid.h5"), "user.title") == b"grid fixture"
    assert open(os.path.join(o, "grid.h5", "attrs", "title")).read() == "grid fixture\n"
    lines = open(os.path.join(o, "grid.h5", "lat", "data.csv")).read().splitlines()
    assert lines[0] == "lat" and len(lines) == 21 and float(lines[1]) == float(f["lat"][0]), lines[:3]
    lines = open(os.path.join(o, "grid.h5", "temperature[0:1,0:2,0:2]", "data.csv")).read().splitlines()
    assert lines[0] == "time,lat,lon,temperature" and len(lines) == 5, lines
    assert lines[1].startswith("2024-01-01T00:00:00,-47.5,0,"), lines

schema = json.load(open(os.path.join(o, "grid.h5", "schema.json")))
assert schema["format"] == "hdf5" and any(v["name"] == "temperature" for v in schema["root"]["variables"])

nc = netCDF4.Dataset(os.path.join(fx, "climate.nc"))
nc.set_auto_mask(False)
for name in ["temperature", "time", "lat", "forecast/precip", "forecast/count"]:
    want = nc[name][:]
    if name == "time": # CF time: datetime64[ns], as xarray decodes it
        want = xr.open_dataset(os.path.join(fx, "climate.nc"))["time"].values
    same(name, np.load(os.path.join(o, "climate.nc", name, "data.npy")), want)
view = "temperature@time=2024-01-01:2024-06-30,lat=-10:10"
want = xr.open_dataset(os.path.join(fx, "climate.nc"), mask_and_scale=False)["temperature"].sel(
    time=slice("2024-01-01", "2024-06-30"), lat=slice(-10, 10)).values
same(view, np.load(os.path.join(o, "climate.nc", view, "data.npy")), want)
print("ok")
`

func TestOMNIViews(t *testing.T) {
	py := omniPython(t)
	fx := omniFixtures(t, py)
	om := newOMNIMount(t)
	for _, f := range []string{"grid.h5", "climate.nc", "table.csv"} {
		copyIn(t, filepath.Join(fx, f), filepath.Join(om.dir, "data", f))
	}
	ov := filepath.Join(om.dir, ".omni", "data")

	t.Run("hidden", func(t *testing.T) {
		names := readDirNames(t, om.dir)
		if slices.Contains(names, ".omni") {
			t.Errorf("root lists .omni: %v", names)
		}
		if st, err := os.Stat(filepath.Join(om.dir, ".omni")); err != nil || !st.IsDir() {
			t.Fatalf("stat .omni: %v", err)
		}
		if got := readDirNames(t, ov); !slices.Equal(got, []string{"climate.nc", "grid.h5", "table.csv"}) {
			t.Errorf("ls .omni/data = %v", got)
		}
	})
	t.Run("ls", func(t *testing.T) {
		got := readDirNames(t, filepath.Join(ov, "grid.h5"))
		for _, want := range []string{"schema.json", "attrs", "temperature", "time", "lat", "lon", "entry", "particles", "labels"} {
			if !slices.Contains(got, want) {
				t.Errorf("ls grid.h5 = %v, missing %s", got, want)
			}
		}
		got = readDirNames(t, filepath.Join(ov, "grid.h5", "temperature"))
		if want := []string{"attrs", "data", "data.csv", "data.npy", "data.raw", "dims", "dtype", "shape"}; !slices.Equal(got, want) {
			t.Errorf("ls temperature = %v, want %v", got, want)
		}
		got = readDirNames(t, filepath.Join(ov, "grid.h5", "entry", "instrument", "detector"))
		if !slices.Contains(got, "counts") {
			t.Errorf("ls detector = %v", got)
		}
		got = readDirNames(t, filepath.Join(ov, "table.csv"))
		if !slices.Contains(got, "value") {
			t.Errorf("ls table.csv = %v", got)
		}
		st, err := os.Stat(filepath.Join(ov, "grid.h5", "temperature", "data.npy"))
		if err != nil || st.Size() != 128+6*20*30*4 {
			t.Errorf("stat data.npy: %v size %d", err, st.Size())
		}
	})
	t.Run("python", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "check.py")
		os.WriteFile(script, []byte(omniCheck), 0o644)
		out, err := exec.Command(py, script, om.dir, fx).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("check.py: %v\n%s", err, out)
		}
	})
	t.Run("warm", func(t *testing.T) {
		p := filepath.Join(ov, "grid.h5", "temperature", "data.npy")
		first, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before := om.srv.OMNIStats()
		second, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		after := om.srv.OMNIStats()
		if string(first) != string(second) {
			t.Fatal("second read differs")
		}
		if after.BlockReads != before.BlockReads || after.BlockHits <= before.BlockHits {
			t.Errorf("second read: helper block reads %d -> %d, pool hits %d -> %d; want served from the pool",
				before.BlockReads, after.BlockReads, before.BlockHits, after.BlockHits)
		}
	})
	t.Run("readonly", func(t *testing.T) {
		for _, err := range []error{
			os.WriteFile(filepath.Join(ov, "grid.h5", "temperature", "data"), []byte("x"), 0o644),
			os.WriteFile(filepath.Join(ov, "grid.h5", "new"), []byte("x"), 0o644),
			os.Mkdir(filepath.Join(ov, "grid.h5", "dir"), 0o755),
			os.Remove(filepath.Join(ov, "grid.h5", "schema.json")),
			syscall.Setxattr(filepath.Join(ov, "grid.h5", "temperature"), "user.units", []byte("C"), 0),
		} {
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("write under .omni: %v, want EROFS", err)
			}
		}
		for _, name := range []string{"nosuch", "temperature[0:", "temperature@nodim=1:2"} {
			if _, err := os.Stat(filepath.Join(ov, "grid.h5", name)); err == nil {
				t.Errorf("stat %s succeeded", name)
			}
		}
	})
	t.Run("registry", func(t *testing.T) {
		ds, err := om.fmts.Open(context.Background(), filepath.Join(fx, "climate.nc"))
		if err != nil {
			t.Fatal(err)
		}
		e := omni.Entry{Name: "clim", Source: filepath.Join(om.dir, "data", "climate.nc"), Format: ds.Format}
		if err := (omni.Registry{Dir: om.registry}).Add(e, ds); err != nil {
			t.Fatal(err)
		}
		if got := readDirNames(t, filepath.Join(om.dir, ".omni")); !slices.Equal(got, []string{"clim"}) {
			t.Errorf("ls .omni = %v", got)
		}
		if got := readDirNames(t, filepath.Join(om.dir, ".omni", "clim")); !slices.Contains(got, "temperature") {
			t.Errorf("ls .omni/clim = %v", got)
		}
		// A job's dataset_filter is applied to what the entry shows.
		e.Name, e.Filter = "climt", "/temperature"
		if err := (omni.Registry{Dir: om.registry}).Add(e, ds); err != nil {
			t.Fatal(err)
		}
		got := readDirNames(t, filepath.Join(om.dir, ".omni", "climt"))
		if !slices.Contains(got, "temperature") || slices.Contains(got, "lat") {
			t.Errorf("ls .omni/climt (dataset_filter /temperature) = %v", got)
		}
		if _, err := os.Stat(filepath.Join(om.dir, ".omni", "climt", "lat")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat of a variable the filter leaves out: %v", err)
		}
		// Its views still select by coordinates.
		if _, err := os.Stat(filepath.Join(om.dir, ".omni", "climt", "temperature@lat=-10:10", "data.npy")); err != nil {
			t.Errorf("coordinate view of a filtered entry: %v", err)
		}
		if got := readDirNames(t, filepath.Join(om.dir, ".omni", "clim")); !slices.Contains(got, "lat") {
			t.Errorf("the unfiltered entry lost lat: %v", got)
		}
		// A job's byte range keeps the records of temperature's time
		// axis whose first byte lies in it (omni.Cut): 10 to 14.
		const rec = 18 * 24 * 4
		e.Name, e.Filter, e.RangeOff, e.RangeSize = "climr", "", 10*rec-5, 5*rec
		if err := (omni.Registry{Dir: om.registry}).Add(e, ds); err != nil {
			t.Fatal(err)
		}
		check := `import sys, os, json, numpy as np, xarray as xr
o, src = sys.argv[1], sys.argv[2]
x = xr.open_dataset(src)
def same(name, got, want):
    assert got.shape == want.shape, (name, got.shape, want.shape)
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), name
for view, want in [("temperature", x["temperature"].values[10:15]), ("time", x["time"].values[10:15]),
                   ("lat", x["lat"].values), ("temperature[1:3,0:2]", x["temperature"].values[11:13, 0:2]),
                   ("temperature@time=2024-03-18:2024-03-31", x["temperature"].values[11:13])]:
    same(view, np.load(os.path.join(o, view, "data.npy")), want)
assert json.load(open(os.path.join(o, "temperature", "shape"))) == [5, 18, 24]
lines = open(os.path.join(o, "temperature[0:1,0:1,0:1]", "data.csv")).read().splitlines()
assert lines[1].startswith("2024-03-11T00:00:00,"), lines
assert json.load(open(os.path.join(o, "schema.json")))["root"]["dims"][0]["size"] == 5
print("ok")
`
		out, err := exec.Command(py, "-c", check, filepath.Join(om.dir, ".omni", "climr"), filepath.Join(fx, "climate.nc")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ok") {
			t.Fatalf("range check: %v\n%s", err, out)
		}
		// The whole file's views are unchanged beside it.
		if b, err := os.ReadFile(filepath.Join(om.dir, ".omni", "clim", "temperature", "shape")); err != nil || !strings.Contains(string(b), "53") {
			t.Errorf("shape of the whole entry's temperature: %q %v", b, err)
		}
	})
}

// TestOMNITar: every file of a dataset's view tree reports its true
// size, so tar archives it whole: each file extracted from the archive
// equals the file read through the views (data.csv reported size 0, and
// tar copied it empty).
func TestOMNITar(t *testing.T) {
	py := omniPython(t)
	fx := omniFixtures(t, py)
	om := newOMNIMount(t)
	copyIn(t, filepath.Join(fx, "climate.nc"), filepath.Join(om.dir, "climate.nc"))
	tree := filepath.Join(om.dir, ".omni", "climate.nc")
	out := t.TempDir()
	tarball := filepath.Join(t.TempDir(), "v.tar")
	if b, err := exec.Command("tar", "-C", tree, "-cf", tarball, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	if b, err := exec.Command("tar", "-C", out, "-xf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, b)
	}
	n, csvs := 0, 0
	err := filepath.WalkDir(tree, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Size() != int64(len(want)) {
			t.Errorf("%s: stat size %d, %d bytes read", rel, st.Size(), len(want))
		}
		got, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes from tar, %d read", rel, len(got), len(want))
		}
		n++
		if filepath.Base(p) == "data.csv" && len(want) > 0 {
			csvs++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 || csvs < 2 {
		t.Fatalf("%d files, %d non-empty data.csv in the tree", n, csvs)
	}
}

// TestOMNIChangedSource: a file rewritten through the mount shows its new
// contents at the next open of a view (its dirty pages written back for
// the helper first).
func TestOMNIChangedSource(t *testing.T) {
	py := omniPython(t)
	checkRewrite(t, py, newOMNIMount(t))
}

// checkRewrite writes v.h5 through the mount twice with h5py, each time
// with other values, and reads its view after each write.
func checkRewrite(t *testing.T, py string, om *omniMount) {
	t.Helper()
	f := filepath.Join(om.dir, "v.h5")
	write := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("x", data=np.arange(1000, dtype="i4") * int(sys.argv[2]), chunks=(100,))
`
	npy := filepath.Join(om.dir, ".omni", "v.h5", "x", "data")
	for _, k := range []int{1, 3} {
		if out, err := exec.Command(py, "-c", write, f, fmt.Sprint(k)).CombinedOutput(); err != nil {
			t.Fatalf("h5py: %v\n%s", err, out)
		}
		b, err := os.ReadFile(npy)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 4000 || b[4*999] != byte(999*k) || b[4*999+1] != byte((999*k)>>8) {
			t.Fatalf("k=%d: got %d bytes, last element % x", k, len(b), b[len(b)-4:])
		}
	}
}

// TestOMNIMalformed: files that crash libhdf5 (shared/testdata/
// hdf5-malformed) and broken files (truncated, random bytes behind an HDF5
// signature, a NetCDF header that lies) give EIO within the helper
// deadline and one log line each, or (two of the CVE files, whose crash
// paths our reader does not take) a view without data; the mount and
// other datasets keep working.
func TestOMNIMalformed(t *testing.T) {
	py := omniPython(t)
	fx := omniFixtures(t, py)
	cves, _ := filepath.Glob(filepath.Join("..", "formats", "testdata", "hdf5-malformed", "*.h5"))
	if len(cves) == 0 {
		t.Fatal("formats/testdata/hdf5-malformed/*.h5 not found")
	}
	om := newOMNIMount(t)
	copyIn(t, filepath.Join(fx, "grid.h5"), filepath.Join(om.dir, "good.h5"))
	goodData := filepath.Join(om.dir, ".omni", "good.h5", "temperature", "data")
	broken := []string{filepath.Join(fx, "truncated.h5"), filepath.Join(fx, "random.h5"), filepath.Join(fx, "lying.nc")}
	for _, src := range append(cves, broken...) {
		name := filepath.Base(src)
		mustFail := slices.Contains(broken, src)
		copyIn(t, src, filepath.Join(om.dir, "bad", name))
		view := filepath.Join(om.dir, ".omni", "bad", name)
		start := time.Now()
		err := walkView(view)
		took := time.Since(start)
		switch {
		case err == nil && !mustFail:
		case !errors.Is(err, syscall.EIO):
			t.Errorf("%s: reading the view: %v, want EIO", name, err)
		}
		if took > 2*omniHelperDeadline+3*time.Second {
			t.Errorf("%s: done after %v, deadline %v", name, took, omniHelperDeadline)
		}
		start = time.Now()
		if err2 := walkView(view); (err2 == nil) != (err == nil) || errors.Is(err2, syscall.EIO) != errors.Is(err, syscall.EIO) || time.Since(start) > time.Second {
			t.Errorf("%s: second walk: %v after %v, want %v at once", name, err2, time.Since(start), err)
		}
		wantLines := 0
		if err != nil {
			wantLines = 1
		}
		if n := om.logLines(name); n != wantLines {
			t.Errorf("%s: %d log lines, want %d: %q", name, n, wantLines, om.logs)
		}
		if b, err := os.ReadFile(goodData); err != nil || len(b) != 6*20*30*4 {
			t.Errorf("after %s: good dataset: %v (%d bytes)", name, err, len(b))
		}
		t.Logf("%s: %v in %v", name, err, took.Round(time.Millisecond))
	}
}

// walkView lists a dataset view and reads every variable's data; it
// returns the first error.
func walkView(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		if !de.IsDir() || de.Name() == "attrs" {
			continue
		}
		if _, err := os.ReadFile(filepath.Join(p, "data")); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := walkView(p); err != nil {
			return err
		}
	}
	return nil
}

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ls %s: %v", dir, err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// omniScratchCheck reads views of the fixtures copied into a scratch
// mount from threads at once (cold blocks, more than go-fuse's 12
// background requests) and compares them with h5py and netCDF4 reading
// the originals.
const omniScratchCheck = `
import os, sys
from concurrent.futures import ThreadPoolExecutor
import numpy as np, h5py, netCDF4
mnt, fx, which = sys.argv[1], sys.argv[2], sys.argv[3]
o = os.path.join(mnt, ".omni", "data")
jobs = []
if which == "h5":
    with h5py.File(os.path.join(fx, "grid.h5")) as f:
        t = f["temperature"][()] * np.float64(1.5) # scale_factor, decoded
        c = f["entry/instrument/detector/counts"][()]
        jobs += [("grid.h5", "temperature", t), ("grid.h5", "entry/instrument/detector/counts", c)]
        jobs += [("grid.h5", "temperature[%d]" % i, t[i:i+1]) for i in range(t.shape[0])]
        jobs += [("grid.h5", "temperature[:,%d,:]" % i, t[:, i:i+1, :]) for i in range(12)]
else:
    nc = netCDF4.Dataset(os.path.join(fx, "climate.nc"))
    nc.set_auto_mask(False)
    t = nc["temperature"][:]
    jobs += [("climate.nc", "temperature", t), ("climate.nc", "forecast/precip", nc["forecast/precip"][:])]
    jobs += [("climate.nc", "temperature[%d]" % i, t[i:i+1]) for i in range(min(t.shape[0], 14))]
def check(job):
    ds, view, want = job
    got = np.load(os.path.join(o, ds, view, "data.npy"))
    assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True), (ds, view)
with ThreadPoolExecutor(16) as ex:
    list(ex.map(check, jobs))
print("ok")
`

// TestOMNIScratch: in scratch mode (no backing copy) the helpers read the
// files through the mount itself: fresh files, rewritten files,
// concurrent readers whose view reads fill the kernel's background queue
// while the helpers read the sources, and malformed files (EIO within
// the deadline).
func TestOMNIScratch(t *testing.T) {
	py := omniPython(t)
	fx := omniFixtures(t, py)
	om := newOMNIMountMode(t, files.Scratch)
	for _, f := range []string{"grid.h5", "climate.nc"} {
		copyIn(t, filepath.Join(fx, f), filepath.Join(om.dir, "data", f))
	}
	t.Run("concurrent", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "check.py")
		os.WriteFile(script, []byte(omniScratchCheck), 0o644)
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for _, which := range []string{"h5", "nc"} {
			cmd := exec.Command(py, script, om.dir, fx, which)
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		start := time.Now()
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil || !strings.Contains(outs[i].String(), "ok") {
				t.Errorf("check.py: %v\n%s", err, outs[i])
			}
		}
		if took := time.Since(start); took > omniHelperDeadline {
			t.Errorf("views took %v: a helper waited on the daemon until its deadline", took)
		}
		if n := om.logLines(""); n != 0 {
			t.Errorf("%d failures logged: %q", n, om.logs)
		}
	})
	t.Run("rewrite", func(t *testing.T) { checkRewrite(t, py, om) })
	t.Run("malformed", func(t *testing.T) {
		for _, name := range []string{"truncated.h5", "lying.nc"} {
			copyIn(t, filepath.Join(fx, name), filepath.Join(om.dir, "bad", name))
			start := time.Now()
			err := walkView(filepath.Join(om.dir, ".omni", "bad", name))
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("%s: %v, want EIO", name, err)
			}
			if took := time.Since(start); took > 2*omniHelperDeadline+3*time.Second {
				t.Errorf("%s: done after %v, deadline %v", name, took, omniHelperDeadline)
			}
		}
	})
}
