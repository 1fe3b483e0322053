package contrib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/internal/testenv"
)

// slurmJob is a fake job on this node: the directories and the
// environment slurmd gives a prolog and an epilog (SLURM_JOB_ID,
// SLURM_JOB_USER, SLURM_JOB_UID, SLURM_JOB_GID, SLURM_JOB_WORK_DIR, ...),
// plus the scripts' own settings pointing into a test directory.
type slurmJob struct {
	u       testUser
	id      string
	dir     string
	work    string // SLURM_JOB_WORK_DIR, on the "PFS": the backing store
	mnt     string // IOWARP_JOB_ROOT/<id>
	state   string // IOWARP_JOB_STATE/<id>
	env     []string
	bin     string
	prolog  string
	epilog  string
	cleanup []func()
}

func newSlurmJob(t *testing.T, u testUser, id, extraConfig string) *slurmJob {
	t.Helper()
	j := &slurmJob{u: u, id: id, dir: openDir(t), bin: iowarpBin(t),
		prolog: inTree(t, prefix+"/libexec/iowarp/iowarp-slurm-prolog"),
		epilog: inTree(t, prefix+"/libexec/iowarp/iowarp-slurm-epilog")}
	j.work = filepath.Join(j.dir, "work")
	os.Mkdir(j.work, 0o755)
	u.chown(t, j.work)
	root, stateRoot := filepath.Join(j.dir, "iowarp"), filepath.Join(j.dir, "state")
	j.mnt, j.state = filepath.Join(root, id), filepath.Join(stateRoot, id)
	conf := testConfig(t, j.dir, "/iowarp", "/nonexistent-backing", extraConfig)
	j.env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_ID=" + id, "SLURM_JOBID=" + id,
		"SLURM_JOB_USER=" + testUserName, "SLURM_JOB_UID=" + itoa(u.uid), "SLURM_JOB_GID=" + itoa(u.gid),
		"SLURM_JOB_WORK_DIR=" + j.work, "SLURM_JOB_PARTITION=debug", "SLURM_JOB_NODELIST=" + hostname(),
		"SLURM_CLUSTER_NAME=test", "SLURM_SCRIPT_CONTEXT=prolog_slurmd",
		"IOWARP=" + j.bin, "IOWARP_CONFIG=" + conf, "IOWARP_JOB_ROOT=" + root, "IOWARP_JOB_STATE=" + stateRoot,
		"IOWARP_JOB_NVME=64MiB", "IOWARP_JOB_RAM=64MiB"}
	t.Cleanup(func() { detach(j.mnt) })
	return j
}

func hostname() string { h, _ := os.Hostname(); return h }

