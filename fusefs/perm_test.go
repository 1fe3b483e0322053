package fusefs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
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

// mountOptions returns the options /proc/mounts shows for the mount on dir.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == dir {
			return f[3]
		}
	}
	t.Fatalf("%s is not in /proc/self/mounts", dir)
	return ""
}

// TestRootOnlyMount: without AllowOther the mount has no
// default_permissions (a directory's GETATTR before every create in it is
// saved), and root still gets what it gets on tmpfs: it reads and writes a
// file of mode 0000, cannot exec a file without an x bit, and access(2)
// answers the same.
func TestRootOnlyMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	tm := newTestMount(t, files.Writeback)
	if o := mountOptions(t, tm.dir); strings.Contains(o, "default_permissions") {
		t.Errorf("root-only mount has default_permissions: %s", o)
	}
	for _, dir := range []string{t.TempDir(), tm.dir} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command(p).Run(); !errors.Is(err, os.ErrPermission) {
			t.Errorf("%s: exec of a 0644 file: %v, want EACCES", dir, err)
		}
		if err := unix.Access(p, unix.X_OK); err != unix.EACCES {
			t.Errorf("%s: access(X_OK) of a 0644 file: %v, want EACCES", dir, err)
		}
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.Access(p, unix.R_OK|unix.W_OK); err != nil {
			t.Errorf("%s: access(R_OK|W_OK) of a 0000 file by root: %v", dir, err)
		}
		if err := os.WriteFile(p, []byte("x"), 0); err != nil {
			t.Errorf("%s: root writes a 0000 file: %v", dir, err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "x" {
			t.Errorf("%s: root reads a 0000 file: %q, %v", dir, b, err)
		}
	}
	tm2 := newTestMountOpts(t, files.Writeback, Options{AllowOther: true})
	if o := mountOptions(t, tm2.dir); !strings.Contains(o, "default_permissions") {
		t.Errorf("allow_other mount lacks default_permissions: %s", o)
	}
}
