package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/posixtest"
)

// openUp makes dir and its ancestors searchable by other users (the test
// directories are 0700).
func openUp(dir string) {
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
}

// TestForeignAccess: with allow_other, another user is refused exactly
// what tmpfs refuses it: a mode of 0000 is served as 0000 (go-fuse would
// serve 0644/0755 without NullPermissions), a file under a 0000 or
// list-only directory is out of reach.
func TestForeignAccess(t *testing.T) {
	u := posixtest.TestUser(t)
	ref := posixtest.RefDir(t)
	openUp(ref)
	c := func(t *testing.T, dir string) posixtest.Transcript {
		return posixtest.ForeignAccess(t, dir, u, nil)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			tm := newTestMountOpts(t, mode, Options{AllowOther: true})
			openUp(tm.dir)
			posixtest.Compare(t, ref, tm.dir, c)
		})
	}
}

// TestOMNIDirAttrGrantsNothingMore: a view directory never has a
// permission its source lacks: a list-only source directory is not
// searchable in the view (its files would be reachable there only).
func TestOMNIDirAttrGrantsNothingMore(t *testing.T) {
	for _, c := range []struct {
		name string
		mode uint32
		want uint32
	}{
		{"dir 0000", unix.S_IFDIR | 0o000, 0o000},
		{"dir list-only 0444", unix.S_IFDIR | 0o444, 0o444},
		{"dir search-only 0711", unix.S_IFDIR | 0o711, 0o511},
		{"dir 0755", unix.S_IFDIR | 0o755, 0o555},
		{"file 0000", unix.S_IFREG | 0o000, 0o000},
		{"file 0640", unix.S_IFREG | 0o640, 0o550},
	} {
		var a fuse.Attr
		st := unix.Stat_t{Mode: c.mode}
		dirAttr(&st, &a)
		if a.Mode != unix.S_IFDIR|c.want {
			t.Errorf("%s: view mode %o, want %o", c.name, a.Mode, unix.S_IFDIR|c.want)
		}
	}
}
