package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/iowarp/iowarp/runtime/ipc"
)

// Two unprivileged users for TestUsersKeptApart (no entry in /etc/passwd
// is needed to run as them).
const (
	uidA = 65533
	uidB = 65534
)

// TestUsersKeptApart runs a daemon as root with one per-user socket for
// each of two uids, and clients as those uids (child processes with
// syscall.Credential): neither can read, list or delete the other's
// bucket; the other-read bit lets B read A's shared bucket and nothing
// more; B cannot use A's socket; root sees everything.
func TestUsersKeptApart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run clients as other uids")
	}
	base := t.TempDir()
	for p := base; p != "/"; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o001 == 0 && os.Chmod(p, st.Mode().Perm()|0o011) != nil {
			t.Skipf("%s is not searchable by other users: %v", p, err)
		}
	}
	exe := filepath.Join(base, "client.test")
	if err := copyExe(os.Args[0], exe); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(base, "ctl")
	d, err := newDaemon(t, filepath.Join(ctl, "root.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	socks := map[uint32]string{}
	for _, uid := range []uint32{uidA, uidB} {
		path := ipc.UserSocketPath(ctl, "", uid)
		srv, err := ipc.Listen(path, d.rt, ipc.Options{Log: quietLog(), ForUser: true, UID: uid, GID: uid})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		socks[uid] = path
	}
	runAs := func(uid uint32, role string) {
		t.Helper()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+role, socketEnv+"="+socks[uid],
			"IOWARP_OTHER_SOCKET="+socks[uidA+uidB-uid])
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s as uid %d: %v\n%s", role, uid, err, out)
		}
	}
	runAs(uidA, "user-a")
	runAs(uidB, "user-b")
	runAs(uidA, "user-a-after")

	// What each made is intact, and owned by its maker.
	for _, c := range []struct{ bucket, blob, data string }{
		{"a/data", "x", "secret"}, {"a/shared", "y", "public"}, {"b/mine", "z", "b's"}} {
		b, err := d.pool.LookupBucket(c.bucket)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(c.blob)
		if err != nil || string(got) != c.data {
			t.Fatalf("%s/%s: %q, %v", c.bucket, c.blob, got, err)
		}
		if want := uint32(uidA); c.bucket[0] == 'b' && b.Meta().Owner != uidB || c.bucket[0] == 'a' && b.Meta().Owner != want {
			t.Fatalf("%s owned by %d", c.bucket, b.Meta().Owner)
		}
	}
	if l, _ := d.pool.LookupBucket("a/shared"); len(l.List()) != 1 {
		t.Fatalf("a/shared holds %+v", l.List())
	}
	// Root, on the daemon's own socket, lists both users' buckets.
	c, err := Connect(Options{Socket: filepath.Join(ctl, "root.ipc")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if names, err := c.Buckets(); err != nil || !slices.Equal(names, []string{"a/data", "a/shared", "b/mine"}) {
		t.Fatalf("root lists %q, %v", names, err)
	}
}

func copyExe(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// childUser is one user's side of TestUsersKeptApart.
func childUser(role, socket string) error {
	c, err := Connect(Options{Socket: socket})
	if err != nil {
		return err
	}
	defer c.Close()
	denied := func(what string, err error) error {
		if !errors.Is(err, ErrPermission) {
			return fmt.Errorf("uid %d: %s: err = %v, want permission denied", os.Getuid(), what, err)
		}
		return nil
	}
	byName := func(name string) *Bucket { return &Bucket{c: c, name: name} } // no open: a name in each request
	switch role {
	case "user-a":
		b, err := c.Bucket("a/data") // mode 0600
		if err != nil {
			return err
		}
		if err := b.Put("x", []byte("secret")); err != nil {
			return err
		}
		s, err := c.BucketWith("a/shared", BucketOptions{Mode: 0o604})
		if err != nil {
			return err
		}
		if err := s.Put("y", []byte("public")); err != nil {
			return err
		}
		st, err := b.StatBucket()
		if err != nil || st.Owner != uidA || st.Mode != 0o600 {
			return fmt.Errorf("a/data stat %+v, %v", st, err)
		}
		return nil
	case "user-b":
		if _, err := Connect(Options{Socket: os.Getenv("IOWARP_OTHER_SOCKET")}); err == nil {
			return fmt.Errorf("uid %d connected to the other user's socket", os.Getuid())
		}
		_, err := c.Bucket("a/data")
		if err := denied("open a/data", err); err != nil {
			return err
		}
		_, err = byName("a/data").Get("x")
		if err := denied("get a/data/x", err); err != nil {
			return err
		}
		_, err = byName("a/data").List()
		if err := denied("list a/data", err); err != nil {
			return err
		}
		if err := denied("delete a/data", c.DeleteBucket("a/data")); err != nil {
			return err
		}
		if err := denied("delete a/data/x", byName("a/data").Delete("x")); err != nil {
			return err
		}
		names, err := c.Buckets()
		if err != nil || !slices.Equal(names, []string{"a/shared"}) {
			return fmt.Errorf("buckets: %q, %v (want only the other-readable a/shared)", names, err)
		}
		res, err := c.Query(Query{Prefix: "a"})
		if err != nil || len(res) != 1 || res[0].Bucket != "a/shared" {
			return fmt.Errorf("query: %+v, %v", res, err)
		}
		got, err := byName("a/shared").Get("y")
		if err != nil || string(got) != "public" {
			return fmt.Errorf("get a/shared/y: %q, %v", got, err)
		}
		if err := denied("put a/shared/z", byName("a/shared").Put("z", []byte("b"))); err != nil {
			return err
		}
		if err := denied("chmod a/shared", byName("a/shared").Chmod(0o666)); err != nil {
			return err
		}
		if err := denied("delete a/shared", c.DeleteBucket("a/shared")); err != nil {
			return err
		}
		b, err := c.Bucket("b/mine")
		if err != nil {
			return err
		}
		return b.Put("z", []byte("b's"))
	case "user-a-after":
		_, err := byName("b/mine").Get("z")
		if err := denied("get b/mine/z", err); err != nil {
			return err
		}
		if err := denied("delete b/mine", c.DeleteBucket("b/mine")); err != nil {
			return err
		}
		names, err := c.BucketsUnder("")
		if err != nil || !slices.Equal(names, []string{"a/data", "a/shared"}) {
			return fmt.Errorf("buckets: %q, %v", names, err)
		}
		return nil
	}
	return fmt.Errorf("unknown role %q (uid %s)", role, strconv.Itoa(os.Getuid()))
}
