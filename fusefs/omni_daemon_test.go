package fusefs

import (
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

	"github.com/iowarp/iowarp/internal/mountinfo"
)

// daemonBin builds cmd/iowarp once per test binary.
var daemonBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func iowarpBinary(t *testing.T) string {
	t.Helper()
	daemonBin.once.Do(func() {
		if daemonBin.dir, daemonBin.err = os.MkdirTemp("", "iowarp-bin-"); daemonBin.err != nil {
			return
		}
		daemonBin.path = filepath.Join(daemonBin.dir, "iowarp")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(goruntime.GOROOT(), "bin", "go")
		}
		if out, err := exec.Command(gobin, "build", "-o", daemonBin.path, "github.com/iowarp/iowarp/cmd/iowarp").CombinedOutput(); err != nil {
			daemonBin.err = fmt.Errorf("go build ./cmd/iowarp: %v\n%s", err, out)
		}
	})
	if daemonBin.err != nil {
		t.Fatal(daemonBin.err)
	}
	return daemonBin.path
}

func removeDaemonBin() {
	if daemonBin.dir != "" {
		os.RemoveAll(daemonBin.dir)
	}
}

// daemon is a real `iowarp mount` child process serving dir, so that a
// test can see it survive (its pid), and measure its memory, apart from
// the test's own.
type daemon struct {
	dir, log string
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
}

// startDaemon runs `iowarp mount` (writeback, a RAM and a file tier) on
// a new directory with the given format-helper deadline and memory, and
// waits for the mount; t.Cleanup stops it with SIGTERM.
func startDaemon(t *testing.T, deadline time.Duration, helperMem int64) *daemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	bin := iowarpBinary(t)
	base := t.TempDir()
	ctl, err := os.MkdirTemp("", "iwctl") // a socket path of under 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	d := &daemon{dir: filepath.Join(base, "mnt"), log: filepath.Join(base, "iowarp.log"), exited: make(chan struct{})}
	for _, sub := range []string{"mnt", "backing", "nvme"} {
		if err := os.Mkdir(filepath.Join(base, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf("backing: %s\nmode: writeback\ncontrol_dir: %s\nformat_helper_deadline: %s\nformat_helper_memory: %d\n"+
		"tiers:\n  - {name: ram, kind: ram, capacity: 64MiB}\n  - {name: nvme, kind: file, dir: %s, capacity: 512MiB}\n",
		filepath.Join(base, "backing"), ctl, deadline, helperMem, filepath.Join(base, "nvme"))
	cfgPath := filepath.Join(base, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command(bin, "mount", d.dir, "--config", cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.stop(t) })
	for start := time.Now(); !isMountPoint(d.dir); time.Sleep(20 * time.Millisecond) {
		if !d.alive() || time.Since(start) > 60*time.Second {
			t.Fatalf("iowarp mount did not mount %s (%v):\n%s", d.dir, d.waitErr, d.logText())
		}
	}
	return d
}

// pid is the daemon's process id.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// alive reports whether the daemon has not exited.
func (d *daemon) alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

func (d *daemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// status reads a kB field (VmRSS, VmHWM) of the daemon's /proc status,
// in bytes.
func (d *daemon) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in the daemon's status", field)
	return 0
}

func (d *daemon) stop(t *testing.T) {
	if d.alive() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("iowarp mount did not stop within 30 s of SIGTERM")
		}
	}
	if isMountPoint(d.dir) {
		exec.Command("umount", "-l", d.dir).Run()
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", d.logText())
	}
}

func isMountPoint(dir string) bool {
	ms, err := mountinfo.Mounts()
	for _, m := range ms {
		if err == nil && m.Point == dir {
			return true
		}
	}
	return false
}
