package posixtest

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
	"time"
)

// TestUserName is the unprivileged user the permission cases run as.
const TestUserName = "iowarp-test"

// User is an unprivileged identity for the permission cases.
type User struct{ Uid, Gid uint32 }

// TestUser returns the test user, creating it (useradd, idempotent) when
// it does not exist; it skips the test when not root. Tests of several
// packages may race to create it: an "already exists" or a busy
// /etc/passwd lock is followed by another look-up.
func TestUser(t *testing.T) User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create and become a second user")
	}
	var lastErr error
	for range 50 {
		if u, err := lookupUser(); err == nil {
			return u
		}
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", TestUserName).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("useradd: %v", err) // not installed: the image lacks passwd
		}
		if err != nil {
			lastErr = errors.New(string(out))
			time.Sleep(100 * time.Millisecond) // exists now, or the lock is busy
		}
	}
	t.Fatalf("cannot create user %s: %v", TestUserName, lastErr)
	return User{}
}

func lookupUser() (User, error) {
	u, err := user.Lookup(TestUserName)
	if err != nil {
		return User{}, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return User{}, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return User{}, err
	}
	return User{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