// script runs the prolog or epilog as slurmd does: as root, with the
// job's variables, no terminal; it returns the exit code and the output.
func (j *slurmJob) script(t *testing.T, path string, env ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(path)
	cmd.Env = append(append([]string(nil), j.env...), env...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", filepath.Base(path), out)
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// asUser runs a shell command as the job's user (a job step).
func (j *slurmJob) asUser(t *testing.T, script string) string {
	t.Helper()
	out, err := j.u.run("sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
	return string(out)
}

// stats is the job daemon's `iowarp stat --json`, asked as the user.
func (j *slurmJob) stats(t *testing.T) map[string]any {
	t.Helper()
	out := j.asUser(t, fmt.Sprintf("%s stat --json --control-dir %s %s", j.bin, j.state, j.mnt))
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stat --json: %v: %s", err, out)
	}
	return st
}

const testUserName = "iowarp-test"

// TestSlurmPrologEpilog runs the installed prolog and epilog by hand
// with the variables slurmd sets: the prolog mounts
// IOWARP_JOB_ROOT/<jobid> as the job's user (owned by it, a user mount)
// over SLURM_JOB_WORK_DIR and stages in the inputs listed in
// .iowarp-stage-in; the job writes through the mount; the epilog drains
// (the output is on the backing store), unmounts and removes the job's
// state, exit 0.
func TestSlurmPrologEpilog(t *testing.T) {
	u := newTestUser(t)
	u.grantFuse(t)
	j := newSlurmJob(t, u, fmt.Sprint(4000+os.Getpid()%1000), "")
	input := bytes.Repeat([]byte("input!\n"), 300000) // 2 MiB
	os.MkdirAll(filepath.Join(j.work, "in", "sub"), 0o755)
	os.WriteFile(filepath.Join(j.work, "in", "a.dat"), input, 0o644)
	os.WriteFile(filepath.Join(j.work, "in", "sub", "b.dat"), input, 0o644)
	os.WriteFile(filepath.Join(j.work, ".iowarp-stage-in"), []byte("# inputs\nin\n"+j.work+"/missing.dat\n"), 0o644)
	exec.Command("chown", "-R", itoa(u.uid)+":"+itoa(u.gid), j.work).Run()

	code, out := j.script(t, j.prolog)
	if code != 0 {
		t.Fatalf("prolog exit %d:\n%s", code, out)
	}
	entry := mountEntry(t, j.mnt)
	if !strings.Contains(entry, "fuse.iowarp") || !strings.Contains(entry, "user_id="+itoa(u.uid)) {
		t.Fatalf("after the prolog: %q is not a user mount of uid %d\n%s", entry, u.uid, out)
	}
	if owner := strings.TrimSpace(j.asUser(t, "stat -c %u "+j.mnt)); owner != itoa(u.uid) {
		t.Errorf("mount point owned by %s, want %d", owner, u.uid)
	}
	if !strings.Contains(out, "staged in 2 listed inputs") {
		t.Errorf("prolog output does not report the stage-in:\n%s", out)
	}
	if staged := j.stats(t)["staged_bytes"].(float64); staged < float64(2*len(input)) {
		t.Errorf("staged %v bytes, want the %d of the listed inputs", staged, 2*len(input))
	}

	j.asUser(t, fmt.Sprintf("cat %s/in/a.dat > %s/out.dat && sync -f %s", j.mnt, j.mnt, j.mnt))
	code, out = j.script(t, j.epilog, "SLURM_SCRIPT_CONTEXT=epilog_slurmd")
	if code != 0 {
		t.Fatalf("epilog exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "drained in") {
		t.Errorf("epilog does not report the drain:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(j.work, "out.dat")); err != nil || !bytes.Equal(b, input) {
		t.Errorf("the job's output on the backing store: %d bytes, %v", len(b), err)
	}
	if mountEntry(t, j.mnt) != "" {
		t.Errorf("%s still mounted after the epilog", j.mnt)
	}
	for _, p := range []string{j.mnt, j.state} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after the epilog", p)
		}
	}
	// An epilog on a node where the job had no daemon does nothing.
	if code, out := j.script(t, j.epilog); code != 0 || out != "" {
		t.Errorf("second epilog: exit %d: %s", code, out)
	}
}

// TestSlurmEpilogBounded: the epilog waits at most IOWARP_DRAIN_WAIT
// seconds; past it (3 MiB dirty on a 256 KiB/s backing store, 1 s) it
// exits 1 and says how much is not written back, leaving the daemon to
// finish; a later epilog with time to wait completes the job.
func TestSlurmEpilogBounded(t *testing.T) {
	u := newTestUser(t)
	u.grantFuse(t)
	// 12 s of write-back: the epilog's stat after its 1 s wait must find the
	// daemon still draining (with 4 s, at load 16, the daemon had finished
	// before the stat ran and the epilog could not say what was left).
	j := newSlurmJob(t, u, fmt.Sprint(5000+os.Getpid()%1000), "backing_bandwidth: 256KiB\n")
	if code, out := j.script(t, j.prolog); code != 0 {
		t.Fatalf("prolog exit %d:\n%s", code, out)
	}
	j.asUser(t, fmt.Sprintf("head -c 3145728 /dev/zero > %s/big.dat", j.mnt))
	code, out := j.script(t, j.epilog, "IOWARP_DRAIN_WAIT=1")
	if code != 1 {
		t.Fatalf("epilog with 1s to drain 3 MiB at 256 KiB/s: exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"NOT written back after 1s", "dirty"} {
		if !strings.Contains(out, want) {
			t.Errorf("epilog output lacks %q:\n%s", want, out)
		}
	}
	if mountEntry(t, j.mnt) == "" {
		t.Errorf("the daemon was stopped before its drain ended")
	}
	code, out = j.script(t, j.epilog, "IOWARP_DRAIN_WAIT=120")
	if code != 0 {
		t.Fatalf("second epilog: exit %d:\n%s", code, out)
	}
	if st, err := os.Stat(filepath.Join(j.work, "big.dat")); err != nil || st.Size() != 3<<20 {
		t.Errorf("big.dat on the backing store: %v", err)
	}
}

// TestSlurmEpilogIncomplete: a backing store that cannot take the
// job's output (an 8 MiB file system, 12 MiB written) makes the daemon
// give up after drain_timeout; the epilog says the drain is INCOMPLETE,
// names the file, keeps the job's state (its file tier) and exits 1.
func TestSlurmEpilogIncomplete(t *testing.T) {
	u := newTestUser(t)
	u.grantFuse(t)
	small := testenv.LoopExt4(t, 8<<20)
	for d := filepath.Dir(small); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir is 0700: let the user reach it
	}
	u.chown(t, small)
	j := newSlurmJob(t, u, fmt.Sprint(6000+os.Getpid()%1000), "drain_timeout: 1s\n")
	if code, out := j.script(t, j.prolog, "IOWARP_JOB_BACKING="+small); code != 0 {
		t.Fatalf("prolog exit %d:\n%s", code, out)
	}
	j.asUser(t, fmt.Sprintf("head -c 12582912 /dev/urandom > %s/toobig.dat", j.mnt))
	code, out := j.script(t, j.epilog)
	if code != 1 {
		t.Fatalf("epilog with a full backing store: exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"drain INCOMPLETE", "toobig.dat"} {
		if !strings.Contains(out, want) {
			t.Errorf("epilog output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(j.state); err != nil {
		t.Errorf("the job's state (its dirty data) was removed: %v", err)
	}
}
