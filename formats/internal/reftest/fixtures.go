package reftest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// Python is the interpreter the reference readers run under (Debian's,
// with the python3-* packages `make deps` installs).
const Python = "/usr/bin/python3"

// Fixtures makes a driver test's reference files once per test binary:
// it runs testdata/make.py with Python into a temporary directory, after
// Probe (Python statements importing the reference modules) succeeds;
// a test is skipped, naming Missing, when it does not. Safe for
// concurrent use. Call Remove from TestMain after the tests.
type Fixtures struct {
	Name    string // the temporary directory's prefix
	Probe   string // e.g. "import astropy.io.fits, numpy"
	Missing string // what to install when Probe fails, e.g. "python3-astropy"

	once sync.Once
	dir  string
	err  error
}

// Dir returns the directory of the fixtures, making them on first use.
func (f *Fixtures) Dir(t *testing.T) string {
	t.Helper()
	if exec.Command(Python, "-c", f.Probe).Run() != nil {
		t.Skipf("%s missing (make deps)", f.Missing)
	}
	f.once.Do(func() {
		if f.dir, f.err = os.MkdirTemp("", f.Name+"-fixtures"); f.err != nil {
			return
		}
		if out, err := exec.Command(Python, "testdata/make.py", f.dir).CombinedOutput(); err != nil {
			f.err = fmt.Errorf("make.py: %v\n%s", err, out)
		}
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.dir
}

// Remove deletes the fixtures, if they were made.
func (f *Fixtures) Remove() {
	if f.dir != "" {
		os.RemoveAll(f.dir)
	}
}

// Reference runs script (the reference reader, with Python) over the
// mutants that opened and gave data. The script writes what it reads of
// variable P of mutant M to RefPath(M, P, ext); what it cannot read it
// leaves out.
func Reference(t *testing.T, script string, ms []Mutant) {
	t.Helper()
	var paths []string
	for _, m := range ms {
		if m.Err == nil && len(m.Data) > 0 {
			paths = append(paths, m.Path)
		}
	}
	if len(paths) == 0 {
		return
	}
	if out, err := exec.Command(Python, append([]string{script}, paths...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// RefPath is where a reference script writes variable path (as the
// driver names it, "/a/b") of the mutant: MUTANT.a~b.EXT.
func RefPath(m Mutant, path, ext string) string {
	return m.Path + "." + strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "~") + ext
}
