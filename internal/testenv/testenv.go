// Package testenv holds what tests of several packages need from the
// machine: a second, unprivileged user and a small real file system on a
// loop device. Each helper skips the test when the machine cannot give it
// (not root, no loop devices, no mkfs.ext4) and fails it on any other
// error. Only tests import this package.
package testenv

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// UserName is the unprivileged user tests run commands as.
const UserName = "iowarp-test"

// User returns the uid and gid of UserName, creating it (useradd,
// idempotent) when it does not exist; it skips t when not root. Test
// binaries of several packages may race to create it: an "already
// exists" or a busy /etc/passwd lock is followed by another look-up.
func User(t testing.TB) (uid, gid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create and become a second user")
	}
	var lastErr error
	for range 50 {
		if uid, gid, err := lookup(); err == nil {
			return uid, gid
		}
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", UserName).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("useradd: %v", err) // not installed: the image lacks passwd
		}
		if err != nil {
			lastErr = errors.New(strings.TrimSpace(string(out)))
			time.Sleep(100 * time.Millisecond) // exists now, or the lock is busy
		}
	}
	t.Fatalf("cannot create user %s: %v", UserName, lastErr)
	return 0, 0
}

func lookup() (uid, gid uint32, err error) {
	u, err := user.Lookup(UserName)
	if err != nil {
		return 0, 0, err
	}
	id, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, 0, err
	}
	g, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return 0, 0, err
	}
	return uint32(id), uint32(g), nil
}

// LoopExt4 mounts a fresh ext4 of size bytes (a file in t.TempDir() on a
// loop device, no reserved blocks) and returns its mount point; t's
// cleanup unmounts it.
func LoopExt4(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for a loop device")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("no loop device support")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4 (e2fsprogs)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	if err := os.Truncate(createFile(t, img), size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

func createFile(t testing.TB, p string) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// Fill writes the file dir/name until dir's file system is full (ENOSPC
// for 1 MiB writes, then for 4 KiB ones), syncs it and returns its path.
func Fill(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4096} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return p
}
