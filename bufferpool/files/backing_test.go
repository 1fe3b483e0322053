package files

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/testenv"
)

// faultStore is a backing store that fails on demand: the sick parallel
// file system (EIO, EROFS, ENOSPC at write or only at fsync time, as NFS
// and Lustre report them) without device-mapper.
type faultStore struct {
	osStore
	mu    sync.Mutex
	fail  map[string]error // "write", "truncate", "sync" → error to return
	calls map[string]int   // failed calls per op
}

func newFaultStore() *faultStore {
	return &faultStore{fail: map[string]error{}, calls: map[string]int{}}
}

func (s *faultStore) set(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.fail, op)
	} else {
		s.fail[op] = err
	}
}

func (s *faultStore) check(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.fail[op]
	if err != nil {
		s.calls[op]++
	}
	return err
}

func (s *faultStore) failed(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func (s *faultStore) WriteAt(f *os.File, p []byte, off int64) (int, error) {
	if err := s.check("write"); err != nil {
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return s.osStore.WriteAt(f, p, off)
}

func (s *faultStore) Truncate(f *os.File, size int64) error {
	if err := s.check("truncate"); err != nil {
		return err
	}
	return s.osStore.Truncate(f, size)
}

func (s *faultStore) Sync(f *os.File, datasync bool) error {
	if err := s.check("sync"); err != nil {
		return err
	}
	return s.osStore.Sync(f, datasync)
}

// logLines collects this FS's log lines (its "backing" field).
type logLines struct {
	root string
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Levels() []logrus.Level { return logrus.AllLevels }

func (l *logLines) Fire(e *logrus.Entry) error {
	if e.Data["backing"] == l.root {
		l.mu.Lock()
		l.msgs = append(l.msgs, e.Message)
		l.mu.Unlock()
	}
	return nil
}

// count is the number of lines containing every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, m := range l.msgs {
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

func captureLog(t *testing.T, fs *testFS) *logLines {
	l := &logLines{root: fs.rootPath}
	std := logrus.StandardLogger()
	old := std.ReplaceHooks(make(logrus.LevelHooks))
	for lv, hs := range old {
		for _, h := range hs {
			std.Hooks[lv] = append(std.Hooks[lv], h)
		}
	}
	std.AddHook(l)
	t.Cleanup(func() { std.ReplaceHooks(old) })
	return l
}

// waitFor polls cond (the flusher's retries happen in the background) and
// fails the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func failing(fs *testFS, name string) (FailingFile, bool) {
	for _, ff := range fs.Stats().FailingFiles {
		if ff.Path == name {
			return ff, true
		}
	}
	return FailingFile{}, false
}

// TestWriteBackFailure: whatever the sick store says (EIO, EROFS, ENOSPC,
// at write or at fsync time), the pages stay dirty and readable, fsync
// returns that errno every time while it lasts, the flusher retries with
// a back-off (not a hot loop, however much is written meanwhile), stat
// shows the file, the log has one line for the failure and one for the
// recovery, and once the store recovers fsync succeeds with the data on it.
func TestWriteBackFailure(t *testing.T) {
	cases := []struct {
		name, op string
		errno    syscall.Errno
	}{
		{"EIO at write", "write", unix.EIO},
		{"EROFS at write", "write", unix.EROFS},
		{"ENOSPC at write", "write", unix.ENOSPC},
		{"EIO at fsync", "sync", unix.EIO},       // Linux page cache: the kernel dropped the pages
		{"ENOSPC at fsync", "sync", unix.ENOSPC}, // NFS: reported at fsync/close
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
			store := newFaultStore()
			fs.store = store
			log := captureLog(t, fs)
			h := mustOpen(t, fs, "sick", os.O_RDWR|os.O_CREATE)
			defer h.Release()
			data := make([]byte, 4*testPage+100)
			rand.Read(data)
			store.set(tc.op, tc.errno)
			if _, err := h.WriteAt(data, 0); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := h.Fsync(false); !errors.Is(err, tc.errno) {
					t.Fatalf("fsync while the store fails with %v: %v", tc.errno, err)
				}
			}
			if err := fs.Sync(); !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), "sick") {
				t.Fatalf("syncfs while the store fails with %v: %v", tc.errno, err)
			}
			// Writes keep coming while it fails: they queue the file, but
			// the back-off decides when it is tried again.
			for i := range 50 {
				if _, err := h.WriteAt(data[:100], 0); err != nil {
					t.Fatal(err)
				}
				if i%10 == 0 {
					h.Flush()
				}
				time.Sleep(5 * time.Millisecond)
			}
			waitFor(t, "retries", func() bool { ff, _ := failing(fs, "sick"); return ff.Attempts >= 4 })
			if got := readAll(t, h); !bytes.Equal(got, data) {
				t.Fatal("data read back while the store fails differ from the data written")
			}
			ff, ok := failing(fs, "sick")
			st := fs.Stats()
			if !ok || ff.Errno != unix.ErrnoName(tc.errno) || st.FailingCount != 1 {
				t.Fatalf("stat while failing: %+v", st.FailingFiles)
			}
			if ff.DirtyBytes != int64(len(data)) || st.StuckDirtyBytes != ff.DirtyBytes {
				t.Fatalf("stat: %d bytes stuck dirty (total %d), want %d", ff.DirtyBytes, st.StuckDirtyBytes, len(data))
			}
			// 100 ms doubling: ~1 s of failing is a handful of attempts.
			if n := store.failed(tc.op); n > 12 {
				t.Errorf("%d failed %s calls in a second and a half of back-off: a hot loop", n, tc.op)
			}
			store.set(tc.op, nil)
			if err := h.Fsync(false); err != nil {
				t.Fatalf("fsync after the store recovered: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(fs.backing, "sick")); !bytes.Equal(got, data) {
				t.Fatalf("backing file (%d bytes) differs from the %d bytes written", len(got), len(data))
			}
			if st := fs.Stats(); st.FailingCount != 0 || st.DirtyBytes != 0 {
				t.Fatalf("after recovery: %d files failing, %d bytes dirty", st.FailingCount, st.DirtyBytes)
			}
			failed, recovered := log.count("sick failing", unix.ErrnoName(tc.errno)), log.count("sick works again")
			if failed != 1 || recovered != 1 {
				t.Fatalf("log: %d failing lines and %d recovery lines (want 1 and 1) for %d failed attempts:\n%s",
					failed, recovered, ff.Attempts, log)
			}
		})
	}
}

