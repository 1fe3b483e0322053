package shimtest

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fill writes n bytes of c to p without the shim (through FUSE: the pages
// end up resident in the pool's RAM tier, where shim writes can hit).
func fill(t *testing.T, p string, n int, c byte) {
	t.Helper()
	if err := os.WriteFile(p, bytes.Repeat([]byte{c}, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteHitsCoherence: pwrite through the shim lands in the pool's
// shared pages (the report shows the fast path carried every byte); while
// the writer still holds its fd, a process without the shim reads the new
// bytes at once (os.ReadFile, cat), sees the right size, and writes other
// bytes that the shim's next read returns at once; fsync puts both on the
// backing file.
func TestWriteHitsCoherence(t *testing.T) {
	bin := cc(t, "coherence", "gcc")
	onMount, _ := setup(t)
	const n = 1 << 20
	p := filepath.Join(onMount, "c.bin")
	fill(t, p, 2*n, '.')
	rep := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(bin, p, "1048576")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "written\n" {
		t.Fatalf("coherence: %q %v; stderr %s", line, err, stderr.String())
	}
	want := append(bytes.Repeat([]byte{'S'}, n), bytes.Repeat([]byte{'.'}, n)...)
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("plain read while the shim writer is attached: %d bytes, %d 'S' (want %d), err %v",
			len(got), bytes.Count(got, []byte{'S'}), n, err)
	}
	if catOut, err := exec.Command("cat", p).Output(); err != nil || !bytes.Equal(catOut, want) {
		t.Fatalf("cat while the shim writer is attached: %d 'S' of %d, err %v", bytes.Count(catOut, []byte{'S'}), len(catOut), err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 2*n {
		t.Fatalf("stat: %v %v", st, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{'P'}, n), n); err != nil {
		t.Fatal(err)
	}
	f.Close()
	io.WriteString(stdin, "go\n")
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("coherence: %v; stderr %s", err, stderr.String())
	}
	if !bytes.Equal(rest, bytes.Repeat([]byte{'P'}, n)) {
		t.Fatalf("the shim read %d 'P' of %d bytes after a plain write, want %d", bytes.Count(rest, []byte{'P'}), len(rest), n)
	}
	r := parseReport(t, rep)
	requireOurs(t, r)
	if r.FastWrite != n || r.KernelWrite != 0 {
		t.Fatalf("write hits: fast %d kernel %d bytes, want all %d on the fast path: %+v", r.FastWrite, r.KernelWrite, n, r)
	}
	if r.FastRead != n {
		t.Fatalf("read after a plain write: fast %d bytes, want %d: %+v", r.FastRead, n, r)
	}
	rel, _ := filepath.Rel(mnt, p)
	b, err := os.ReadFile(filepath.Join(backing, rel))
	want = append(bytes.Repeat([]byte{'S'}, n), bytes.Repeat([]byte{'P'}, n)...)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("backing file after fsync: %d bytes, %d 'S' %d 'P', err %v", len(b), bytes.Count(b, []byte{'S'}), bytes.Count(b, []byte{'P'}), err)
	}
}
