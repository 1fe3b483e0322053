package contrib

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/leakcheck"
	"github.com/iowarp/iowarp/internal/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		if tree.root != "" {
			os.RemoveAll(tree.root)
		}
		return code
	}))
}

// The layout the tests install with (make install PREFIX=/usr).
const (
	prefix     = "/usr"
	sysconfdir = "/etc"
)

// installed is one `make install DESTDIR=root` tree.
type installed struct {
	once sync.Once
	root string // DESTDIR
	log  string // make's output
	err  error
}

var tree installed

// install runs `make install` once per test binary and returns DESTDIR.
// TRIMPATH= keeps the build in the go command's cache of untrimmed
// packages that the other tests fill (a -trimpath build recompiles every
// dependency, minutes on two cores); the flags that matter to the
// layout, -ldflags -s -w -X, are the ones make install always uses.
func install(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	tree.once.Do(func() {
		tree.root, tree.err = os.MkdirTemp("", "destdir")
		if tree.err != nil {
			return
		}
		os.Chmod(tree.root, 0o755) // the test user runs the installed binary
		out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+tree.root, "PREFIX="+prefix,
			"SYSCONFDIR="+sysconfdir, "TRIMPATH=").CombinedOutput()
		tree.log = string(out)
		if err != nil {
			tree.err = fmt.Errorf("make install: %v\n%s", err, out)
		}
	})
	if tree.err != nil {
		t.Fatal(tree.err)
	}
	return tree.root
}

// inTree maps an installed path (/usr/bin/iowarp) into the DESTDIR tree.
func inTree(t *testing.T, path string) string {
	return filepath.Join(install(t), path)
}

// iowarpBin is the installed binary.
func iowarpBin(t *testing.T) string { return inTree(t, prefix+"/bin/iowarp") }

// requireMount skips unless this process can mount FUSE file systems.
func requireMount(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount and to become the test user")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
}

// openDir is a temporary directory every user can traverse (t.TempDir's
// parent is 0700), removed at the end of t.
func openDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// testUser is the unprivileged user of testenv, with read-write access
// to /dev/fuse: where the device is 0600 (no udev, as on this CI's VM)
// an ACL grants it to that user only, as an admin would for the users
// who may mount (a distribution's udev makes it 0666).
type testUser struct {
	uid, gid uint32
}

func newTestUser(t *testing.T) testUser {
	t.Helper()
	requireMount(t)
	uid, gid := testenv.User(t)
	return testUser{uid, gid}
}

// grantFuse gives the user access to /dev/fuse (idempotent).
func (u testUser) grantFuse(t *testing.T) {
	t.Helper()
	if u.run("test", "-r", "/dev/fuse", "-a", "-w", "/dev/fuse").Run() == nil {
		return
	}
	out, err := exec.Command("setfacl", "-m", fmt.Sprintf("u:%d:rw", u.uid), "/dev/fuse").CombinedOutput()
	if err != nil {
		t.Fatalf("setfacl on /dev/fuse (package acl, in the Makefile's APT_PACKAGES): %v: %s", err, out)
	}
}

// run is a command run as the user, in a clean environment (env holds
// the variables to set), as the Slurm scripts run the daemon.
func (u testUser) run(name string, args ...string) *exec.Cmd {
	all := append([]string{fmt.Sprintf("--reuid=%d", u.uid), fmt.Sprintf("--regid=%d", u.gid),
		"--clear-groups", "--reset-env", name}, args...)
	cmd := exec.Command("setpriv", all...)
	cmd.Dir = "/"
	return cmd
}

// chown gives paths to the user.
func (u testUser) chown(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.Chown(p, int(u.uid), int(u.gid)); err != nil {
			t.Fatal(err)
		}
	}
}

// mountEntry returns the /proc/mounts line of dir, "" if none.
func mountEntry(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 2 && unescapeMount(fields[1]) == dir {
			return sc.Text()
		}
	}
	return ""
}

// unescapeMount undoes the octal escapes of /proc/mounts (\040 a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// waitMounted waits (bounded) until dir is an iowarp mount, or until
// exited is closed; it returns the mount table line.
func waitMounted(t *testing.T, dir string, exited <-chan struct{}) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := mountEntry(t, dir); strings.Contains(m, "fuse.iowarp") {
			return m
		}
		select {
		case <-exited:
			t.Fatalf("the daemon exited before %s was mounted", dir)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s not mounted after 60s", dir)
	return ""
}

// detach unmounts dir lazily if a failed test left it mounted.
func detach(dir string) {
	exec.Command("umount", "-l", dir).Run()
}

// testConfig writes a small daemon config (64 MiB RAM, 64 MiB file tier
// under dir) with the given extra lines and returns its path.
func testConfig(t *testing.T, dir, mount, backing, extra string) string {
	t.Helper()
	cfg := fmt.Sprintf(`mount: %s
backing: %s
tiers:
  - name: ram
    kind: ram
    capacity: 64MiB
  - name: nvme
    kind: file
    dir: %s
    capacity: 64MiB
control_dir: %s
%s
`, mount, backing, filepath.Join(dir, "nvme"), filepath.Join(dir, "ctl"), extra)
	p := filepath.Join(dir, "iowarp.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