// TestWriteBackCauseChanges: a new cause within one failing streak is one
// more line; the same cause coming back within a minute (in the same
// streak or the next) is none, and neither is the recovery of a streak
// that logged nothing.
func TestWriteBackCauseChanges(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	store := newFaultStore()
	fs.store = store
	log := captureLog(t, fs)
	h := mustOpen(t, fs, "flaky", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	for _, errno := range []syscall.Errno{unix.ENOSPC, unix.ENOSPC, unix.EIO, unix.ENOSPC} {
		store.set("write", errno)
		h.WriteAt([]byte("x"), 0)
		if err := h.Fsync(true); !errors.Is(err, errno) {
			t.Fatalf("fdatasync: %v, want %v", err, errno)
		}
	}
	store.set("write", nil)
	if err := h.Fsync(true); err != nil {
		t.Fatal(err)
	}
	// The store flaps: the same cause again, logged a minute ago.
	store.set("write", unix.ENOSPC)
	h.WriteAt([]byte("y"), 0)
	h.Fsync(true)
	store.set("write", nil)
	if err := h.Fsync(true); err != nil {
		t.Fatal(err)
	}
	if a, b, c := log.count("flaky failing", "ENOSPC"), log.count("flaky failing", "EIO"), log.count("flaky works again"); a != 1 || b != 1 || c != 1 {
		t.Fatalf("log: %d ENOSPC lines (want 1), %d EIO (want 1), %d recovered (want 1):\n%s", a, b, c, log)
	}
}

// TestFullPoolOfUndrainableData: a pool full of dirty data the store does
// not take: writes wait NoSpaceWait, then ENOSPC; nothing dirty is
// evicted; once the store recovers everything lands.
func TestFullPoolOfUndrainableData(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, func(o *Options) { o.NoSpaceWait = 300 * time.Millisecond })
	store := newFaultStore()
	fs.store = store
	store.set("write", unix.EIO)
	h := mustOpen(t, fs, "big", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := make([]byte, 16*testPage)
	rand.Read(data)
	n, err := h.WriteAt(data, 0)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write of 16 pages into an 8-page pool the store does not drain: %d bytes, %v", n, err)
	}
	if n != 8*testPage {
		t.Fatalf("wrote %d bytes before ENOSPC, want the pool's %d", n, 8*testPage)
	}
	for _, ts := range fs.pool.Stats().Tiers {
		if ts.Evicted != 0 {
			t.Fatalf("tier %s evicted %d blobs, all of them dirty", ts.Name, ts.Evicted)
		}
	}
	if got := readAll(t, h); !bytes.Equal(got, data[:n]) {
		t.Fatal("data read back differ")
	}
	store.set("write", nil)
	// The flusher retries within its back-off (up to 5 s, longer than
	// this NoSpaceWait); an fsync retries at once.
	if err := h.Fsync(true); err != nil {
		t.Fatalf("fdatasync after the store recovered: %v", err)
	}
	if _, err := h.WriteAt(data[n:], int64(n)); err != nil {
		t.Fatalf("write after the store recovered: %v", err)
	}
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(fs.backing, "big")); !bytes.Equal(got, data) {
		t.Fatal("backing file differs")
	}
}

