package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestSnapshotMount: a tree written through a real mount is snapshotted
// with the CLI, then overwritten, appended to, truncated, chmodded and
// unlinked; .snapshots/NAME/ reads the old bytes, modes, owners, times
// and links, refuses every kind of write with EROFS and is not listed in
// the root; list shows the copied bytes, export writes the same tree
// outside the mount, and delete gives the tiers back exactly those bytes
// (iowarp stat).
func TestSnapshotMount(t *testing.T) {
	base := t.TempDir()
	ctl := filepath.Join(base, "ctl")
	mnt := mountDaemon(t, base, "m", ctl)
	cli := func(args ...string) string { return runCLI(t, nil, append(args, "--control-dir", ctl)...) }

	rng := rand.New(rand.NewSource(1))
	tree := filepath.Join(mnt, "run")
	a := make([]byte, 5<<20+123)
	rng.Read(a)
	b := []byte("small file\n")
	mustDo(t, os.MkdirAll(filepath.Join(tree, "sub"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(tree, "a.dat"), a, 0o640))
	mustDo(t, os.WriteFile(filepath.Join(tree, "sub", "b.txt"), b, 0o600))
	mustDo(t, os.WriteFile(filepath.Join(tree, "gone"), b, 0o644))
	mustDo(t, os.Symlink("a.dat", filepath.Join(tree, "link")))
	mustDo(t, os.Chmod(filepath.Join(tree, "sub"), 0o750))
	mustDo(t, os.Chown(filepath.Join(tree, "sub", "b.txt"), 1234, 5678))
	// Half of it written back and evicted: the snapshot shares those
	// pages with the backing file, the rest with resident pages.
	cli("stage-out", "--drop", filepath.Join(tree, "sub"))
	// A page dirtied through a shared mmap and not msynced: the kernel
	// holds it, create's syncfs hands it to the daemon first.
	mf, err := os.OpenFile(filepath.Join(tree, "mapped"), os.O_RDWR|os.O_CREATE, 0o644)
	mustDo(t, err)
	mustDo(t, mf.Truncate(4096))
	m, err := syscall.Mmap(int(mf.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	mustDo(t, err)
	copy(m, "through the map")

	orig := map[string]os.FileInfo{}
	for _, p := range []string{"", "a.dat", "sub", "sub/b.txt", "gone", "link", "mapped"} {
		fi, err := os.Lstat(filepath.Join(tree, p))
		mustDo(t, err)
		orig[p] = fi
	}

	out := cli("snapshot", "create", "s1", tree)
	wantIn(t, "snapshot create", out, "snapshot s1 of "+tree+": 4 files, 2 directories")
	copy(m, "changed after it")
	mustDo(t, syscall.Munmap(m))
	mustDo(t, mf.Close())
	if got, err := os.ReadFile(filepath.Join(tree, "mapped")); err != nil || !bytes.HasPrefix(got, []byte("changed after it")) {
		t.Errorf("live mapped file: %q %v", got[:min(len(got), 16)], err)
	}

	// Change everything.
	f, err := os.OpenFile(filepath.Join(tree, "a.dat"), os.O_RDWR, 0)
	mustDo(t, err)
	_, err = f.WriteAt(bytes.Repeat([]byte{0xee}, 1<<20), 1<<20)
	mustDo(t, err)
	_, err = f.WriteAt([]byte("appended"), int64(len(a)))
	mustDo(t, err)
	mustDo(t, f.Close())
	mustDo(t, os.Truncate(filepath.Join(tree, "sub", "b.txt"), 0))
	mustDo(t, os.Chmod(filepath.Join(tree, "a.dat"), 0o600))
	mustDo(t, os.Remove(filepath.Join(tree, "gone")))
	mustDo(t, os.WriteFile(filepath.Join(tree, "new"), b, 0o644))

	snap := filepath.Join(mnt, files.SnapshotDir, "s1")
	mapped := append([]byte("through the map"), make([]byte, 4096-15)...)
	for p, want := range map[string][]byte{"a.dat": a, "sub/b.txt": b, "gone": b, "mapped": mapped} {
		got, err := os.ReadFile(filepath.Join(snap, p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the snapshot: %d bytes, %v (want the %d old bytes)", p, len(got), err, len(want))
		}
	}
	if got, _ := os.ReadFile(filepath.Join(tree, "a.dat")); len(got) != len(a)+8 || got[1<<20] != 0xee {
		t.Errorf("the live a.dat lost the writes (%d bytes)", len(got))
	}
	for p, want := range orig {
		got, err := os.Lstat(filepath.Join(snap, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		ws, gs := want.Sys().(*syscall.Stat_t), got.Sys().(*syscall.Stat_t)
		// (mapped: its mtime is the flush's, at create)
		if got.Mode() != want.Mode() || gs.Uid != ws.Uid || gs.Gid != ws.Gid || (p != "mapped" && !got.ModTime().Equal(want.ModTime())) ||
			(!want.IsDir() && got.Size() != want.Size()) {
			t.Errorf("%s in the snapshot: %v %d:%d %v size %d, originally %v %d:%d %v size %d", p, got.Mode(), gs.Uid, gs.Gid,
				got.ModTime(), got.Size(), want.Mode(), ws.Uid, ws.Gid, want.ModTime(), want.Size())
		}
	}
	if l, err := os.Readlink(filepath.Join(snap, "link")); err != nil || l != "a.dat" {
		t.Errorf("link in the snapshot: %q %v", l, err)
	}
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		mustDo(t, err)
		var n []string
		for _, e := range ents {
			n = append(n, e.Name())
		}
		return n
	}
	if n := names(mnt); slices.Contains(n, files.SnapshotDir) {
		t.Errorf("the root lists %s: %v", files.SnapshotDir, n)
	}
	if n := names(filepath.Join(mnt, files.SnapshotDir)); !slices.Equal(n, []string{"s1"}) {
		t.Errorf(".snapshots lists %v", n)
	}
	if n := names(snap); !slices.Equal(n, []string{"a.dat", "gone", "link", "mapped", "sub"}) {
		t.Errorf("the snapshot lists %v", n)
	}

	// Read-only, whatever the mode allows.
	erofs := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in the snapshot: %v, want EROFS", what, err)
		}
	}
	_, err = os.OpenFile(filepath.Join(snap, "a.dat"), os.O_WRONLY, 0)
	erofs("open for writing", err)
	erofs("truncate", os.Truncate(filepath.Join(snap, "a.dat"), 0))
	erofs("create", os.WriteFile(filepath.Join(snap, "x"), b, 0o644))
	erofs("mkdir", os.Mkdir(filepath.Join(snap, "d"), 0o755))
	erofs("unlink", os.Remove(filepath.Join(snap, "a.dat")))
	erofs("rename", os.Rename(filepath.Join(snap, "a.dat"), filepath.Join(snap, "c")))
	erofs("chmod", os.Chmod(filepath.Join(snap, "a.dat"), 0o777))
	erofs("symlink", os.Symlink("a", filepath.Join(snap, "l2")))

	var list []files.SnapshotInfo
	mustDo(t, json.Unmarshal([]byte(cli("snapshot", "list", "--json")), &list))
	if len(list) != 1 || list[0].Name != "s1" || list[0].Files != 4 || list[0].CopiedBytes == 0 {
		t.Fatalf("snapshot list: %+v", list)
	}
	wantIn(t, "snapshot list", cli("snapshot", "list"), "NAME PATH CREATED FILES SIZE IN POOL", "s1 "+tree)

	dst := filepath.Join(base, "export")
	wantIn(t, "snapshot export", cli("snapshot", "export", "s1", dst), "exported snapshot s1 to "+dst+": 4 files")
	for p, want := range orig {
		got, err := os.Lstat(filepath.Join(dst, p))
		if err != nil || got.Mode() != want.Mode() || (want.Mode().IsRegular() && got.Size() != want.Size()) {
			t.Errorf("exported %s: %v %v, want %v", p, got, err, want.Mode())
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "a.dat")); !bytes.Equal(got, a) {
		t.Error("exported a.dat differs from the old bytes")
	}
	if _, errs, code := cliResult(t, "snapshot", "export", "s1", filepath.Join(mnt, "inside"), "--control-dir", ctl); code == 0 ||
		!strings.Contains(errs, "inside the mount") {
		t.Errorf("export into the mount: exit %d %s", code, errs)
	}
	if _, errs, code := cliResult(t, "snapshot", "create", "s1", tree, "--control-dir", ctl); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("create twice: exit %d %s", code, errs)
	}

	// Delete: the tiers get exactly the copies back.
	mustDo(t, json.Unmarshal([]byte(cli("snapshot", "list", "--json")), &list))
	held := list[0].CopiedBytes + list[0].UnlinkedBytes
	if list[0].UnlinkedBytes == 0 {
		t.Errorf("the unlinked file kept by the snapshot is not counted: %+v", list[0])
	}
	before := stableUsed(t, cli)
	wantIn(t, "snapshot delete", cli("snapshot", "delete", "s1"), "deleted snapshot s1")
	after := stableUsed(t, cli)
	if before-after != held {
		t.Errorf("delete gave back %d bytes, the snapshot held %d (used %d -> %d)", before-after, held, before, after)
	}
	if _, err := os.Stat(snap); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted snapshot: %v", err)
	}
	wantIn(t, "snapshot list", cli("snapshot", "list"), "no snapshots")
}

// stableUsed is the tiers' used bytes (iowarp stat --json) once two
// readings 100ms apart agree (a read-ahead may still be staging pages in).
func stableUsed(t *testing.T, cli func(args ...string) string) int64 {
	t.Helper()
	used := func() int64 {
		var st files.Stats
		mustDo(t, json.Unmarshal([]byte(cli("stat", "--json")), &st))
		var n int64
		for _, ts := range st.Pool.Tiers {
			n += ts.Used
		}
		return n
	}
	last := used()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := used()
		if now == last {
			return now
		}
		last = now
	}
	t.Fatal("the tiers' use did not settle in 10s")
	return 0
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
