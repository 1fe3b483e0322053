package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/runtime/config"
)

// A user without root mounts through fusermount3, the setuid-root helper
// of the fuse3 package (go-fuse's non-direct mount); root mounts with
// mount(2) itself. Before a user mount, checkUserMount names the first
// thing that is missing, instead of the helper's terse failure after the
// pool is built: the helper, its setuid bit, /dev/fuse, write access to
// the mount point, user_allow_other for allow_other, and the tier
// directories.

// fuseConf is fusermount3's configuration (user_allow_other, mount_max).
var fuseConf = "/etc/fuse.conf"

// checkUserMount checks what a user mount of cfg needs; nil for root.
func checkUserMount(cfg *config.Config) error {
	if os.Geteuid() == 0 {
		return nil
	}
	who := currentUser()
	if _, err := fusermount(); err != nil {
		return fmt.Errorf("mount as %s (not root): %w", who, err)
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		return fmt.Errorf("mount as %s (not root): /dev/fuse: %w: a user mount needs read-write access to it "+
			"(mode 0666, as udev sets it on most distributions; or an ACL: setfacl -m u:USER:rw /dev/fuse)", who, err)
	}
	if err := unix.Access(cfg.Mount, unix.W_OK); err != nil {
		return fmt.Errorf("mount as %s (not root): mount point %s: %w: fusermount3 mounts only on a directory "+
			"the user can write (chown it to %s, or mount under your own directory)", who, cfg.Mount, err, who)
	}
	if cfg.AllowOther && !userAllowOther() {
		return fmt.Errorf("mount as %s (not root): allow_other needs a line user_allow_other in %s "+
			"(or drop allow_other / --allow-other)", who, fuseConf)
	}
	return checkTierDirs(cfg, who)
}

// fusermount returns the helper go-fuse runs (fusermount3, else
// fusermount, on PATH or in /bin) after checking that it is setuid root.
func fusermount() (string, error) {
	var path string
	for _, name := range []string{"fusermount3", "fusermount"} {
		for _, p := range []string{name, "/bin/" + name} {
			if found, err := exec.LookPath(p); err == nil {
				path = found
				break
			}
		}
		if path != "" {
			break
		}
	}
	if path == "" {
		return "", errors.New("fusermount3 not found on PATH or in /bin: a user mount needs it " +
			"(Debian/Ubuntu: apt-get install fuse3; RHEL: dnf install fuse3)")
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("fusermount3: %w", err)
	}
	if st.Uid != 0 || st.Mode&unix.S_ISUID == 0 {
		return "", fmt.Errorf("%s is not setuid root (mode %o, owner uid %d): a user mount needs "+
			"chown root %s && chmod u+s %s (or a file system not mounted nosuid)", path, st.Mode&0o7777, st.Uid, path, path)
	}
	return path, nil
}

// userAllowOther reports whether fuse.conf allows user mounts allow_other.
func userAllowOther() bool {
	f, err := os.Open(fuseConf)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// checkTierDirs checks that the user can create the directory of each
// tier that has one (file tiers): the message names the tier, the directory and the config
// key or flag that sets it.
func checkTierDirs(cfg *config.Config, who string) error {
	for i, t := range cfg.Tiers {
		if t.Dir == "" {
			continue
		}
		if err := os.MkdirAll(t.Dir, 0o700); err != nil {
			return fmt.Errorf("mount as %s (not root): tier %s: %w: pick a directory the user can write "+
				"(tiers[%d].dir in the config, or --nvme DIR:SIZE; the default for a user is under %s)",
				who, t.Name, err, i, config.UserDataDir())
		}
	}
	return nil
}

// currentUser names the effective user: "name (uid N)".
func currentUser() string {
	uid := strconv.Itoa(os.Geteuid())
	if u, err := user.LookupId(uid); err == nil {
		return u.Username + " (uid " + uid + ")"
	}
	return "uid " + uid
}

// lazyUnmount detaches a busy mount: umount -l for root, fusermount3 -uz
// for a user mount.
func lazyUnmount(dir string) error {
	cmd := exec.Command("umount", "-l", dir)
	if os.Geteuid() != 0 {
		bin, err := fusermount()
		if err != nil {
			return err
		}
		cmd = exec.Command(bin, "-u", "-z", dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
