package shimtest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSnapshotShim: the shim writes resident pages in shared memory,
// where the pool's copy-on-write cannot see it (bufferpool/files
// snapshot.go). So a snapshot is refused while a shim holds a read-write
// map of a file of the tree, and a file a snapshot shares gets no
// read-write map: the shim's writes take the kernel path, the live file
// gets them and the snapshot keeps the old bytes.
func TestSnapshotShim(t *testing.T) {
	bin := cc(t, "coherence", "gcc")
	onMount, _ := setup(t)
	ctl := filepath.Join(work, "ctl")
	const n = 1 << 20
	p := filepath.Join(onMount, "c.bin")
	fill(t, p, 2*n, '.')
	snapshot := func(args ...string) (string, error) {
		out, err := exec.Command(iowarp, append(append([]string{"snapshot"}, args...), "--control-dir", ctl)...).CombinedOutput()
		return string(out), err
	}
	// coherence writes n 'S' at 0 through the shim and waits for a line.
	writer := func(rep string) (finish func() []byte) {
		cmd := exec.Command(bin, p, "1048576")
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		if line, err := out.ReadString('\n'); err != nil || line != "written\n" {
			cmd.Process.Kill()
			t.Fatalf("coherence: %q %v; stderr %s", line, err, stderr.String())
		}
		return func() []byte {
			io.WriteString(stdin, "go\n")
			rest, _ := io.ReadAll(out)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("coherence: %v; stderr %s", err, stderr.String())
			}
			return rest
		}
	}

	// 1. A shim holds a read-write map: create refuses, saying why.
	rep1 := filepath.Join(t.TempDir(), "report1")
	finish := writer(rep1)
	out, err := snapshot("create", "busy", onMount)
	finish()
	if err == nil || !strings.Contains(out, "shim map") {
		t.Fatalf("snapshot while a shim maps the file read-write: %v %s", err, out)
	}
	if r := parseReport(t, rep1); r.FastWrite == 0 {
		t.Fatalf("the first writer did not write through the shim's map (nothing tested): %+v", r)
	}

	// 2. Once the map is gone, a snapshot; then the shim's writes take
	// the kernel path.
	fill(t, p, 2*n, '.')
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if out, err = snapshot("create", "s", onMount); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshot after the shim writer exited: %v %s", err, out)
		}
	}
	defer snapshot("delete", "s")
	rep2 := filepath.Join(t.TempDir(), "report2")
	writer(rep2)()
	r := parseReport(t, rep2)
	if r.FastWrite != 0 || r.KernelWrite == 0 {
		t.Errorf("writes to a snapshotted file: %d on the fast path, %d on the kernel path (want all on the kernel path)", r.FastWrite, r.KernelWrite)
	}
	live, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(live, append(bytes.Repeat([]byte{'S'}, n), bytes.Repeat([]byte{'.'}, n)...)) {
		t.Errorf("live file after the shim's writes: %d 'S', %v", bytes.Count(live, []byte{'S'}), err)
	}
	rel, _ := filepath.Rel(mnt, p)
	old, err := os.ReadFile(filepath.Join(mnt, ".snapshots", "s", strings.TrimPrefix(rel, filepath.Base(onMount)+"/")))
	if err != nil || !bytes.Equal(old, bytes.Repeat([]byte{'.'}, 2*n)) {
		t.Errorf("snapshot after the shim's writes: %d bytes, %d 'S', %v (want the old bytes)", len(old), bytes.Count(old, []byte{'S'}), err)
	}
}
