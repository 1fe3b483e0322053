package fusefs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/posixtest"
)

// TestKillSuidOnWrite: a write or truncate by an unprivileged user clears S_ISUID
// (and S_ISGID with group execute), as on tmpfs. We negotiate
// CAP_HANDLE_KILLPRIV_V2, so this is our job, not the kernel's.
func TestKillSuidOnWrite(t *testing.T) {
	tm := newTestMountOpts(t, files.Writeback, Options{AllowOther: true})
	// nobody must reach the files: open up the test's directories.
	for _, d := range []string{tm.dir, filepath.Dir(tm.dir), filepath.Dir(filepath.Dir(tm.dir))} {
		os.Chmod(d, 0o755)
	}
	ref := posixtest.RefDir(t)
	os.Chmod(ref, 0o755)
	run := func(dir string) []string {
		var out []string
		for _, c := range []struct {
			mode os.FileMode
			sh   string // run as nobody, on file $F
		}{
			{0o777 | os.ModeSetuid | os.ModeSetgid, `printf y >> "$F"`},
			{0o767 | os.ModeSetuid | os.ModeSetgid, `printf y >> "$F"`},
			{0o777 | os.ModeSetuid | os.ModeSetgid, `: > "$F"`}, // O_TRUNC: setattr size
			{0o767 | os.ModeSetgid, `: > "$F"`},
		} {
			mode := c.mode
			f := filepath.Join(dir, "f")
			os.Remove(f)
			if err := os.WriteFile(f, []byte("x"), 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f, mode); err != nil {
				t.Fatal(err)
			}
			// The child runs /bin/sh (not on the mount) as nobody and
			// appends through the mount.
			cmd := exec.Command("/bin/sh", "-c", c.sh)
			cmd.Env = append(os.Environ(), "F="+f)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("append as nobody: %v %s", err, b)
			}
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c.sh+" "+st.Mode().String())
		}
		return out
	}
	want := run(ref)
	got := run(tm.dir)
	if strings.Join(want, " ") != strings.Join(got, " ") {
		t.Errorf("modes after unprivileged write: got %v, tmpfs %v", got, want)
	}
}

// syncBuffer is a goroutine-safe log sink.
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

// TestNoGetxattrPerWrite checks that CAP_HANDLE_KILLPRIV_V2 took effect:
// the kernel does not ask for security.capability before each write.
// Debug logging goes through logrus, which this test redirects.
func TestNoGetxattrPerWrite(t *testing.T) {
	var buf syncBuffer
	oldOut, oldLevel := logrus.StandardLogger().Out, logrus.GetLevel()
	logrus.SetOutput(&buf)
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() {
		logrus.SetOutput(oldOut)
		logrus.SetLevel(oldLevel)
	})
	tm := newTestMountOpts(t, files.Writeback, Options{Debug: true})
	f, err := os.Create(filepath.Join(tm.dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 20 {
		if _, err := f.Write([]byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	log := buf.String()
	if n := strings.Count(log, "WRITE"); n < 20 {
		t.Fatalf("debug log shows %d WRITEs, want >= 20 (is Debug wired?)", n)
	}
	// With KILLPRIV_V2 the kernel sets SB_NOSEC: it asks for
	// security.capability once per inode, finds none and marks the inode
	// S_NOSEC. Without it, it asks before every write (20 here).
	if n := strings.Count(log, "GETXATTR"); n > 1 {
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "GETXATTR") || strings.Contains(l, "INIT") {
				t.Log(l)
			}
		}
		t.Errorf("kernel sent %d GETXATTR for 20 writes; KILLPRIV_V2 not in effect", n)
	}
}
