package fusefs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/posixtest"
)

// TestSnapshotsGrantNothingMore: with allow_other, another user reaches
// in .snapshots exactly what the tree granted it at create: a 0600 file
// of root's stays unreadable (even after the live file was made 0644), a
// 0644 one is readable with its old bytes, and writes fail (EROFS for
// root, which the mode would allow).
func TestSnapshotsGrantNothingMore(t *testing.T) {
	u := posixtest.TestUser(t)
	tm := newTestMountOpts(t, files.Writeback, Options{AllowOther: true})
	openUp(tm.dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d := filepath.Join(tm.dir, "d")
	must(os.Mkdir(d, 0o755))
	must(os.WriteFile(filepath.Join(d, "secret"), []byte("old secret"), 0o600))
	must(os.WriteFile(filepath.Join(d, "public"), []byte("old public"), 0o644))
	if _, err := tm.fs.CreateSnapshot("s", "d"); err != nil {
		t.Fatal(err)
	}
	defer tm.fs.DeleteSnapshot("s")
	must(os.WriteFile(filepath.Join(d, "secret"), []byte("new secret"), 0o600))
	must(os.Chmod(filepath.Join(d, "secret"), 0o644))
	must(os.WriteFile(filepath.Join(d, "public"), []byte("new public"), 0o644))

	snap := filepath.Join(tm.dir, files.SnapshotDir, "s")
	asUser := func(args ...string) ([]byte, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: []uint32{}}}
		return cmd.CombinedOutput()
	}
	if out, err := asUser("cat", filepath.Join(snap, "secret")); err == nil || !bytes.Contains(out, []byte("Permission denied")) {
		t.Errorf("another user read a 0600 file of the snapshot: %q %v", out, err)
	}
	if out, err := asUser("cat", filepath.Join(snap, "public")); err != nil || string(out) != "old public" {
		t.Errorf("another user reading a 0644 file of the snapshot: %q %v", out, err)
	}
	if out, err := asUser("cat", filepath.Join(d, "secret")); err != nil || string(out) != "new secret" {
		t.Errorf("the live file made 0644: %q %v", out, err)
	}
	if out, err := asUser("sh", "-c", "echo x > "+filepath.Join(snap, "public")); err == nil {
		t.Errorf("another user wrote into the snapshot: %q", out)
	}
	if got, err := os.ReadFile(filepath.Join(snap, "secret")); err != nil || string(got) != "old secret" {
		t.Errorf("root reading the snapshot: %q %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(snap, "secret"), []byte("x"), 0o600); !errors.Is(err, syscall.EROFS) {
		t.Errorf("root writing the snapshot: %v, want EROFS", err)
	}
}
