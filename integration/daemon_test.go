package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemon: `iowarp runtime start --config FILE --daemon` returns once the
// mount is ready; `runtime status` finds it; SIGHUP reopens its log file
// and nothing else; `runtime stop` drains it, unmounts and waits for the
// exit.
func TestDaemon(t *testing.T) {
	bin := iowarpBin(t)
	base := t.TempDir()
	mnt, backing := filepath.Join(base, "mnt"), filepath.Join(base, "backing")
	os.Mkdir(mnt, 0o755)
	os.Mkdir(backing, 0o755)
	ctl, err := os.MkdirTemp("", "iwctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	cfg := filepath.Join(base, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("mount: %s\n", mnt)+
		config{ram: "64MiB", file: "none"}.yaml(base, backing, ctl)), 0o644)
	logFile := filepath.Join(base, "daemon.log")
	t.Cleanup(func() {
		if isMounted(mnt) {
			lazyUnmount(mnt)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("daemon log:\n%s", b)
		}
	})

	out, code := run(bin, "runtime", "start", "--config", cfg, "--daemon", "--log-file", logFile)
	if code != 0 {
		t.Fatalf("runtime start --daemon: exit %d\n%s", code, out)
	}
	if !isMounted(mnt) {
		t.Fatalf("runtime start --daemon returned before %s was mounted", mnt)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("daemon"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run(bin, "runtime", "status", mnt, "--control-dir", ctl)
	if code != 0 || !strings.Contains(out, "served by pid") {
		t.Fatalf("runtime status: exit %d\n%s", code, out)
	}
	var pid int
	fmt.Sscanf(out[strings.Index(out, "pid ")+4:], "%d", &pid)

	// logrotate: rename, SIGHUP. The detached daemon logs to a new file
	// (its stdout and stderr too) and keeps serving.
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "new daemon log after SIGHUP", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "reopened log "+logFile)
	})
	if !isMounted(mnt) || syscall.Kill(pid, 0) != nil {
		t.Fatalf("after SIGHUP: mounted %v, daemon alive %v", isMounted(mnt), syscall.Kill(pid, 0) == nil)
	}

	out, code = run(bin, "runtime", "stop", mnt, "--control-dir", ctl, "--timeout", "2m")
	if code != 0 {
		t.Fatalf("runtime stop: exit %d\n%s", code, out)
	}
	if isMounted(mnt) {
		t.Errorf("%s still mounted after runtime stop", mnt)
	}
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("daemon pid %d still alive after runtime stop", pid)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || string(b) != "daemon" {
		t.Errorf("backing after stop: %q, %v", b, err)
	}
	if out, code := run(bin, "runtime", "status", mnt, "--control-dir", ctl); code == 0 {
		t.Errorf("runtime status after stop: exit 0\n%s", out)
	}
}

// TestExternalUmount: `umount DIR` from outside makes the daemon drain
// and exit 0, with everything written back.
func TestExternalUmount(t *testing.T) {
	m := startMount(t, config{ram: "32MiB", file: "256MiB", bandwidth: "64MiB/s"})
	want := writeRandomFile(t, m.path("data"), 96<<20, 42)
	if out, code := run("umount", m.dir); code != 0 {
		t.Fatalf("umount: exit %d: %s", code, out)
	}
	select {
	case <-m.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("daemon still running 2 minutes after umount:\n%s", m.log())
	}
	if m.waitErr != nil {
		t.Fatalf("daemon exited with %v after umount:\n%s", m.waitErr, m.log())
	}
	if got := sha256File(t, filepath.Join(m.backing, "data")); got != want {
		t.Errorf("backing after umount: sha256 %s, want %s", got, want)
	}
}
