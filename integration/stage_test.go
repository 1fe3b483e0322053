package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// cli runs `iowarp ARGS... --control-dir CTL` and returns its stdout,
// failing the test on an error.
func (m *mount) cli(args ...string) string {
	m.t.Helper()
	out, err := m.tryCLI(nil, args...)
	if err != nil {
		m.t.Fatalf("iowarp %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// tryCLI is cli with more environment, returning the error; stderr is
// appended to the output on failure.
func (m *mount) tryCLI(env []string, args ...string) (string, error) {
	cmd := exec.Command(m.bin, append(args, "--control-dir", m.ctl)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

func tierUse(st files.Stats) (used, capacity int64) {
	for _, ts := range st.Pool.Tiers {
		used += ts.Used
		capacity += ts.Capacity
	}
	return used, capacity
}

// TestStage: stage-in of a tree makes the reads of real programs hits;
// stage-out leaves nothing dirty and the backing files equal; evict frees
// the tier use; stage-in stops at the pool's capacity and evicts nothing.
func TestStage(t *testing.T) {
	m := startMount(t, config{ram: "64MiB", file: "none"})
	sums := map[string]string{}
	for _, f := range []struct {
		name string
		size int64
	}{{"in/x", 8 << 20}, {"in/d/y", 3<<20 + 123}, {"in/d/e/z", 1 << 20}, {"other", 1 << 20}} {
		p := filepath.Join(m.backing, f.name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		sums[f.name] = writeRandomFile(t, p, f.size, uint64(f.size))
	}
	out := m.cli("stage-in", m.path("in"))
	if !strings.Contains(out, "staged in 3 files: 12MiB of 12MiB") {
		t.Errorf("stage-in said %q", out)
	}
	before := m.stats()
	if used, _ := tierUse(before); used != 13<<20 {
		t.Errorf("tier use %d after staging in 13 pages", used)
	}
	for _, name := range []string{"in/x", "in/d/y", "in/d/e/z"} {
		if got := strings.Fields(sh(t, m.dir, "sha256sum "+name))[0]; got != sums[name] {
			t.Errorf("%s read through the mount: sha256 %s, want %s", name, got, sums[name])
		}
	}
	after := m.stats()
	if after.ReadMisses != before.ReadMisses || after.ReadHits < before.ReadHits+13 {
		t.Errorf("reads of the staged tree: %d hits and %d misses, before %d and %d: want 13 more hits and no miss",
			after.ReadHits, after.ReadMisses, before.ReadHits, before.ReadMisses)
	}

	// stage-out of a checkpoint written through the mount.
	os.Mkdir(m.path("out"), 0o755)
	ckpt := writeRandomFile(t, m.path("out/ckpt"), 16<<20, 7)
	out = m.cli("stage-out", m.path("out"))
	if !strings.Contains(out, "written back") {
		t.Errorf("stage-out said %q", out)
	}
	if st := m.stats(); st.DirtyBytes != 0 {
		t.Errorf("%d bytes dirty after stage-out", st.DirtyBytes)
	}
	if got := sha256File(t, filepath.Join(m.backing, "out/ckpt")); got != ckpt {
		t.Errorf("backing out/ckpt after stage-out: sha256 %s, want %s", got, ckpt)
	}

	// evict frees what the staged tree used; drain --drop the rest.
	used0, _ := tierUse(m.stats())
	out = m.cli("evict", m.path("in"))
	if !strings.Contains(out, "evicted 13MiB of 3 files") {
		t.Errorf("evict said %q", out)
	}
	if used1, _ := tierUse(m.stats()); used1 != used0-13<<20 {
		t.Errorf("tier use %d after evicting 13 pages of %d", used1, used0)
	}
	m.cli("drain", "--mount", m.dir, "--drop")
	if used, _ := tierUse(m.stats()); used != 0 {
		t.Errorf("tier use %d after drain --drop", used)
	}

	// A stage-in bigger than the pool stops at its capacity.
	writeRandomFile(t, filepath.Join(m.backing, "huge"), 96<<20, 9)
	out = m.cli("stage-in", m.path("huge"), m.path("in"))
	if !strings.Contains(out, "stopped: no tier has room") {
		t.Errorf("stage-in of more than the pool said %q", out)
	}
	if used, capacity := tierUse(m.stats()); used > capacity || used < capacity/2 {
		t.Errorf("tier use %d of %d after a stage-in bigger than the pool", used, capacity)
	}
	if _, err := m.tryCLI(nil, "stage-in", "/"); err == nil {
		t.Errorf("stage-in of a path outside the mount succeeded")
	}
}

// openPty returns the two ends of a new pseudo-terminal.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		t.Fatalf("pty number: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open pty slave: %v", err)
	}
	return master, slave
}

// syncBuffer is a bytes.Buffer safe for one writer and other readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	drainLine = regexp.MustCompile(`drain: \S+ of \S+ \(\d+%\), \S+/s, \S+ left, ETA \S+`)
	drainedIn = regexp.MustCompile(`drained in (\S+) \(`)
	stopLine  = regexp.MustCompile(`drain \(pid \d+\): \S+ of \S+ \(\d+%\)`)
	barLine   = regexp.MustCompile(`\rdrain +\d+% \|`)
)

// drainBurst writes more than the slow backing store takes in a second,
// so that the drain after it lasts seconds.
func drainBurst(t *testing.T, m *mount) {
	t.Helper()
	for i := range 3 {
		writeRandomFile(t, m.path(fmt.Sprintf("burst.%d", i)), 8<<20, uint64(i))
	}
	if st := m.stats(); st.DirtyBytes < 8<<20 {
		t.Fatalf("only %d bytes dirty after the burst: is the backing store slow?", st.DirtyBytes)
	}
}

// reportedDrain is the duration of the log's "drained in D" line.
func reportedDrain(t *testing.T, log string) time.Duration {
	t.Helper()
	mm := drainedIn.FindStringSubmatch(log)
	if mm == nil {
		t.Fatalf("no 'drained in' line:\n%s", log)
	}
	d, err := time.ParseDuration(mm[1])
	if err != nil {
		t.Fatalf("drained in %q: %v", mm[1], err)
	}
	return d
}

// TestDrainProgress: the drain after a stop shows its progress with a
// slow backing store (a FUSE file system whose writes take 6 MiB/s), as
// plain lines in a log (and at `runtime stop`) and as a bar on a
// terminal; the final line's duration counts from the signal.
func TestDrainProgress(t *testing.T) {
	t.Setenv("IOWARP_PROGRESS_INTERVAL", "300ms")
	t.Run("lines", func(t *testing.T) {
		m := startMount(t, config{ram: "64MiB", backing: mountSlowFS(t, 6<<20)})
		drainBurst(t, m)
		start := time.Now()
		out, err := m.tryCLI(nil, "runtime", "stop", m.dir)
		if err != nil {
			t.Fatalf("runtime stop: %v\n%s", err, out)
		}
		<-m.exited
		wall := time.Since(start)
		log := m.log()
		if n := len(drainLine.FindAllString(log, -1)); n < 2 {
			t.Errorf("%d progress lines in the daemon's log during a %v drain:\n%s", n, wall, log)
		}
		if d := reportedDrain(t, log); wall > 2*time.Second && d < wall/2 {
			t.Errorf("the log says drained in %v; the stop took %v", d, wall)
		}
	})
	t.Run("stop", func(t *testing.T) {
		m := startMount(t, config{ram: "64MiB", backing: mountSlowFS(t, 6<<20)})
		drainBurst(t, m)
		cmd := exec.Command(m.bin, "runtime", "stop", m.dir, "--control-dir", m.ctl)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("runtime stop: %v\n%s", err, stderr.String())
		}
		if n := len(stopLine.FindAllString(stderr.String(), -1)); n < 2 {
			t.Errorf("%d progress lines from runtime stop:\n%s", n, stderr.String())
		}
	})
	t.Run("tty", func(t *testing.T) {
		master, slave := openPty(t)
		defer master.Close()
		var screen syncBuffer
		copied := make(chan struct{})
		go func() { io.Copy(&screen, master); close(copied) }()
		m := startMount(t, config{ram: "64MiB", backing: mountSlowFS(t, 6<<20), output: slave})
		slave.Close() // the daemon holds it
		drainBurst(t, m)
		start := time.Now()
		if err := m.stop(); err != nil {
			t.Fatalf("stop: %v\n%s", err, screen.String())
		}
		wall := time.Since(start)
		select {
		case <-copied:
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal stayed open after the daemon exited")
		}
		out := screen.String()
		if n := len(barLine.FindAllString(out, -1)); n < 2 {
			t.Errorf("%d bar updates on the terminal during a %v drain:\n%q", n, wall, out)
		}
		if drainLine.MatchString(out) {
			t.Errorf("plain progress lines on a terminal:\n%q", out)
		}
		if d := reportedDrain(t, out); wall > 2*time.Second && d < wall/2 {
			t.Errorf("the terminal says drained in %v; the stop took %v", d, wall)
		}
	})
}
