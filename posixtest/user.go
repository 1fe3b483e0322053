package posixtest

import (
	"testing"

	"github.com/iowarp/iowarp/internal/testenv"
)

// TestUserName is the unprivileged user the permission cases run as.
const TestUserName = testenv.UserName

// User is an unprivileged identity for the permission cases.
type User struct{ Uid, Gid uint32 }

// TestUser returns the test user (testenv.User: created when missing); it
// skips the test when not root.
func TestUser(t *testing.T) User {
	t.Helper()
	uid, gid := testenv.User(t)
	return User{Uid: uid, Gid: gid}
}
