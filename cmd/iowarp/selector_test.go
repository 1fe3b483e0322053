package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/internal/mountinfo"
	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/control"
)

// cliResult runs the CLI and returns stdout, stderr and the exit status.
func cliResult(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := iowarp(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("iowarp %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

// mountDaemon runs `iowarp mount` on a new directory under base in the
// foreground (a child process), with its sockets in ctl, and returns the
// mount point once its control socket answers. Cleanup stops it (SIGTERM:
// drain, unmount) and waits for it.
func mountDaemon(t *testing.T, base, name, ctl string, extra ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("iowarp mount needs root")
	}
	mnt, backing := filepath.Join(base, name), filepath.Join(base, name+"-backing")
	for _, d := range []string{mnt, backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := iowarp("mount", mnt, "--backing", backing, "--ram", "32MiB", "--nvme", filepath.Join(base, name+"-nvme")+":64MiB",
		"--control-dir", ctl)
	d.Args = append(d.Args, extra...)
	var log bytes.Buffer
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			d.Process.Kill()
			<-exited
			exec.Command("umount", "-l", mnt).Run()
		}
		if strings.Contains(log.String(), "DATA RACE") {
			t.Errorf("the daemon of %s met a data race", mnt)
		}
		if t.Failed() {
			t.Logf("daemon of %s:\n%s", mnt, log.String())
		}
	})
	sock := control.SocketPath(ctl, mnt)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var info Info
		if err := control.Call(sock, "info", &info); err == nil {
			return mnt
		}
		select {
		case <-exited:
			t.Fatalf("daemon of %s exited:\n%s", mnt, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on %s after 30s:\n%s", sock, log.String())
		}
	}
}

