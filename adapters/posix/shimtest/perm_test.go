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

// TestWriteOnlyMap: an O_WRONLY open is granted the read-write map its
// new data needs only where its uid may also read the file: another
// user's dd into a file of its own with mode 0600 writes in shared memory,
// into one with mode 0200 through the kernel (the map would let it read
// what the kernel refuses it).
func TestWriteOnlyMap(t *testing.T) {
	setup(t)
	u := posixtest.TestUser(t)
	base := t.TempDir()
	openUp(base)
	shimLib := filepath.Join(base, "libiowarp.so")
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shimLib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	m := mountAllowOther(t, base)
	openUp(m)
	for _, c := range []struct {
		mode os.FileMode
		fast bool
	}{{0o600, true}, {0o200, false}} {
		p := filepath.Join(m, "w"+c.mode.String())
		if err := os.WriteFile(p, nil, c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, c.mode)
		os.Chown(p, int(u.Uid), int(u.Gid))
		rep := filepath.Join(base, "report"+c.mode.String())
		os.WriteFile(rep, nil, 0o666)
		os.Chmod(rep, 0o666)
		cmd := exec.Command("dd", "if=/dev/zero", "of="+p, "bs=1M", "count=4", "conv=notrunc", "status=none")
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+shimLib, "IOWARP_REPORT="+rep)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.Uid, Gid: u.Gid}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dd as uid %d into a %v file: %v\n%s", u.Uid, c.mode, err, out)
		}
		r := parseReport(t, rep)
		requireOurs(t, r)
		// Fast or not is the grant's decision, for every byte (the
		// daemon's harvest runs beside shim writers).
		if want := map[bool]int64{true: 4 << 20}[c.fast]; r.FastWrite != want || r.FastWrite+r.KernelWrite != 4<<20 {
			t.Fatalf("mode %v: fast path carried %d of %d bytes, want fast=%v: %+v", c.mode, r.FastWrite, 4<<20, c.fast, r)
		}
		if st, err := os.Stat(p); err != nil || st.Size() != 4<<20 {
			t.Fatalf("mode %v: stat %v %v", c.mode, st, err)
		}
	}
}
