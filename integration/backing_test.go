package integration

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/testenv"
)

// TestBackingStoreFull: the real daemon over a backing store (ext4 on a
// loop device) that fills up. fsync through the mount gets ENOSPC, every
// time; the data stay readable; `iowarp stat` names the file, the cause
// and the bytes stuck; freeing space lets a later fsync succeed with the
// data on the store. Filled again, a SIGTERM gives up after drain_timeout
// and exits 1 naming the file left dirty, instead of claiming success.
func TestBackingStoreFull(t *testing.T) {
	requireMount(t)
	backing := filepath.Join(testenv.LoopExt4(t, 32<<20), "backing")
	m := startMount(t, config{ram: "64MiB", file: "none", backing: backing, extra: "drain_timeout: 1s\n"})
	f, err := os.Create(m.path("ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	filler := testenv.Fill(t, backing, "filler")
	data := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write into the pool while the store is full: %v", err)
	}
	for range 2 {
		if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("fsync through the mount on a full store: %v", err)
		}
	}
	if out, code := run("sync", m.path("ckpt")); code == 0 || !strings.Contains(out, "No space left") {
		t.Fatalf("sync(1) of the file on a full store: exit %d: %s", code, out)
	}
	if got, err := os.ReadFile(m.path("ckpt")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reading the file back while the store is full: %v", err)
	}
	st := m.stats()
	if st.FailingCount != 1 || len(st.FailingFiles) != 1 || st.FailingFiles[0].Path != "ckpt" ||
		st.FailingFiles[0].Errno != "ENOSPC" || st.StuckDirtyBytes != int64(len(data)) {
		t.Fatalf("iowarp stat --json while the store is full: %d failing %+v, %d bytes stuck",
			st.FailingCount, st.FailingFiles, st.StuckDirtyBytes)
	}
	out, code := run(m.bin, "stat", m.dir, "--control-dir", m.ctl)
	if code != 0 || !strings.Contains(out, "write-back FAILING for 1 files, 4MiB stuck") || !strings.Contains(out, "ckpt  ENOSPC") {
		t.Fatalf("iowarp stat while the store is full: exit %d\n%s", code, out)
	}

	os.Remove(filler)
	run("sync", "-f", backing)
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync once the store has room again: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(backing, "ckpt")); !bytes.Equal(got, data) {
		t.Fatalf("backing file (%d bytes) differs from the %d bytes written", len(got), len(data))
	}
	if st := m.stats(); st.FailingCount != 0 {
		t.Fatalf("still %d files failing after the store recovered: %+v", st.FailingCount, st.FailingFiles)
	}
	log := m.log()
	if a, b := strings.Count(log, "write-back of ckpt failing (ENOSPC)"), strings.Count(log, "write-back of ckpt works again"); a != 1 || b != 1 {
		t.Fatalf("daemon log: %d failing and %d recovery lines for ckpt, want 1 and 1:\n%s", a, b, log)
	}

	// Full again, and the daemon is stopped: it must not exit 0.
	f.Close() // a file left open keeps the mount busy
	late, err := os.Create(m.path("late"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Fill(t, backing, "filler2")
	late.Write(data[:1<<20])
	late.Close()
	start := time.Now()
	err = m.stop()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("SIGTERM with data the store refuses: exit %v, want status 1:\n%s", err, m.log())
	}
	log = m.log()
	if !strings.Contains(log, "left dirty: late") || !strings.Contains(log, "not written back") || !strings.Contains(log, "late (ENOSPC)") {
		t.Fatalf("daemon log does not name the file left dirty:\n%s", log)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the daemon took %v to give up with drain_timeout 1s", took)
	}
}
