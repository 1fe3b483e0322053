package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