// TestCloseWhileStoreFails: Close (the daemon's unmount) retries for
// DrainTimeout, then fails naming the files left dirty and the cause; a
// store that recovers within it is drained.
func TestCloseWhileStoreFails(t *testing.T) {
	for _, recovers := range []bool{false, true} {
		name := map[bool]string{false: "fails", true: "recovers"}[recovers]
		t.Run(name, func(t *testing.T) {
			fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.DrainTimeout = time.Second })
			store := newFaultStore()
			fs.store = store
			log := captureLog(t, fs)
			store.set("write", unix.EROFS)
			data := []byte("checkpoint step 42\n")
			for _, p := range []string{"a", "b"} {
				h := mustOpen(t, fs, p, os.O_RDWR|os.O_CREATE)
				h.WriteAt(data, 0)
				h.Release()
			}
			if recovers {
				time.AfterFunc(300*time.Millisecond, func() { store.set("write", nil) })
			}
			err := fs.Close()
			if recovers {
				if err != nil {
					t.Fatalf("Close with a store that recovered: %v", err)
				}
				for _, p := range []string{"a", "b"} {
					if got, _ := os.ReadFile(filepath.Join(fs.backing, p)); !bytes.Equal(got, data) {
						t.Fatalf("%s: %q on the backing store", p, got)
					}
				}
				return
			}
			if !errors.Is(err, unix.EROFS) || !strings.Contains(err.Error(), "a (EROFS), b (EROFS)") {
				t.Fatalf("Close with a failing store: %v", err)
			}
			if n := log.count("left dirty"); n != 2 {
				t.Fatalf("%d 'left dirty' lines, want 2:\n%s", n, log)
			}
		})
	}
}

