package contrib

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestUserMount: an unprivileged user mounts with the defaults alone
// (fusermount3, the data under $HOME/.cache/iowarp, the control socket
// under $XDG_RUNTIME_DIR), writes and reads through the mount as itself,
// and the data are on the backing store after SIGTERM. The mount table
// shows a user mount (user_id=<uid>).
func TestUserMount(t *testing.T) {
	u := newTestUser(t)
	bin := iowarpBin(t)
	dir := openDir(t)
	home, run, mnt := filepath.Join(dir, "home"), filepath.Join(dir, "run"), filepath.Join(dir, "mnt")
	for _, d := range []string{home, run, mnt} {
		os.Mkdir(d, 0o700)
	}
	u.chown(t, home, run, mnt)
	u.grantFuse(t)
	t.Cleanup(func() { detach(mnt) })

	log := filepath.Join(dir, "daemon.log")
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := u.run("env", "HOME="+home, "XDG_RUNTIME_DIR="+run, bin, "mount", mnt, "--ram", "64MiB")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	entry := waitMounted(t, mnt, exited)
	if !strings.Contains(entry, "user_id="+itoa(u.uid)) {
		t.Errorf("mount table: %s: not a mount by uid %d", entry, u.uid)
	}

	f := filepath.Join(mnt, "a.txt")
	if b, err := u.run("sh", "-c", `echo user-data > "$0" && cat "$0"`, f).CombinedOutput(); err != nil || string(b) != "user-data\n" {
		t.Fatalf("write and read as the user: %v: %q", err, b)
	}
	// Without allow_other even root is refused the mount: ask as the user.
	if b, err := u.run("stat", "-c", "%u", f).Output(); err != nil || strings.TrimSpace(string(b)) != itoa(u.uid) {
		t.Errorf("file owned by uid %q (%v), want %d", b, err, u.uid)
	}
	if _, err := os.Stat(f); err == nil {
		t.Errorf("root reaches a user mount made without allow_other")
	}
	if err := u.run(bin, "stat", "--control-dir", filepath.Join(run, "iowarp"), mnt).Run(); err != nil {
		t.Errorf("iowarp stat as the user, control socket under XDG_RUNTIME_DIR: %v", err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	logText, _ := os.ReadFile(log)
	if waitErr != nil {
		t.Fatalf("daemon: %v\n%s", waitErr, logText)
	}
	backing := filepath.Join(home, ".cache", "iowarp", "backing")
	if !strings.Contains(string(logText), "backing "+backing) {
		t.Errorf("log does not name the default backing %s:\n%s", backing, logText)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "a.txt")); err != nil || string(b) != "user-data\n" {
		t.Errorf("backing store: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(home, ".cache", "iowarp", "nvme")); err != nil {
		t.Errorf("default file tier not under the user's cache: %v", err)
	}
	if bytes.Contains(logText, []byte("WARN")) {
		t.Errorf("a user mount logs warnings:\n%s", logText)
	}
}

// TestUserMountErrors: what a user mount lacks is named before anything
// is built: a mount point it cannot write, allow_other without
// user_allow_other, a tier directory it cannot create; and /dev/fuse,
// where the device is not open to the user yet.
func TestUserMountErrors(t *testing.T) {
	u := newTestUser(t)
	bin := iowarpBin(t)
	dir := openDir(t)
	home, mnt, rootOnly := filepath.Join(dir, "home"), filepath.Join(dir, "mnt"), filepath.Join(dir, "rootmnt")
	for _, d := range []string{home, mnt, rootOnly} {
		os.Mkdir(d, 0o755)
	}
	u.chown(t, home, mnt)
	env := []string{"env", "HOME=" + home}
	mount := func(args ...string) string {
		b, err := u.run(env[0], append(append(env[1:], bin, "mount"), args...)...).CombinedOutput()
		if err == nil {
			detach(args[0])
			t.Fatalf("mount %v as the user succeeded", args)
		}
		return string(b)
	}
	// /dev/fuse closed to the user: where only an ACL of ours opens it
	// (mode 0600 here), drop the ACL for the case and grant it again.
	if st, err := os.Stat("/dev/fuse"); err == nil && st.Mode().Perm()&0o006 == 0 {
		exec.Command("setfacl", "-x", "u:"+itoa(u.uid), "/dev/fuse").Run()
		if out := mount(mnt); !strings.Contains(out, "/dev/fuse") || !strings.Contains(out, "read-write access") {
			t.Errorf("no access to /dev/fuse: %s", out)
		}
	} else {
		t.Log("/dev/fuse is open to every user here: its error is not tested")
	}
	u.grantFuse(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"mount point not writable", []string{rootOnly}, []string{"mount point " + rootOnly, "permission denied", "fusermount3"}},
		{"tier dir", []string{mnt, "--nvme", "/var/lib/iowarp-test-denied/nvme:1GiB"},
			[]string{"tier nvme", "/var/lib/iowarp-test-denied", "--nvme"}},
	}
	if b, _ := os.ReadFile("/etc/fuse.conf"); !strings.Contains("\n"+string(b), "\nuser_allow_other") {
		cases = append(cases, struct {
			name string
			args []string
			want []string
		}{"allow_other", []string{mnt, "--allow-other"}, []string{"user_allow_other", "/etc/fuse.conf"}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := mount(tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("error lacks %q: %s", w, out)
				}
			}
			if strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("more than one line: %s", out)
			}
		})
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
