package shimtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/adapters/posix/report"
)

// iowarpRun runs `iowarp run FLAGS... -- ARGV...` (the CLI finds
// libiowarp.so next to itself) in dir with env added, and returns its
// combined output.
func iowarpRun(t *testing.T, dir string, env, flags []string, argv ...string) string {
	t.Helper()
	args := append(append([]string{"run", "--control-dir", filepath.Join(work, "ctl")}, flags...), "--")
	args = append(args, argv...)
	cmd := exec.Command(iowarp, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("iowarp run %v: %v\n%s", args, err, out)
	}
	return string(out)
}

type reportJSON struct {
	Processes []report.Process `json:"processes"`
	Files     []*report.File   `json:"files"`
	Total     report.Counters  `json:"total"`
}

func fileNamed(t *testing.T, r reportJSON, path string) *report.File {
	t.Helper()
	for _, f := range r.Files {
		if f.Path == path {
			return f
		}
	}
	t.Fatalf("no record of %s in the report: %+v", path, r.Files)
	return nil
}

// TestReportFiles: real programs under iowarp run with IOWARP_REPORT=FILE
// leave a line per file; iowarp report sums them with their bytes, calls,
// fast-path share, time and access sizes.
func TestReportFiles(t *testing.T) {
	dir, _ := setup(t)
	rep := filepath.Join(t.TempDir(), "job.report")
	env := []string{"IOWARP_REPORT=" + rep}
	iowarpRun(t, dir, env, nil, "dd", "if=/dev/zero", "of=ckpt", "bs=64k", "count=50", "status=none")
	iowarpRun(t, dir, env, nil, "python3", "-c", `
import os
fd = os.open("ckpt", os.O_RDONLY)
for i in range(100):
    assert len(os.pread(fd, 4096, i * 4096)) == 4096
os.close(fd)
`)
	// cat writes copy through an fd bash opened: the kernel path, not in
	// its report; it reads ckpt, and the second cat reads copy.
	iowarpRun(t, dir, env, nil, "bash", "-c", "cat ckpt > copy; cat copy > /dev/null")
	out, err := exec.Command(iowarp, "report", rep, "--json").Output()
	if err != nil {
		t.Fatalf("iowarp report --json: %v", err)
	}
	var r reportJSON
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	ckpt := fileNamed(t, r, filepath.Join(dir, "ckpt"))
	if ckpt.Written() != 50*65536 || ckpt.WriteSizes[3] != 50 || ckpt.MaxWrite != 65536 {
		t.Errorf("ckpt writes: %d bytes, size bins %v, largest %d: want 50 writes of 64 KiB", ckpt.Written(), ckpt.WriteSizes, ckpt.MaxWrite)
	}
	if ckpt.FastWrite == 0 || ckpt.FastRead == 0 {
		t.Errorf("the fast path carried none of ckpt's I/O: %+v", ckpt.Counters)
	}
	if ckpt.ReadSizes[2] < 100 || ckpt.Read() < 100*4096+50*65536 {
		t.Errorf("ckpt reads: %d bytes, size bins %v: want 100 preads of 4 KiB and the cat", ckpt.Read(), ckpt.ReadSizes)
	}
	if ckpt.Procs != 3 || ckpt.Opens != 3 || ckpt.Calls < 150 || ckpt.WriteNs == 0 || ckpt.ReadNs == 0 {
		t.Errorf("ckpt: %d processes, %d opens, %d calls, %dns writing, %dns reading", ckpt.Procs, ckpt.Opens,
			ckpt.Calls, ckpt.WriteNs, ckpt.ReadNs)
	}
	if cp := fileNamed(t, r, filepath.Join(dir, "copy")); cp.Read() != 50*65536 {
		t.Errorf("copy read %d bytes, want %d", cp.Read(), 50*65536)
	}
	var sum uint64
	for _, f := range r.Files {
		sum += f.Bytes()
	}
	if sum != r.Total.Bytes() {
		t.Errorf("files sum to %d bytes, the total says %d", sum, r.Total.Bytes())
	}
	table, err := exec.Command(iowarp, "report", rep).Output()
	if err != nil {
		t.Fatalf("iowarp report: %v", err)
	}
	for _, want := range []string{"top files by bytes:", "top files by time in calls:", "access sizes:", "10K-100K", filepath.Join(dir, "ckpt")} {
		if !strings.Contains(string(table), want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// TestRunStageIn: iowarp run --stage-in LIST puts the listed files in the
// pool before the program starts: its reads are all fast-path hits.
func TestRunStageIn(t *testing.T) {
	dir, _ := setup(t)
	p, data := onBacking(t, dir, "input", 6<<20+100)
	list := filepath.Join(t.TempDir(), "stage.list")
	if err := os.WriteFile(list, []byte("# inputs\n"+p+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(t.TempDir(), "report")
	out := iowarpRun(t, dir, []string{"IOWARP_REPORT=" + rep}, []string{"--stage-in", list}, "sha256sum", "input")
	if !strings.Contains(out, "staged in 1 files: 6MiB of 6MiB") {
		t.Errorf("iowarp run --stage-in said:\n%s", out)
	}
	if !strings.Contains(out, sum(data)) {
		t.Errorf("sha256sum of the staged file:\n%s", out)
	}
	r := parseReport(t, rep)
	if r.FastRead != int64(len(data)) || r.FastMisses != 0 || r.KernelRead != 0 {
		t.Errorf("reads of a staged file: %+v: want every byte a fast-path hit", r)
	}
}
