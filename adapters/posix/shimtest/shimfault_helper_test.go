package shimtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime/control"
)

// The fault tests of the shim's new-data path (issue 8): a daemon of
// their own with a small, fixed tier layout, killed and restarted at will,
// and writers (testdata/faultw.c) whose bytes are a function of their
// offset, so that any prefix of a file can be checked.

// pat is faultw.c's byte at offset o.
func pat(o int64) byte { return byte(uint32(o) * 2654435761 >> 24) }

// patBytes is the pattern over [0, n).
func patBytes(n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = pat(int64(i))
	}
	return b
}

// requirePattern: p holds the pattern over at least its first n bytes and
// over the whole of its size.
func requirePattern(t *testing.T, what, p string, n int64) int64 {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if int64(len(got)) < n {
		t.Fatalf("%s: %s is %d bytes, want at least %d", what, p, len(got), n)
	}
	for i, c := range got {
		if c != pat(int64(i)) {
			t.Fatalf("%s: %s (%d bytes) differs from what was written at offset %d: %#x, want %#x",
				what, p, len(got), i, c, pat(int64(i)))
		}
	}
	return int64(len(got))
}

// faultDaemon is an `iowarp mount` of the test's own, on dirs under base
// that outlive it, so that a second one can start where a killed one was.
type faultDaemon struct {
	t                   *testing.T
	base                string
	dir, back, ctl, cfg string
	cmd                 *exec.Cmd
}

