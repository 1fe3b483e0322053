package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestTraceJoinsPool: iowarp trace of dd writing into the mount and of dd
// reading it back shows, next to the calls the program made, what the
// pool did for that file in the same interval: the bytes written through
// the daemon and written back (conv=fsync), then the page reads served
// from the pool, by tier, and the tiers' use on the --html timeline.
func TestTraceJoinsPool(t *testing.T) {
	requireMount(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no BPF-capable kernel here")
	}
	m := startMount(t, config{})
	f := m.path("traced")
	page := filepath.Join(t.TempDir(), "trace.html")
	trace := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(m.bin, append([]string{"trace", "--top", "3", "--control-dir", m.ctl, "--html", page, "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("trace %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	row := func(out, path string) []string {
		t.Helper()
		i := strings.Index(out, "pool side")
		if i < 0 {
			t.Fatalf("no pool side in\n%s", out)
		}
		for _, l := range strings.Split(out[i:], "\n") {
			if strings.HasSuffix(l, "  "+path) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no pool-side row of %s in\n%s", path, out)
		return nil
	}
	out := trace("dd", "if=/dev/zero", "of="+f, "bs=1M", "count=8", "conv=fsync")
	// hits RAM file-tier misses read written staged (reads) written-back file
	if r := row(out, f); r[5] != "8MiB" || r[8] != "8MiB" {
		t.Fatalf("writer's pool side %v, want 8MiB written through the daemon and written back\n%s", r, out)
	}
	out = trace("dd", "if="+f, "of=/dev/null", "bs=1M", "iflag=direct")
	r := row(out, f)
	ram, _ := strconv.Atoi(r[1])
	file, _ := strconv.Atoi(r[2])
	if r[0] != "8" || ram+file != 8 || r[3] != "0" || r[4] != "8MiB" {
		t.Fatalf("reader's pool side %v, want 8 hits, each from a tier, and no miss\n%s", r, out)
	}
	// The timeline has the mount's tiers' use, sampled during the trace.
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `<g class="tier" data-mount="`+m.dir+`" data-tier="`) {
		t.Fatalf("the timeline has no tier of %s:\n%.3000s", m.dir, html)
	}
}
