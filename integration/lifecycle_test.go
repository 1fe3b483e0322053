package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClosedOutputPipe: `iowarp mount ... | tee log`, tee dies, then
// SIGTERM. The daemon's log lines hit a pipe without a reader (EPIPE, and
// SIGPIPE unless caught); it must still drain every dirty byte, unmount,
// remove its sockets and exit 0.
func TestClosedOutputPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m := startMount(t, config{ram: "32MiB", file: "256MiB", bandwidth: "128MiB/s", output: w,
		extra: "oom_score_adj: 700\n"}) // raising it needs no privilege
	w.Close()
	r.Close() // the reader (tee) is gone
	if got := oomScoreAdj(t, m.cmd.Process.Pid); got != "700" {
		t.Errorf("oom_score_adj of the daemon: %s, want 700 (the config's)", got)
	}
	want := writeRandomFile(t, m.path("data"), 64<<20, 141)
	if st := m.stats(); st.DirtyBytes == 0 {
		t.Logf("nothing dirty at SIGTERM (write-back was faster than the test)")
	}
	if err := m.stop(); err != nil {
		t.Fatalf("daemon behind a closed pipe exited with %v (141 or SIGPIPE: killed by its own log line)", err)
	}
	if got := sha256File(t, filepath.Join(m.backing, "data")); got != want {
		t.Errorf("backing after SIGTERM: sha256 %s, want %s", got, want)
	}
	left, _ := filepath.Glob(filepath.Join(m.ctl, "*"))
	if len(left) > 0 {
		t.Errorf("sockets left behind: %v", left)
	}
}

// TestSIGHUPReopensLog: logrotate renames the log and sends SIGHUP; the
// daemon opens a new log file under the configured name, logs there, and
// keeps serving the mount (no drain, no unmount). It also runs with an
// oom_score_adj (-900 by default) that keeps the OOM killer off it before
// other processes, where it may lower it (CAP_SYS_RESOURCE); where not, it
// says so.
func TestSIGHUPReopensLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "iowarp.log")
	m := startMount(t, config{ram: "32MiB", file: "none", args: []string{"--log-file", logFile}})
	oom := oomScoreAdj(t, m.cmd.Process.Pid)
	if err := os.WriteFile(m.path("before"), []byte("before"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first log file to get the mount line", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "mounted "+m.dir)
	})
	if canLowerOOMScore(t) {
		if oom != "-900" {
			t.Errorf("oom_score_adj of the daemon: %s, want -900", oom)
		}
	} else if b, _ := os.ReadFile(logFile); !strings.Contains(string(b), "set oom_score_adj -900") {
		t.Errorf("no CAP_SYS_RESOURCE here, and the daemon (oom_score_adj %s) did not say it could not lower it:\n%s", oom, b)
	}
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new log file after SIGHUP", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "reopened log "+logFile)
	})
	if !m.running() || !isMounted(m.dir) {
		t.Fatalf("after SIGHUP: running %v, mounted %v", m.running(), isMounted(m.dir))
	}
	if err := os.WriteFile(m.path("after"), []byte("after"), 0o644); err != nil {
		t.Fatalf("write after SIGHUP: %v", err)
	}
	if err := m.stop(); err != nil {
		t.Fatalf("exit after SIGHUP and SIGTERM: %v", err)
	}
	b, _ := os.ReadFile(logFile)
	if !strings.Contains(string(b), "drained in") {
		t.Errorf("the new log lacks the drain line:\n%s", b)
	}
	old, _ := os.ReadFile(logFile + ".1")
	if strings.Contains(string(old), "drained in") || strings.Contains(string(old), "hangup: draining") {
		t.Errorf("the rotated log got lines after SIGHUP:\n%s", old)
	}
	for _, name := range []string{"before", "after"} {
		if b, err := os.ReadFile(filepath.Join(m.backing, name)); err != nil || string(b) != name {
			t.Errorf("backing %s: %q, %v", name, b, err)
		}
	}
}

func oomScoreAdj(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// canLowerOOMScore reports whether this process has CAP_SYS_RESOURCE
// (lowering an oom_score_adj needs it; containers often drop it).
func canLowerOOMScore(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<24) != 0 // CAP_SYS_RESOURCE
		}
	}
	return false
}

// waitFor polls cond for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 20s", what)
		}
	}
}