// wantIn checks that out holds each of wants, runs of blanks counting as
// one (tables are aligned by tabwriter).
func wantIn(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	squash := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, w := range wants {
		if !strings.Contains(squash(out), squash(w)) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// TestSelector: with zero, one and two daemons, stat, runtime status,
// list and the blob commands find the daemon by --mount, by a path
// inside its mount, or as the only one; with two and none named they
// list both and fail.
func TestSelector(t *testing.T) {
	base := t.TempDir()
	ctl := filepath.Join(base, "ctl")
	os.Mkdir(ctl, 0o700)

	// Zero daemons.
	_, errs, code := cliResult(t, "stat", "--control-dir", ctl)
	if code == 0 || !strings.Contains(errs, "no iowarp daemon runs") {
		t.Errorf("stat without daemons: exit %d\n%s", code, errs)
	}
	out, _, code := cliResult(t, "list", "--control-dir", ctl)
	if code != 0 || !strings.Contains(out, "no iowarp daemon") {
		t.Errorf("list without daemons: exit %d\n%s", code, out)
	}

	// One daemon: found unnamed, by --mount and by a path inside it.
	a := mountDaemon(t, base, "a", ctl)
	if err := os.MkdirAll(filepath.Join(a, "run", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--mount", a}, {filepath.Join(a, "run", "deep")}, {filepath.Join(a, "run", "not-yet")}} {
		out, errs, code := cliResult(t, append([]string{"stat", "--control-dir", ctl}, args...)...)
		if code != 0 || !strings.HasPrefix(out, a+"  mode writeback") {
			t.Errorf("stat %v with one daemon: exit %d\n%s%s", args, code, out, errs)
		}
	}
	out, errs, code = cliResult(t, "runtime", "status", "--control-dir", ctl)
	if code != 0 || !strings.Contains(out, a+": served by pid") {
		t.Errorf("runtime status: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := cliResult(t, "put", "--control-dir", ctl, "bkt", "blob", "/etc/hostname"); code != 0 {
		t.Errorf("put with one daemon: exit %d\n%s", code, errs)
	}
	_, errs, code = cliResult(t, "stat", "--control-dir", ctl, base)
	if code == 0 || !strings.Contains(errs, "no iowarp daemon serves this mount") || !strings.Contains(errs, "serve: "+a) {
		t.Errorf("stat of a path in no mount: exit %d\n%s", code, errs)
	}

	// Two daemons: none named is an error that lists both.
	b := mountDaemon(t, base, "b", ctl)
	_, errs, code = cliResult(t, "stat", "--control-dir", ctl)
	if code == 0 {
		t.Errorf("stat with two daemons, none named: exit 0")
	}
	wantIn(t, "stat with two daemons", errs, "2 iowarp daemons run", "--mount DIR", a+"  ", b+"  ", "MOUNT")
	if _, errs, code := cliResult(t, "ls", "--control-dir", ctl); code == 0 || !strings.Contains(errs, "2 iowarp daemons run") {
		t.Errorf("ls with two daemons, none named: exit %d\n%s", code, errs)
	}
	for _, args := range [][]string{{"--mount", b}, {filepath.Join(b, "x")}, {b}} {
		out, errs, code := cliResult(t, append([]string{"stat", "--control-dir", ctl}, args...)...)
		if code != 0 || !strings.HasPrefix(out, b+"  mode writeback") {
			t.Errorf("stat %v with two daemons: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if out, errs, code := cliResult(t, "ls", "--control-dir", ctl, "--mount", a); code != 0 || strings.TrimSpace(out) != "bkt" {
		t.Errorf("ls --mount %s: exit %d %q\n%s", a, code, out, errs)
	}
	if out, errs, code := cliResult(t, "ls", "--control-dir", ctl, "--mount", b); code != 0 || strings.Contains(out, "bkt") {
		t.Errorf("ls --mount %s: exit %d %q\n%s", b, code, out, errs)
	}
	out, errs, code = cliResult(t, "list", "--control-dir", ctl)
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, errs)
	}
	wantIn(t, "list", out, "MOUNT", "UPTIME", a+"  ", b+"  ", "ram 0B/32MiB, nvme 0B/64MiB", "writeback")
	t.Logf("iowarp list:\n%s", out)

	// Stop b by a path inside it; a is the only one again.
	if _, errs, code := cliResult(t, "runtime", "stop", "--control-dir", ctl, "--timeout", "30s", filepath.Join(b, "x")); code != 0 {
		t.Fatalf("runtime stop: exit %d\n%s", code, errs)
	}
	if m, ok, _ := mountinfo.MountAt(b); ok {
		t.Errorf("%s still mounted after stop (%+v)", b, m)
	}
	if out, errs, code := cliResult(t, "stat", "--control-dir", ctl); code != 0 || !strings.HasPrefix(out, a+"  ") {
		t.Errorf("stat after stopping b: exit %d\n%s%s", code, out, errs)
	}
}

// TestSelectorControlDir: a control directory with group/other bits is
// set to 0700 with a warning; one owned by another user is refused.
func TestSelectorControlDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	ctl := filepath.Join(t.TempDir(), "ctl")
	os.Mkdir(ctl, 0o700)
	os.Chmod(ctl, 0o755)
	_, errs, code := cliResult(t, "list", "--control-dir", ctl)
	if st, _ := os.Stat(ctl); code != 0 || st.Mode().Perm() != 0o700 || !strings.Contains(errs, "had mode 0755") {
		t.Errorf("loose control dir: exit %d, mode %v\n%s", code, st.Mode().Perm(), errs)
	}
	if err := os.Chown(ctl, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"stat"}, {"runtime", "status"}, {"ls"}} {
		_, errs, code := cliResult(t, append(args, "--control-dir", ctl)...)
		if code == 0 || !strings.Contains(errs, "owned by uid 65534, not by you") {
			t.Errorf("%v in another user's control dir: exit %d\n%s", args, code, errs)
		}
	}
	// The daemon refuses it too, before mounting anything.
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	_, errs, code = cliResult(t, "mount", mnt, "--mode", "scratch", "--ram", "16MiB", "--nvme", filepath.Join(t.TempDir(), "n")+":16MiB",
		"--control-dir", ctl)
	if code == 0 || !strings.Contains(errs, "owned by uid 65534") {
		t.Errorf("mount with another user's control dir: exit %d\n%s", code, errs)
	}
}

// TestControlDirOverride: the daemon's control directory is --control-dir,
// else the config's control_dir, else $IOWARP_CONTROL_DIR, for `mount`
// and `runtime start` alike.
func TestControlDirOverride(t *testing.T) {
	t.Setenv(envControlDir, "/run/env-ctl")
	for _, overrides := range []bool{true, false} {
		for _, tc := range []struct {
			args   []string
			config string
			want   string
		}{
			{nil, "", "/run/env-ctl"},
			{nil, "/etc-ctl", "/etc-ctl"},
			{[]string{"--control-dir", "/flag-ctl"}, "/etc-ctl", "/flag-ctl"},
		} {
			mf := &mountFlags{}
			cmd := &cobra.Command{Use: "mount"}
			mf.register(cmd, overrides)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.ControlDir = tc.config
			if err := mf.overrideControlDir(cmd, cfg); err != nil || cfg.ControlDir != tc.want {
				t.Errorf("overrides %v, %v, config %q: %q, %v; want %q", overrides, tc.args, tc.config, cfg.ControlDir, err, tc.want)
			}
		}
	}
}
