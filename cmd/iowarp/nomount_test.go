package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/leakcheck"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// cliEnv makes the test binary act as the iowarp binary (TestMain).
const cliEnv = "IOWARP_CMD_TEST_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(leakcheck.Run(m.Run))
}

// iowarp runs the CLI (this test binary) with args.
func iowarp(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	return cmd
}

func runCLI(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := iowarp(args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("iowarp %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// TestRuntimeWithoutMount starts `iowarp runtime start` with mount: "" (a
// pure CTE daemon), puts and gets a blob through the CLI, reads the ipc
// statistics from `runtime status`, rotates its log with SIGHUP, and stops
// it with `runtime stop`.
func TestRuntimeWithoutMount(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\nlog_level: debug\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "cte.log")
	d := iowarp("runtime", "start", "--config", cfg, "--log-file", logFile)
	var log bytes.Buffer
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Kill()
		<-exited
	})
	sock := ipc.SocketPath(ctl, "")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("daemon exited: %v\n%s", waitErr, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ipc socket %s after 20s\n%s", sock, log.String())
		}
	}

	data := bytes.Repeat([]byte("iowarp-"), 300_000) // 2 MiB
	runCLI(t, data, "put", "--control-dir", ctl, "results", "step-1", "-")
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "results", "step-1", "-"); got != string(data) {
		t.Fatalf("get returned %d bytes, want %d", len(got), len(data))
	}
	if ls := runCLI(t, nil, "ls", "--control-dir", ctl, "results"); !strings.Contains(ls, "step-1") {
		t.Fatalf("ls: %q", ls)
	}
	// logrotate: SIGHUP reopens the log and stops nothing.
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	d.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(logFile); strings.Contains(string(b), "reopened log "+logFile) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logFile + ".1")
			t.Fatalf("no new log after SIGHUP:\n%s", b)
		}
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "results", "step-1", "-"); got != string(data) {
		t.Fatalf("get after SIGHUP returned %d bytes, want %d", len(got), len(data))
	}
	st := runCLI(t, nil, "runtime", "status", "--control-dir", ctl)
	for _, want := range []string{"runtime without a mount", "ipc " + sock, "segments reclaimed", "cte"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	t.Logf("status:\n%s", st)
	runCLI(t, nil, "runtime", "stop", "--control-dir", ctl, "--timeout", "20s")
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("daemon exit: %v\n%s", waitErr, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon still running after stop\n%s", log.String())
	}
	for _, p := range []string{sock, strings.TrimSuffix(sock, ".ipc") + ".sock"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("socket %s left behind (%v)", p, err)
		}
	}
}