// newFaultDaemon writes a config with a RAM tier of ram and, if nvme is
// not empty, a file tier of that size (both private to the test), and the
// YAML lines of extra.
func newFaultDaemon(t *testing.T, ram, nvme, extra string) *faultDaemon {
	t.Helper()
	base := t.TempDir()
	d := &faultDaemon{t: t, base: base,
		dir: filepath.Join(base, "mnt"), back: filepath.Join(base, "backing"),
		ctl: filepath.Join(base, "ctl"), cfg: filepath.Join(base, "iowarp.yaml")}
	for _, p := range []string{d.dir, d.back, filepath.Join(base, "nvme")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := extra + fmt.Sprintf("tiers:\n  - name: ram\n    kind: ram\n    capacity: %s\n", ram)
	if nvme != "" {
		cfg += fmt.Sprintf("  - name: nvme\n    kind: file\n    dir: %s\n    capacity: %s\n", filepath.Join(base, "nvme"), nvme)
	}
	if err := os.WriteFile(d.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	return d
}

// start mounts (again) and waits for the mount.
func (d *faultDaemon) start() {
	d.t.Helper()
	d.cmd = exec.Command(iowarp, "mount", d.dir, "--config", d.cfg, "--backing", d.back, "--control-dir", d.ctl)
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	for i := 0; i < 200 && !mounted(d.dir); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !mounted(d.dir) {
		d.t.Fatal("the test's daemon did not mount")
	}
}

// kill is kill -9 of the daemon; the dead mount is detached.
func (d *faultDaemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	exec.Command("umount", "-l", d.dir).Run()
	d.cmd = nil
}

// term is a clean stop (SIGTERM: drain, unmount); it must exit 0.
func (d *faultDaemon) term() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	err := d.cmd.Wait()
	d.cmd = nil
	if err != nil {
		d.t.Fatalf("daemon after SIGTERM: %v", err)
	}
}

func (d *faultDaemon) stop() {
	if d.cmd != nil {
		d.kill()
	}
}

// faultStat is what the fault tests read of `iowarp stat --json`.
type faultStat struct {
	Pool struct {
		Tiers []struct {
			Name     string `json:"name"`
			Capacity int64  `json:"capacity"`
			Used     int64  `json:"used"`
			Blobs    int64  `json:"blobs"`
		} `json:"tiers"`
		// The shim leases: first-tier bytes reserved for them now, and
		// how many leases (and bytes) were given back.
		LeaseBytes    *int64 `json:"shim_lease_bytes"`
		LeasesBack    *int64 `json:"shim_leases_returned"`
		LeaseBackB    *int64 `json:"shim_lease_returned_bytes"`
		LeaseDropped  *int64 `json:"shim_pages_dropped"`
		LeaseAdopted  *int64 `json:"shim_pages_adopted"`
		LeaseRefilled *int64 `json:"shim_lease_refills"`
	} `json:"pool"`
	DirtyBytes int64 `json:"dirty_bytes"`
	OpenFiles  int64 `json:"open_files"`
}

// stat is `iowarp stat --json` of the daemon; it fails the test on any
// error or a stat without the shim lease counters.
func (d *faultDaemon) stat() faultStat {
	d.t.Helper()
	st, err := d.statErr()
	if err != nil {
		d.t.Fatal(err)
	}
	return st
}

// statErr is stat for any goroutine.
func (d *faultDaemon) statErr() (faultStat, error) {
	out, err := exec.Command(iowarp, "stat", d.dir, "--control-dir", d.ctl, "--json").Output()
	if err != nil {
		return faultStat{}, fmt.Errorf("iowarp stat: %w", err)
	}
	return parseFaultStat(out)
}

// statNow asks the control socket itself what `iowarp stat --json`
// prints (the same call, without starting the CLI: a sampler gets many
// more samples in).
func (d *faultDaemon) statNow() (faultStat, error) {
	var raw json.RawMessage
	if err := control.Call(control.SocketPath(d.ctl, d.dir), "stats", &raw); err != nil {
		return faultStat{}, err
	}
	return parseFaultStat(raw)
}

func parseFaultStat(out []byte) (faultStat, error) {
	var st faultStat
	if err := json.Unmarshal(out, &st); err != nil || len(st.Pool.Tiers) == 0 {
		return st, fmt.Errorf("iowarp stat: %v: %s", err, out)
	}
	p := st.Pool
	if p.LeaseBytes == nil || p.LeasesBack == nil || p.LeaseBackB == nil || p.LeaseDropped == nil ||
		p.LeaseAdopted == nil || p.LeaseRefilled == nil {
		return st, fmt.Errorf("iowarp stat --json has no shim lease counters: %s", out)
	}
	return st, nil
}

// String is the part of st the fault tests look at.
func (st faultStat) String() string {
	p := st.Pool
	s := ""
	for _, tr := range p.Tiers {
		s += fmt.Sprintf("tier %s: %d of %d bytes, %d blobs; ", tr.Name, tr.Used, tr.Capacity, tr.Blobs)
	}
	return s + fmt.Sprintf("%d open files; leased %d bytes, %d refills, %d returned (%d bytes), %d pages adopted, %d dropped",
		st.OpenFiles, *p.LeaseBytes, *p.LeaseRefilled, *p.LeasesBack, *p.LeaseBackB, *p.LeaseAdopted, *p.LeaseDropped)
}

// overCapacity names a tier of st that uses more than its capacity.
func (st faultStat) overCapacity() string {
	for _, tr := range st.Pool.Tiers {
		if tr.Used > tr.Capacity || tr.Used < 0 {
			return fmt.Sprintf("tier %s uses %d of %d bytes", tr.Name, tr.Used, tr.Capacity)
		}
	}
	if l := *st.Pool.LeaseBytes; l < 0 || l > st.Pool.Tiers[0].Used {
		return fmt.Sprintf("%d bytes leased, %d used in the first tier", l, st.Pool.Tiers[0].Used)
	}
	return ""
}

// waitStat polls the daemon's stat until ok holds (at most 10 s) and
// returns the last one.
func (d *faultDaemon) waitStat(ok func(faultStat) bool) (faultStat, bool) {
	d.t.Helper()
	var st faultStat
	for i := 0; i < 200; i++ {
		if st = d.stat(); ok(st) {
			return st, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return st, false
}

// faultWriter is a faultw process under the shim.
type faultWriter struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	report string
	stderr bytes.Buffer
}

// startWriter starts faultw on p under the shim (IOWARP_REPORT on).
func startWriter(t *testing.T, bin, p string) *faultWriter {
	t.Helper()
	w := &faultWriter{t: t, report: filepath.Join(t.TempDir(), "report")}
	w.cmd = exec.Command(bin, p)
	w.cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+w.report)
	w.cmd.Stderr = &w.stderr
	w.in, _ = w.cmd.StdinPipe()
	stdout, _ := w.cmd.StdoutPipe()
	w.out = bufio.NewReader(stdout)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.in.Close()
		w.cmd.Process.Kill()
		w.cmd.Wait()
	})
	return w
}

// do sends one command and returns the answer line.
func (w *faultWriter) do(cmd string) string {
	w.t.Helper()
	fmt.Fprintln(w.in, cmd)
	s, err := w.out.ReadString('\n')
	if err != nil {
		w.t.Fatalf("faultw %q: %q %v; stderr: %s", cmd, s, err, w.stderr.String())
	}
	return strings.TrimSuffix(s, "\n")
}

// expect sends cmd and requires the answer want.
func (w *faultWriter) expect(cmd, want string) {
	w.t.Helper()
	if got := w.do(cmd); got != want {
		w.t.Fatalf("faultw %q: %q, want %q; stderr: %s", cmd, got, want, w.stderr.String())
	}
}

// close ends the writer cleanly and returns its report.
func (w *faultWriter) close() Report {
	w.t.Helper()
	w.in.Close()
	rest, _ := io.ReadAll(w.out)
	// Answers to commands sent without waiting may come first.
	if err := w.cmd.Wait(); err != nil || !strings.HasSuffix("\n"+string(rest), "\nclosed\n") {
		w.t.Fatalf("faultw at EOF: %q %v; stderr: %s", rest, err, w.stderr.String())
	}
	return parseReport(w.t, w.report)
}

// kill is kill -9 of the writer.
func (w *faultWriter) kill() {
	w.cmd.Process.Signal(syscall.SIGKILL)
	w.cmd.Wait()
}
