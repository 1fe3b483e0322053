package files

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// withWalkers runs f with openat2 and with the one-openat-per-component
// fallback.
func withWalkers(t *testing.T, f func(t *testing.T)) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "per-component"
		}
		t.Run(name, func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(fallback)
			t.Cleanup(func() { noOpenat2.Store(old) })
			f(t)
		})
	}
}

// TestDeepPaths: entries whose path from the root is far past PATH_MAX
// are created, stated, renamed, linked, listed and removed (only a
// component is bounded).
func TestDeepPaths(t *testing.T) {
	withWalkers(t, func(t *testing.T) {
		fs := newTestFS(t, Writeback, 8<<20, 32<<20, nil)
		comp := strings.Repeat("d", 250)
		p := ""
		for len(p) < 9000 {
			p = strings.TrimPrefix(p+"/"+comp, "/")
			if err := fs.Mkdir(p, 0o755, Cred{}); err != nil {
				t.Fatalf("mkdir at %d bytes: %v", len(p), err)
			}
		}
		f := p + "/f"
		h, _, err := fs.Open(f, unix.O_CREAT|unix.O_RDWR, 0o644, Cred{})
		if err != nil {
			t.Fatalf("create at %d bytes: %v", len(f), err)
		}
		if _, err := h.WriteAt([]byte("deep"), 0); err != nil {
			t.Fatal(err)
		}
		if err := h.Fsync(false); err != nil {
			t.Fatal(err)
		}
		h.Release()
		for _, step := range []struct {
			name string
			err  error
		}{
			{"rename", fs.Rename(f, p+"/g", 0)},
			{"link", fs.Link(p+"/g", "top")},
			{"symlink", fs.Symlink("g", p+"/s", Cred{})},
			{"setxattr", fs.Setxattr(p+"/g", "user.k", []byte("v"), 0)},
			{"fsyncdir", fs.Fsyncdir(p)},
		} {
			if step.err != nil {
				t.Fatalf("%s: %v", step.name, step.err)
			}
		}
		if st, err := fs.Lstat(p + "/g"); err != nil || st.Size != 4 || st.Nlink != 2 {
			t.Errorf("lstat: size %d nlink %d err %v, want 4, 2, nil", st.Size, st.Nlink, err)
		}
		if tgt, err := fs.Readlink(p + "/s"); err != nil || tgt != "g" {
			t.Errorf("readlink: %q %v", tgt, err)
		}
		if n, err := fs.Getxattr(p+"/g", "user.k", make([]byte, 8)); err != nil || n != 1 {
			t.Errorf("getxattr: %d %v", n, err)
		}
		if list, err := fs.ReadDir(p); err != nil || len(list) != 2 {
			t.Errorf("readdir: %v %v, want g and s", list, err)
		}
		for _, name := range []string{p + "/g", p + "/s", "top"} {
			if err := fs.Unlink(name); err != nil {
				t.Errorf("unlink %d bytes: %v", len(name), err)
			}
		}
		if err := fs.Rmdir(p); err != nil {
			t.Errorf("rmdir: %v", err)
		}
		// The root is "." in its own directory fd.
		if err := fs.Setxattr("", "user.root", []byte("r"), 0); err != nil {
			t.Errorf("setxattr on the root: %v", err)
		}
		if n, err := fs.Getxattr("", "user.root", make([]byte, 8)); err != nil || n != 1 {
			t.Errorf("getxattr on the root: %d %v", n, err)
		}
	})
}

// TestWalkFollowsNoSymlink: a directory of the backing store replaced by
// a symlink (behind the daemon's back) does not lead out of the namespace.
func TestWalkFollowsNoSymlink(t *testing.T) {
	withWalkers(t, func(t *testing.T) {
		fs := newTestFS(t, Writeback, 8<<20, 32<<20, nil)
		outside := t.TempDir()
		if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(fs.backing, "a")); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(fs.backing, "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(fs.backing, "b", "c")); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"a/secret", "b/c/secret"} {
			if _, err := fs.Lstat(p); !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("lstat %s: %v, want ELOOP or ENOTDIR", p, err)
			}
			if _, _, err := fs.Open(p, unix.O_RDONLY, 0, Cred{}); err == nil {
				t.Errorf("open %s through a symlink succeeded", p)
			}
			if err := fs.Mkdir(p+"x", 0o755, Cred{}); err == nil {
				t.Errorf("mkdir %sx through a symlink succeeded", p)
			}
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Errorf("outside dir changed: %v", ents)
		}
	})
}

func TestSplitWalk(t *testing.T) {
	comp := strings.Repeat("c", 255)
	d := comp
	for len(d) < 3*maxWalk {
		d += "/" + comp
	}
	var chunks []string
	for rest := d; rest != ""; {
		var c string
		c, rest = splitWalk(rest)
		if c == "" || len(c) > maxWalk || strings.HasPrefix(c, "/") || strings.HasSuffix(c, "/") {
			t.Fatalf("bad chunk of %d bytes", len(c))
		}
		chunks = append(chunks, c)
	}
	if strings.Join(chunks, "/") != d {
		t.Errorf("chunks do not join back to the path")
	}
}
