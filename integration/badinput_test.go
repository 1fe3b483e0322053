package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput: each mistake a user can make is one clear error line and a
// non-zero exit; a running daemon stays up when a second one is refused.
func TestBadInput(t *testing.T) {
	bin := iowarpBin(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	backing := filepath.Join(dir, "backing")
	os.Mkdir(mnt, 0o755)
	os.Mkdir(backing, 0o755)
	ctl := filepath.Join(dir, "ctl") // 0700: a looser one is fixed with a warning line
	os.Mkdir(ctl, 0o700)

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("mode: writeback\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 12XB\n"), 0o644)
	typo := filepath.Join(dir, "typo.yaml")
	os.WriteFile(typo, []byte("backing: /tmp\nflush_on_clsoe: true\n"), 0o644)
	huge := filepath.Join(dir, "huge.yaml")
	os.WriteFile(huge, []byte("tiers:\n  - name: ram\n    kind: ram\n    capacity: 100TiB\n"), 0o644)
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("mode: writeback\n  tiers: [\n"), 0o644)

	// an unwritable backing directory: a read-only tmpfs (root ignores
	// permission bits, not a read-only file system)
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", ro).CombinedOutput(); err != nil {
		t.Fatalf("mount read-only tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", ro).Run() })

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"malformed config", []string{"mount", mnt, "--config", bad}, bad + `:5: tiers[0].capacity: "12XB" is not a size`},
		{"unknown key", []string{"mount", mnt, "--config", typo}, typo + ":2: flush_on_clsoe: unknown key"},
		{"broken YAML", []string{"mount", mnt, "--config", broken}, broken + ":2: bad YAML"},
		{"config check", []string{"config", "check", bad}, bad + ":5:"},
		{"missing config", []string{"mount", mnt, "--config", filepath.Join(dir, "none.yaml")}, "no such file"},
		{"missing mount point", []string{"mount", filepath.Join(dir, "nope"), "--backing", backing}, "does not exist"},
		{"mount point is a file", []string{"mount", bad, "--backing", backing}, "not a directory"},
		{"missing backing", []string{"mount", mnt, "--backing", filepath.Join(dir, "nobacking")}, "backing directory " + filepath.Join(dir, "nobacking") + " does not exist"},
		{"unwritable backing", []string{"mount", mnt, "--backing", ro}, "backing directory " + ro + " is not writable"},
		{"bad --ram", []string{"mount", mnt, "--backing", backing, "--ram", "lots"}, `--ram: "lots" is not a size`},
		{"--ram above the machine", []string{"mount", mnt, "--backing", backing, "--ram", "100TiB"},
			"--ram: 100TiB is more than 80% of this machine's memory ("},
		{"ram tier above the machine", []string{"mount", mnt, "--config", huge}, huge + ":4: tiers[0].capacity: 100TiB is more than 80%"},
		{"config check of a huge ram tier", []string{"config", "check", huge}, huge + ":4: tiers[0].capacity: 100TiB is more than 80%"},
		{"bad --nvme", []string{"mount", mnt, "--backing", backing, "--nvme", "/x"}, `--nvme: "/x" is not DIR:SIZE`},
		{"bad --mode", []string{"mount", mnt, "--backing", backing, "--mode", "fast"}, `--mode: "fast" is not one of`},
		{"backing inside mount", []string{"mount", mnt, "--backing", filepath.Join(mnt, "b")}, "must not contain each other"},
		{"stat without daemon", []string{"stat", mnt, "--control-dir", ctl}, "no iowarp daemon serves this mount"},
		{"runtime start without config", []string{"runtime", "start"}, "needs --config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(bin, tc.args...)
			if code == 0 {
				t.Fatalf("exit 0, want failure:\n%s", out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
			if lines := strings.Count(strings.TrimSpace(out), "\n") + 1; lines != 1 {
				t.Errorf("%d lines of output, want one:\n%s", lines, out)
			}
			if isMounted(mnt) {
				t.Fatalf("%s mounted after a refused mount", mnt)
			}
		})
	}

	t.Run("busy mount point", func(t *testing.T) {
		m := startMount(t, config{})
		if err := os.WriteFile(m.path("alive"), []byte("yes"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, daemon := range []bool{false, true} {
			args := []string{"mount", m.dir, "--backing", t.TempDir(), "--control-dir", m.ctl}
			if daemon {
				args = append(args, "--daemon", "--log-file", filepath.Join(t.TempDir(), "log"))
			}
			out, code := run(bin, args...)
			if code == 0 || !strings.Contains(out, "is busy") {
				t.Errorf("second mount (daemon %v): exit %d, output:\n%s", daemon, code, out)
			}
		}
		// the first daemon still serves
		if b, err := os.ReadFile(m.path("alive")); err != nil || string(b) != "yes" {
			t.Errorf("first mount after the refused one: %q, %v", b, err)
		}
		m.stats()
	})
}
