package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
	if mal, _ := filepath.Glob("/work/shared/testdata/hdf5-malformed/cve-2018-11205.h5"); len(mal) > 0 {
		if _, err := omniRun(t, "assimilate", mal[0], "--eager", "--registry", reg); err == nil || !strings.Contains(err.Error(), "crashed") {
			t.Errorf("assimilate of a crashing file: %v", err)
		}
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
	outNC := filepath.Join(t.TempDir(), "x.nc")
	if _, err := omniRun(t, "export", "clim", outNC, "--registry", reg); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("ncdump", "-h", outNC).CombinedOutput(); err != nil {
		t.Errorf("ncdump of export: %v\n%s", err, b)
	}
}
