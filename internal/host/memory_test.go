package host

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupLimit reads the tightest limit along the cgroup path, v2 and
// v1, skipping levels that are not visible and "max"/unlimited values.
func TestCgroupLimit(t *testing.T) {
	root := t.TempDir()
	write := func(rel, v string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("memory.max", "max") // the root has none
	write("slurm/memory.max", "17179869184")
	write("slurm/job_1/memory.max", "max")
	write("slurm/job_1/step_0/memory.max", "8589934592")
	write("memory/memory.limit_in_bytes", "9223372036854771712") // v1 root: unlimited
	write("memory/batch/memory.limit_in_bytes", "4294967296")
	cases := []struct {
		name, cg string
		want     int64
		where    string
	}{
		{"v2 leaf", "0::/slurm/job_1/step_0\n", 8 << 30, "/slurm/job_1/step_0"},
		{"v2 parent", "0::/slurm/job_1\n", 16 << 30, "/slurm"},
		{"v2 not visible", "0::/slurm/job_2/x\n", 16 << 30, "/slurm"},
		{"v2 none", "0::/\n", 0, ""},
		{"v1", "4:memory:/batch/task\n0::/\n", 4 << 30, "/batch"},
		{"v1 co-mounted", "4:cpu,memory:/batch\n", 4 << 30, "/batch"},
		{"v1 unlimited", "4:memory:/\n", 0, ""},
		{"garbage", "nonsense\n", 0, ""},
	}
	for _, tc := range cases {
		got, where := cgroupLimit(root, []byte(tc.cg))
		if got != tc.want || where != tc.where {
			t.Errorf("%s: %d at %q, want %d at %q", tc.name, got, where, tc.want, tc.where)
		}
	}
}

func TestMeminfo(t *testing.T) {
	b := []byte("MemTotal:       24683652 kB\nMemFree:         1000 kB\n")
	if got := meminfoField(b, "MemTotal"); got != 24683652<<10 {
		t.Errorf("MemTotal = %d", got)
	}
	if got := meminfoField(b, "Missing"); got != 0 {
		t.Errorf("Missing = %d", got)
	}
	if MemTotal() <= 0 {
		t.Errorf("MemTotal() = %d on this machine", MemTotal())
	}
}
