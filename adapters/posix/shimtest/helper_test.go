package shimtest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/leakcheck"
)

// One build and one mount serve every test of the binary.
var (
	setupOnce sync.Once
	setupErr  error
	work      string // temp dir: binaries, mount, backing
	lib       string // libiowarp.so
	iowarp    string // the CLI
	mnt       string
	backing   string
	daemon    *exec.Cmd
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		teardown()
		return code
	}))
}

func goBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(goruntime.GOROOT(), "bin", "go")
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "..")
}

func build() error {
	var err error
	work, err = os.MkdirTemp("", "iowarp-shim-")
	if err != nil {
		return err
	}
	lib = filepath.Join(work, "libiowarp.so")
	iowarp = filepath.Join(work, "iowarp")
	for _, args := range [][]string{
		{"build", "-buildmode=c-shared", "-o", lib, "./adapters/posix"},
		{"build", "-o", iowarp, "./cmd/iowarp"},
	} {
		cmd := exec.Command(goBin(), args...)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %v\n%s", args, err, out)
		}
	}
	return nil
}

// mountDaemon runs `iowarp mount` in the foreground and waits for the
// mount to appear.
func mountDaemon() error {
	mnt = filepath.Join(work, "mnt")
	backing = filepath.Join(work, "backing")
	for _, d := range []string{mnt, backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	daemon = exec.Command(iowarp, "mount", mnt, "--backing", backing, "--ram", "1GiB",
		"--control-dir", filepath.Join(work, "ctl"))
	daemon.Stdout, daemon.Stderr = os.Stderr, os.Stderr
	if err := daemon.Start(); err != nil {
		return err
	}
	for i := 0; i < 200; i++ {
		if mounted(mnt) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not mount", mnt)
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return bytes.Contains(b, []byte(" "+dir+" "))
}

func teardown() {
	if daemon != nil && daemon.Process != nil {
		daemon.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			daemon.Process.Kill()
		}
	}
	if work != "" {
		os.RemoveAll(work)
	}
}

// setup skips without root or FUSE, and returns a fresh directory on the
// mount and one on tmpfs for the comparison run.
func setup(t *testing.T) (onMount, onTmpfs string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
	setupOnce.Do(func() {
		if setupErr = build(); setupErr == nil {
			setupErr = mountDaemon()
		}
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	name := strings.NewReplacer("/", "_").Replace(t.Name())
	onMount = filepath.Join(mnt, name)
	os.RemoveAll(onMount)
	if err := os.MkdirAll(onMount, 0o755); err != nil {
		t.Fatal(err)
	}
	onTmpfs, err := os.MkdirTemp("/dev/shm", "iowarp-cmp-")
	if err != nil {
		onTmpfs = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(onTmpfs) })
	}
	return onMount, onTmpfs
}

// Report is the sum of the IOWARP_REPORT lines of a run.
type Report struct {
	Procs, Children                              int
	Opens, Calls, Stdio, MPI, HandshakeFail      int64
	FastRead, FastWrite, KernelRead, KernelWrite int64
	FastHits, FastMisses                         int64
	IPCRead, IPCWrite                            int64
	IPCLease                                     int64 // lease refills granted over runtime/ipc
	// Metadata: fstatfs probes made and saved, grants asked for and
	// skipped (opens without I/O), fstat answered by the kernel and by
	// the page table.
	Statfs, StatfsCached, Grants, GrantsSkipped, FstatKernel, FstatCached int64
}

func parseReport(t *testing.T, path string) Report {
	t.Helper()
	var r Report
	f, err := os.Open(path)
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "iowarp-report" {
			continue
		}
		r.Procs++
		for _, kv := range fields[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "child":
				r.Children += int(n)
			case "opens":
				r.Opens += n
			case "calls":
				r.Calls += n
			case "stdio":
				r.Stdio += n
			case "mpi":
				r.MPI += n
			case "handshake_fail":
				r.HandshakeFail += n
			case "fast_read":
				r.FastRead += n
			case "fast_write":
				r.FastWrite += n
			case "kernel_read":
				r.KernelRead += n
			case "kernel_write":
				r.KernelWrite += n
			case "fast_hits":
				r.FastHits += n
			case "fast_misses":
				r.FastMisses += n
			case "ipc_read":
				r.IPCRead += n
			case "ipc_write":
				r.IPCWrite += n
			case "ipc_lease":
				r.IPCLease += n
			case "statfs":
				r.Statfs += n
			case "statfs_cached":
				r.StatfsCached += n
			case "grants":
				r.Grants += n
			case "grants_skipped":
				r.GrantsSkipped += n
			case "fstat_kernel":
				r.FstatKernel += n
			case "fstat_cached":
				r.FstatCached += n
			}
		}
	}
	return r
}

// run runs argv in dir, with the shim when shim is set, and returns its
// stdout and the summed report.
func run(t *testing.T, dir string, shim bool, extraEnv []string, argv ...string) (string, Report) {
	t.Helper()
	rep := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	if shim {
		cmd.Env = append(cmd.Env, "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v (shim %v) in %s: %v\nstdout:\n%s\nstderr:\n%s", argv, shim, dir, err, out, stderr.String())
	}
	return string(out), parseReport(t, rep)
}

// compare runs argv on tmpfs without the shim and on the mount with it,
// and requires the same stdout (with the directory names replaced).
func compare(t *testing.T, argv ...string) Report {
	t.Helper()
	onMount, onTmpfs := setup(t)
	want, _ := run(t, onTmpfs, false, nil, argv...)
	got, rep := run(t, onMount, true, nil, argv...)
	want = strings.ReplaceAll(want, onTmpfs, "DIR")
	got = strings.ReplaceAll(got, onMount, "DIR")
	if got != want {
		t.Fatalf("%v: on the mount with the shim:\n%s\non tmpfs:\n%s", argv, got, want)
	}
	return rep
}

// cc compiles testdata/name.c (with mpicc for MPI programs).
func cc(t *testing.T, name string, compiler string) string {
	t.Helper()
	if _, err := exec.LookPath(compiler); err != nil {
		t.Skipf("no %s", compiler)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", name+".c"))
	bin := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command(compiler, "-O2", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", compiler, name, err, out)
	}
	return bin
}

// requireKernelPath checks that our fds carried the bytes on the kernel
// path (phase 1 and 2: no fast path yet for this kind of I/O).
func requireOurs(t *testing.T, r Report) {
	t.Helper()
	if r.Opens == 0 || r.Calls == 0 {
		t.Fatalf("the shim took no fd as its own: %+v", r)
	}
	if r.HandshakeFail != 0 {
		t.Fatalf("handshake failures: %+v", r)
	}
}
