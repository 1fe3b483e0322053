package shimtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/posixtest"
)

// openUp makes dir and its ancestors searchable by other users.
func openUp(dir string) {
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
}

// mountAllowOther runs a second daemon, mounted with --allow-other, for
// the duration of the test and returns its mount point.
func mountAllowOther(t *testing.T, base string) string {
	t.Helper()
	m, b := filepath.Join(base, "mnt"), filepath.Join(base, "backing")
	for _, d := range []string{m, b, filepath.Join(base, "nvme")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := exec.Command(iowarp, "mount", m, "--backing", b, "--ram", "64MiB", "--allow-other",
		"--nvme", filepath.Join(base, "nvme")+":256MiB", "--control-dir", filepath.Join(base, "ctl"))
	d.Stdout, d.Stderr = os.Stderr, os.Stderr
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			d.Process.Kill()
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	for range 200 {
		if mounted(m) {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not mount", m)
	return ""
}

// TestForeignAccessWithShim: the shim, preloaded into another user's
// programs, gives them nothing the kernel refuses (a 0000 file, a file
// under a 0000 directory ...): the same transcript as on tmpfs, and the
// shim did take that user's allowed opens on the mount as its own.
func TestForeignAccessWithShim(t *testing.T) {
	setup(t) // builds the library and the CLI
	u := posixtest.TestUser(t)
	base := t.TempDir()
	openUp(base)
	shimLib := filepath.Join(base, "libiowarp.so") // where the user can read it
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shimLib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := filepath.Join(base, "report")
	if err := os.WriteFile(rep, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(rep, 0o666)
	m := mountAllowOther(t, base)
	openUp(m)
	ref := posixtest.RefDir(t)
	openUp(ref)
	env := []string{"LD_PRELOAD=" + shimLib, "IOWARP_REPORT=" + rep}
	posixtest.Compare(t, ref, m, func(t *testing.T, dir string) posixtest.Transcript {
		return posixtest.ForeignAccess(t, dir, u, env)
	})
	r := parseReport(t, rep)
	if r.Procs == 0 || r.Opens == 0 {
		t.Errorf("the shim did not run in the other user's programs or took none of their opens: %+v", r)
	}
	if r.HandshakeFail != 0 {
		t.Errorf("handshake failures: %+v", r)
	}
}
