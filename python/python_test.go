package python

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		if buildDir != "" {
			os.RemoveAll(buildDir)
		}
		return code
	}))
}

const python = "/usr/bin/python3"

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// built builds cmd/iowarp and the C API library once per test binary.
func built(t *testing.T) (bin, lib string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "iowarp-py-")
		if buildErr != nil {
			return
		}
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(goruntime.GOROOT(), "bin", "go")
		}
		for _, args := range [][]string{
			{"build", "-o", filepath.Join(buildDir, "iowarp"), "github.com/iowarp/iowarp/cmd/iowarp"},
			{"build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, "libiowarp_py.so"), "github.com/iowarp/iowarp/adapters/capi"},
			{"build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, "libiowarp.so"), "github.com/iowarp/iowarp/adapters/posix"},
		} {
			if out, err := exec.Command(gobin, args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "iowarp"), filepath.Join(buildDir, "libiowarp_py.so")
}

// requirePython skips unless /usr/bin/python3 has the modules (Debian
// packages of APT_PACKAGES) and this process can mount.
func requirePython(t *testing.T, modules ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
	script := "import " + strings.Join(modules, ", ")
	if out, err := exec.Command(python, "-c", script).CombinedOutput(); err != nil {
		t.Skipf("%s lacks a module (make deps installs them): %v\n%s", python, err, out)
	}
}

// daemon is a running `iowarp mount`.
type daemon struct {
	bin, lib, dir, backing, ctl, log string
	cmd                              *exec.Cmd
	exited                           chan struct{}
}

// startDaemon mounts a new daemon under t.TempDir; t.Cleanup stops it.
func startDaemon(t *testing.T) *daemon {
	t.Helper()
	bin, lib := built(t)
	base := t.TempDir()
	ctl, err := os.MkdirTemp("", "iwpy") // sockets: paths of at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	d := &daemon{bin: bin, lib: lib, dir: filepath.Join(base, "mnt"), backing: filepath.Join(base, "backing"),
		ctl: ctl, log: filepath.Join(base, "iowarp.log"), exited: make(chan struct{})}
	for _, p := range []string{d.dir, d.backing} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command(bin, "mount", d.dir, "--backing", d.backing, "--ram", "256MiB", "--control-dir", ctl)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// The registry and the search index of this daemon stay in base.
	d.cmd.Env = append(os.Environ(), "IOWARP_STATE_DIR="+filepath.Join(base, "state"))
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for !isMounted(d.dir) {
		select {
		case <-d.exited:
			t.Fatalf("iowarp mount exited before mounting:\n%s", d.logText())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not mounted after 30s:\n%s", d.dir, d.logText())
		}
	}
	return d
}

func (d *daemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

func (d *daemon) stop(t *testing.T) {
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(2 * time.Minute):
			d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("iowarp did not exit within 2 minutes of SIGTERM")
		}
	}
	if isMounted(d.dir) {
		exec.Command("umount", "-l", d.dir).Run()
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", d.logText())
	}
}

func isMounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && fields[4] == dir {
			return true
		}
	}
	return false
}

// pipInstall installs the package from a copy of python/ (pip builds in
// its source tree) into a new directory with the Debian toolchain, offline:
// the metadata it writes (the xarray entry point) is what the tests see.
func pipInstall(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("cp", "-r", ".", src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	target := filepath.Join(t.TempDir(), "site")
	cmd := exec.Command(python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
		"--disable-pip-version-check", "--target", target, src)
	cmd.Env = append(os.Environ(), "PIP_NO_CACHE_DIR=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	return target
}

// env is the environment the Python tests run in.
func (d *daemon) env(site string) []string {
	return append(os.Environ(), "PYTHONPATH="+site, "IOWARP_STATE_DIR="+filepath.Join(filepath.Dir(d.dir), "state"), "IOWARP_LIB="+d.lib, "IOWARP_MOUNT="+d.dir,
		"IOWARP_TEST_BACKING="+d.backing, "IOWARP_CONTROL_DIR="+d.ctl, "IOWARP_IPC_SOCKET=", "IOWARP_TEST_BIN="+d.bin,
		"PYTHONDONTWRITEBYTECODE=1")
}

// TestPython runs python/tests/test_iowarp.py (buckets over the ipc,
// OMNI datasets against netCDF4 and h5py, the xarray backend against
// xarray's netcdf4 and zarr engines) on the installed package.
func TestPython(t *testing.T) {
	requirePython(t, "numpy", "h5py", "netCDF4", "xarray", "zarr")
	d := startDaemon(t)
	site := pipInstall(t)
	cmd := exec.Command(python, "-m", "unittest", "-v", "test_iowarp")
	cmd.Dir = "tests"
	cmd.Env = d.env(site)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if !strings.Contains(string(out), "\nOK") {
		t.Fatalf("no OK from unittest:\n%s", out)
	}
}

// TestPythonUnderShim: under `iowarp run` (LD_PRELOAD of libiowarp.so)
// the package reads datasets and searches, and refuses buckets with a
// clear error instead of loading a second Go runtime.
func TestPythonUnderShim(t *testing.T) {
	requirePython(t, "numpy", "netCDF4")
	d := startDaemon(t)
	nc := filepath.Join(d.dir, "shim.nc")
	script := `
import sys, errno, numpy as np, netCDF4, iowarp
nc = sys.argv[1]
with netCDF4.Dataset(nc, "w") as f:
    f.createDimension("x", 5)
    v = f.createVariable("depth", "f8", ("x",)); v.units = "m"; v[:] = np.arange(5.0)
np.testing.assert_array_equal(iowarp.omni.open(nc)["depth"][1:4], [1.0, 2.0, 3.0])
assert [h["variable"] for h in iowarp.search("depth")] == ["/depth"], iowarp.search("depth")
try:
    iowarp.Bucket("b")
except iowarp.Error as e:
    assert e.errno == errno.ENOTSUP and "LD_PRELOAD" in str(e), e
else:
    raise AssertionError("a bucket under the shim")
print("ok")
`
	cmd := exec.Command(python, "-c", script, nc)
	cmd.Env = append(d.env("."), "LD_PRELOAD="+filepath.Join(filepath.Dir(d.lib), "libiowarp.so"))
	cmd.Dir = "." // the package from the source tree: python/iowarp
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("under the shim: %v\n%s", err, out)
	}
}
