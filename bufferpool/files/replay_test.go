package files

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

const replayEnv = "IOWARP_FILES_CRASH_DIR"

// replayPool is a pool whose RAM tier is smaller than a page, so every
// page lands on the journaled file tier.
func replayPool(t *testing.T, dir string) *bufferpool.Pool {
	t.Helper()
	pool, err := bufferpool.New(bufferpool.Config{
		Tiers: []bufferpool.TierConfig{
			{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4096},
			{Name: "nvme", Kind: bufferpool.KindFile, Dir: filepath.Join(dir, "nvme"), Capacity: 64 * testPage},
		},
		OrganizerInterval: -1, JournalInterval: -1, Journal: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

func replayPattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i*13+i>>16)
	}
	return b
}

// TestReplayChild is the daemon killed in TestReplayAfterKill: its
// write-back is throttled to 1 byte/s, so nothing reaches the backing
// store before it dies.
func TestReplayChild(t *testing.T) {
	dir := os.Getenv(replayEnv)
	if dir == "" {
		t.Skip("run by TestReplayAfterKill")
	}
	pool := replayPool(t, dir)
	fs, err := New(pool, Options{Backing: filepath.Join(dir, "backing"), PageSize: testPage, BackingBandwidth: 1})
	if err != nil {
		t.Fatal(err)
	}
	tfs := &testFS{FS: fs, pool: pool}
	if err := fs.Mkdir("sub", 0o755, Cred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}); err != nil {
		t.Fatal(err)
	}
	write := func(p string, data []byte) *Handle {
		h := mustOpen(t, tfs, p, os.O_RDWR|os.O_CREATE)
		if _, err := h.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("sub/f", replayPattern(10*testPage+1000, 1))
	g := write("g", replayPattern(3*testPage, 2))
	size := int64(100)
	if _, err := fs.Setattr("g", g, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	write("h", replayPattern(2*testPage, 3))
	if err := fs.Rename("h", "h2", 0); err != nil {
		t.Fatal(err)
	}
	if err := pool.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// TestReplayAfterKill: dirty pages on the file tier at kill -9 are on the
// backing store, with the right sizes, once a new FS on the same tier
// directory started; the dead daemon's tier files are gone.
func TestReplayAfterKill(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "backing"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReplayChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), replayEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v\n%s", err, out)
	}
	backing := filepath.Join(dir, "backing")
	if got, _ := os.ReadFile(filepath.Join(backing, "sub/f")); bytes.Equal(got, replayPattern(10*testPage+1000, 1)) {
		t.Fatal("sub/f was written back before the kill: the test proves nothing")
	}
	// Evict the dentries: files opened by handle are then disconnected
	// (their fd's path is "/"), as after memory pressure on a node.
	if os.Geteuid() == 0 {
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Logf("drop dentries: %v", err)
		}
	}
	pool := replayPool(t, dir)
	defer pool.Close()
	fs, err := New(pool, Options{Backing: backing, PageSize: testPage})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	rep := fs.Stats().Replay
	if rep == nil || rep.Files != 3 || rep.Skipped != 0 || rep.Failed != 0 {
		t.Fatalf("replay report %+v", rep)
	}
	for _, c := range []struct {
		name string
		want []byte
	}{
		{"sub/f", replayPattern(10*testPage+1000, 1)},
		{"g", replayPattern(3*testPage, 2)[:100]},
		{"h2", replayPattern(2*testPage, 3)},
	} {
		got, err := os.ReadFile(filepath.Join(backing, c.name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes on the backing store, want %d (equal prefix: %v)", c.name, len(got), len(c.want),
				bytes.HasPrefix(c.want, got[:min(len(got), len(c.want))]))
		}
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "nvme", "iowarp-*"))
	if len(ents) != 1 {
		t.Fatalf("tier directory holds %v, want only the live instance", ents)
	}
}

func TestJournalTagRoundTrip(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "a b|c"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	tag := journalTag(int(f.Fd()), &st)
	ti, err := parseTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if ti.key != keyOf(&st) || ti.path != f.Name() {
		t.Fatalf("tag %q parsed as %+v", tag, ti)
	}
	for _, bad := range []string{"", "dev=1", "dev=x ino=1 handle=- path=/a", "dev=1 ino=2 handle=zz path=/a", "dev=1 ino=2 btime=0 handle=- /a", "dev=1 ino=2 handle=- path=/a"} {
		if _, err := parseTag([]byte(bad)); err == nil || !strings.Contains(err.Error(), "bad journal tag") {
			t.Errorf("parseTag(%q) = %v", bad, err)
		}
	}
}

// TestOpenTaggedByPath: without a file handle the tag's path is opened,
// and only if it still names the same inode.
func TestOpenTaggedByPath(t *testing.T) {
	tfs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
	p := filepath.Join(tfs.backing, "x")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	pf, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	ti := tagInfo{key: keyOf(&st), path: p, btime: birthTime(int(pf.Fd()))}
	pf.Close()
	if ti.btime == 0 {
		t.Skip("no birth times on this file system: a reused inode number cannot be told apart")
	}
	f, err := tfs.openTagged(ti)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Another inode under the same name: not ours.
	os.Remove(p)
	os.WriteFile(p+".tmp", []byte("y"), 0o644)
	os.Rename(p+".tmp", p)
	if _, err := tfs.openTagged(ti); !errors.Is(err, bufferpool.ErrNotFound) {
		t.Fatalf("a different inode at the path: %v", err)
	}
	os.Remove(p)
	if _, err := tfs.openTagged(ti); !errors.Is(err, bufferpool.ErrNotFound) {
		t.Fatalf("a missing path: %v", err)
	}
}

// TestReplayStaysInNamespace: a journal record naming a file outside the
// backing directory is refused, whatever its tag says.
func TestReplayStaysInNamespace(t *testing.T) {
	tfs := newTestFS(t, Writeback, 4*testPage, 4*testPage, nil)
	outside := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(outside, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(outside)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Fstat(int(f.Fd()), &st)
	tag := journalTag(int(f.Fd()), &st)
	f.Close()
	_, err = tfs.openReplay(&bufferpool.ReplayFile{Tag: tag, PageSize: testPage, Size: 4})
	if !errors.Is(err, bufferpool.ErrNotFound) || !strings.Contains(err.Error(), "outside the backing directory") {
		t.Fatalf("replay outside the namespace: %v", err)
	}
}