// TestBackingStoreFullLoopDevice: the backing directory on a real ext4
// that fills up: fsync gets ENOSPC (every time), the data stay readable,
// and once space is freed fsync succeeds and the backing file matches.
func TestBackingStoreFullLoopDevice(t *testing.T) {
	backing := loopBacking(t)
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, func(o *Options) { o.Backing = backing })
	if fs.rootPath != backing {
		t.Fatalf("backing %s, want the loop fs %s", fs.rootPath, backing)
	}
	log := captureLog(t, fs)
	h := mustOpen(t, fs, "ckpt", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	filler := testenv.Fill(t, backing, "filler")
	data := make([]byte, 16*testPage)
	rand.Read(data)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := h.Fsync(false); !errors.Is(err, unix.ENOSPC) {
			t.Fatalf("fsync on a full backing fs: %v", err)
		}
	}
	waitFor(t, "a retry", func() bool { ff, _ := failing(fs, "ckpt"); return ff.Attempts >= 4 })
	if ff, _ := failing(fs, "ckpt"); ff.Errno != "ENOSPC" || ff.DirtyBytes != int64(len(data)) {
		t.Fatalf("stat: %+v", ff)
	}
	if got := readAll(t, h); !bytes.Equal(got, data) {
		t.Fatal("data read back from the pool differ")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	exec.Command("sync", "-f", backing).Run() // commit the freed blocks
	if err := h.Fsync(false); err != nil {
		t.Fatalf("fsync after space was freed: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(backing, "ckpt")); !bytes.Equal(got, data) {
		t.Fatalf("backing file (%d bytes) differs from the %d written", len(got), len(data))
	}
	if a, b := log.count("ckpt failing", "ENOSPC"), log.count("ckpt works again"); a != 1 || b != 1 {
		t.Fatalf("log: %d failing and %d recovered lines, want 1 and 1:\n%s", a, b, log)
	}
}

// TestBackingStoreHangs: a backing store that stops answering (ext4 on a
// loop device frozen with fsfreeze, as a hung NFS server or a stalled
// OST): writes fill the pool, then wait NoSpaceWait and fail with ENOSPC;
// no dirty page is evicted; Stats answers and shows the write-back
// running; thawed, everything lands.
func TestBackingStoreHangs(t *testing.T) {
	backing := loopBacking(t)
	if _, err := exec.LookPath("fsfreeze"); err != nil {
		t.Skip("no fsfreeze")
	}
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, func(o *Options) {
		o.Backing = backing
		o.NoSpaceWait = 300 * time.Millisecond
	})
	h := mustOpen(t, fs, "slow", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	mnt := filepath.Dir(backing)
	if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
		t.Skipf("fsfreeze -f: %v: %s", err, out)
	}
	frozen := true
	thaw := func() {
		if frozen {
			frozen = false
			if out, err := exec.Command("fsfreeze", "-u", mnt).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze -u: %v: %s", err, out)
			}
		}
	}
	t.Cleanup(thaw) // before fs.Close, registered earlier, drains
	data := make([]byte, 16*testPage)
	rand.Read(data)
	n, err := h.WriteAt(data, 0)
	if !errors.Is(err, ErrNoSpace) || n != 8*testPage {
		t.Fatalf("16 pages into an 8-page pool over a hung store: %d bytes, %v", n, err)
	}
	stats := make(chan Stats, 1)
	go func() { stats <- fs.Stats() }()
	var st Stats
	select {
	case st = <-stats:
	case <-time.After(10 * time.Second):
		t.Fatal("Stats hangs with the backing store")
	}
	if st.LongestWriteBack == nil || st.LongestWriteBack.Path != "slow" || st.DirtyBytes != int64(n) {
		t.Fatalf("stats over a hung store: write-back in flight %+v, %d dirty bytes (want %d) %+v", st.LongestWriteBack, st.DirtyBytes, n, st)
	}
	if got := readAll(t, h); !bytes.Equal(got, data[:n]) {
		t.Fatal("data read back from the pool differ")
	}
	thaw()
	if _, err := h.WriteAt(data[n:], int64(n)); err != nil {
		t.Fatalf("write after the store came back: %v", err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(backing, "slow")); !bytes.Equal(got, data) {
		t.Fatal("backing file differs")
	}
	if st := fs.Stats(); st.LongestWriteBack != nil || st.FailingCount != 0 {
		t.Fatalf("after the thaw: in flight %+v, %d failing", st.LongestWriteBack, st.FailingCount)
	}
}

// TestWriteLargerThanPool: one write larger than the pool's free space
// succeeds over a healthy store: while it waits for room, the pages it
// already dirtied are written back (they were not queued until the whole
// write returned, so it waited NoSpaceWait and failed).
func TestWriteLargerThanPool(t *testing.T) {
	fs := newTestFS(t, Writeback, 4*testPage, 4*testPage, func(o *Options) { o.NoSpaceWait = 2 * time.Second })
	h := mustOpen(t, fs, "big", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := make([]byte, 32*testPage)
	rand.Read(data)
	if n, err := h.WriteAt(data, 0); err != nil {
		t.Fatalf("one 32-page write into an 8-page pool: %d bytes, %v", n, err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(fs.backing, "big")); !bytes.Equal(got, data) {
		t.Fatal("backing file differs")
	}
}

func TestCauseOf(t *testing.T) {
	inner := errors.New("bufferpool: bucket gone")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("write back page 3: %w", &os.PathError{Op: "write", Path: "backing", Err: unix.ENOSPC}), "ENOSPC"},
		{fmt.Errorf("fsync backing file: %w", unix.EIO), "EIO"},
		{fmt.Errorf("write back page 7: %w", inner), inner.Error()},
		{inner, inner.Error()},
	} {
		if got := causeOf(tc.err); got != tc.want {
			t.Errorf("causeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// loopBacking is a backing directory on a fresh 32 MiB ext4 (a loop
// device), so that it can really fill up.
func loopBacking(t *testing.T) string {
	t.Helper()
	backing := filepath.Join(testenv.LoopExt4(t, 32<<20), "backing")
	if err := os.Mkdir(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	return backing
}
