package posixtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Transcript is what a case observed, one line per step.
type Transcript []string

// Case runs in dir (empty, owned by the case) and returns its transcript.
type Case func(t *testing.T, dir string) Transcript

// rec builds a transcript.
type rec struct {
	t   *testing.T
	dir string
	out Transcript
}

func newRec(t *testing.T, dir string) *rec { return &rec{t: t, dir: dir} }

// p is the path of name inside the case's directory.
func (r *rec) p(name string) string { return filepath.Join(r.dir, name) }

func (r *rec) logf(format string, args ...any) {
	r.out = append(r.out, fmt.Sprintf(format, args...))
}

// do records op and its outcome, and reports success.
func (r *rec) do(op string, err error) bool {
	r.out = append(r.out, op+": "+errName(err))
	return err == nil
}

// must records op and stops the case if it failed: later steps depend on
// it. The transcript so far is still compared by the caller.
func (r *rec) must(op string, err error) {
	if !r.do(op, err) {
		r.t.Errorf("%s: %v", op, err)
		panic(stopCase{out: r.out})
	}
}

// stopCase unwinds a case whose prerequisite failed, with its transcript.
type stopCase struct{ out Transcript }

// errName renders an outcome portably: "ok" or the errno's name.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	return "error " + err.Error()
}

// Run runs c in dir and returns its transcript; a case stopped by a failed
// prerequisite ends its transcript with "stopped".
func Run(t *testing.T, dir string, c Case) (tr Transcript) {
	defer func() {
		if v := recover(); v != nil {
			sc, ok := v.(stopCase)
			if !ok {
				panic(v)
			}
			tr = append(sc.out, "stopped")
		}
	}()
	return c(t, dir)
}

// RefDir returns a fresh directory on tmpfs (/dev/shm) for reference runs,
// removed at the end of the test; it falls back to t.TempDir when /dev/shm
// is not tmpfs.
func RefDir(t *testing.T) string {
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC {
		d, err := os.MkdirTemp("/dev/shm", "posixtest-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// Compare runs c in refDir (the reference, tmpfs) and in dir (the file
// system under test), each in a fresh subdirectory, and fails t if the
// transcripts differ.
func Compare(t *testing.T, refDir, dir string, c Case) {
	t.Helper()
	want := Run(t, subdir(t, refDir), c)
	got := Run(t, subdir(t, dir), c)
	if d := Diff(want, got); d != "" {
		t.Errorf("transcript differs from reference (-ref +got):\n%s", d)
	}
}

func subdir(t *testing.T, parent string) string {
	d, err := os.MkdirTemp(parent, "case-")
	if err != nil {
		t.Fatalf("mkdir in %s: %v", parent, err)
	}
	return d
}

// Diff returns a line diff of two transcripts ("" if equal).
func Diff(want, got Transcript) string {
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return ""
	}
	var b strings.Builder
	n := max(len(want), len(got))
	for i := 0; i < n; i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w == g {
			fmt.Fprintf(&b, "  %s\n", w)
			continue
		}
		if i < len(want) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
		if i < len(got) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	return b.String()
}
