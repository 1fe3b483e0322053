package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
)

func TestWatchArgs(t *testing.T) {
	cases := []struct {
		args  []string
		flag  string
		path  string
		every time.Duration
		err   string
	}{
		{nil, "2s", "", 2 * time.Second, ""},
		{[]string{"1"}, "2s", "", time.Second, ""},
		{[]string{"0.5", "/iowarp/x"}, "2s", "/iowarp/x", 500 * time.Millisecond, ""},
		{[]string{"/iowarp", "250ms"}, "2s", "/iowarp", 250 * time.Millisecond, ""},
		{nil, "3s", "", 3 * time.Second, ""},
		{[]string{"/a", "/b"}, "2s", "", 0, "two paths"},
		{nil, "fast", "", 0, `"fast" is not an interval`},
		{[]string{"0.001"}, "2s", "", 0, "shorter than 10ms"},
	}
	for _, tc := range cases {
		path, every, err := watchArgs(tc.args, tc.flag)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %q: error %v, want %q", tc.args, tc.flag, err, tc.err)
			}
			continue
		}
		if err != nil || path != tc.path || every != tc.every {
			t.Errorf("%v %q: %q %v %v, want %q %v", tc.args, tc.flag, path, every, err, tc.path, tc.every)
		}
	}
}

// TestRenderWatch: the first refresh has no rates; the next shows the
// increase per second since the one before, and the top files.
func TestRenderWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	info := Info{Mount: "/iowarp", Pid: 7, Started: t0.Add(-time.Minute)}
	st := func(written, flushed, staged, hits uint64, demoted uint64) files.Stats {
		return files.Stats{Mode: files.Writeback, DirtyBytes: 6 << 20, BytesWritten: written, FlushedBytes: flushed,
			StagedBytes: staged, ReadHits: hits, Pool: bufferpool.Stats{Tiers: []bufferpool.TierStats{
				{Name: "ram", Capacity: 64 << 20, Used: 16 << 20, Dirty: 6 << 20, Demoted: demoted}}}}
	}
	a := &sample{at: t0, st: st(10<<20, 4<<20, 0, 100, 3)}
	b := &sample{at: t0.Add(2 * time.Second), st: st(30<<20, 14<<20, 2<<20, 150, 13),
		top: []files.FileDirty{{Path: "run/ckpt.h5", DirtyBytes: 5 << 20, Size: 8 << 20}, {Path: "log", DirtyBytes: 1 << 20, Size: 1 << 20}}}
	var first, next strings.Builder
	renderWatch(&first, info, nil, a, 2*time.Second)
	renderWatch(&next, info, a, b, 2*time.Second)
	wantIn(t, "first refresh", first.String(), "12:00:00  /iowarp  mode writeback  pid 7  up 1m0s  every 2s",
		"written by apps        10MiB           -", "top files by dirty bytes: none dirty")
	wantIn(t, "next refresh", next.String(), "written by apps        30MiB     10MiB/s", "flushed        14MiB      5MiB/s",
		"staged in         2MiB      1MiB/s", "read hits          150        25.0", "5.0", "5MiB  8MiB  run/ckpt.h5", "1MiB  1MiB  log")
	if t.Failed() {
		t.Logf("first:\n%s\nnext:\n%s", first.String(), next.String())
	}
}

// TestStatWatch: `stat --watch` against a real daemon draws --count
// refreshes, each with the file written through the mount among the top
// files by dirty bytes (scratch mode: never written back): as plain
// blocks through a pipe, redrawn in place (the screen cleared) on a
// terminal (under script(1)).
func TestStatWatch(t *testing.T) {
	base := t.TempDir()
	ctl := filepath.Join(base, "ctl")
	mnt := mountDaemon(t, base, "m", ctl, "--mode", "scratch")
	if err := os.WriteFile(filepath.Join(mnt, "big.dat"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cliResult(t, "stat", "--control-dir", ctl, "--watch", "50ms", "--count", "3")
	if code != 0 {
		t.Fatalf("stat --watch: exit %d\n%s", code, errs)
	}
	if n := strings.Count(out, "every 50ms"); n != 3 || strings.Contains(out, clearScreen) {
		t.Errorf("plain output: %d refreshes (want 3), clear sequence %v:\n%s", n, strings.Contains(out, clearScreen), out)
	}
	wantIn(t, "stat --watch", out, mnt+"  mode scratch", "3MiB  3MiB  big.dat", "written by apps", "PER SECOND")
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to run it on a terminal")
	}
	cmd := exec.Command("script", "-qec", strings.Join([]string{os.Args[0], "stat", "--control-dir", ctl, "-w=50ms", "--count", "2"}, " "), "/dev/null")
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	tty, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stat --watch on a terminal: %v\n%s", err, tty)
	}
	if n := strings.Count(string(tty), clearScreen); n != 2 || !strings.Contains(string(tty), "big.dat") {
		t.Errorf("terminal output: %d redraws (want 2):\n%q", n, tty)
	}
}
