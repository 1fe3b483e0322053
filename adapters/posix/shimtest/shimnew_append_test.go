package shimtest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCatAppendTwoDoors: a line appender (cat >> log, one write per
// line) under the shim and one without it append numbered lines to one
// file at once. The shim's
// appends take the fast path (a CAS on the shared size reserves each
// range), the other's go through FUSE, where the daemon reserves its
// range in the same shared size: every line is present once, whole, and
// in its writer's order, and the fast path carried the shim's appends.
func TestCatAppendTwoDoors(t *testing.T) {
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "log")
	if err := os.WriteFile(p, []byte("head\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	type res struct {
		r     Report
		bytes int
		err   error
	}
	start := func(tag string, shim bool) chan res {
		c := make(chan res, 1)
		rep := filepath.Join(t.TempDir(), "report")
		// cat >> log, with the open (O_APPEND) made by the program under
		// the shim itself (an fd a shell opened and passed through exec
		// is the kernel's in the new image) and one write(2) per line
		// (cat and tee write what one read of the pipe returned, which
		// may end inside a line).
		cmd := exec.Command("python3", "-c", `import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
for line in sys.stdin.buffer:
    os.write(fd, line)
os.close(fd)`, p)
		if shim {
			cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "IOWARP_REPORT="+rep)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			total := 0
			for i := 1; i <= n; i++ {
				line := fmt.Sprintf("%s %d %s\n", tag, i, strings.Repeat("x", i%97))
				io.WriteString(in, line)
				total += len(line)
			}
			in.Close()
			err := cmd.Wait()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, stderr.String())
			}
			var r Report
			if shim {
				r = parseReport(t, rep)
			}
			c <- res{r, total, err}
		}()
		return c
	}
	cs, ck := start("s", true), start("k", false)
	s, k := <-cs, <-ck
	if s.err != nil || k.err != nil {
		t.Fatalf("appenders: %v / %v", s.err, k.err)
	}
	requireOurs(t, s.r)
	if s.r.FastWrite == 0 || s.r.FastWrite+s.r.KernelWrite != int64(s.bytes) {
		t.Fatalf("the shim's %d bytes of appends: want the fast path to carry them: %+v", s.bytes, s.r)
	}
	t.Logf("shim appender: %d of %d bytes fast", s.r.FastWrite, s.bytes)
	data, err := os.ReadFile(p)
	if err != nil || len(data) != len("head\n")+s.bytes+k.bytes {
		t.Fatalf("log: %d bytes, want %d: %v", len(data), len("head\n")+s.bytes+k.bytes, err)
	}
	requireLines(t, data, n)
}

// requireLines checks a log of "tag i xxx" lines after a "head" line:
// each tag's lines 1..n once each, in order, each whole.
func requireLines(t *testing.T, data []byte, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != "head" {
		t.Fatalf("first line %q", lines[0])
	}
	next := map[string]int{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("torn line %q", l)
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i != next[f[0]]+1 || (i%97 != 0 && (len(f) != 3 || f[2] != strings.Repeat("x", i%97))) {
			t.Fatalf("line %q after line %d of %s: torn, lost or out of order", l, next[f[0]], f[0])
		}
		next[f[0]] = i
	}
	for tag, last := range next {
		if last != n {
			t.Fatalf("%s: %d lines, want %d", tag, last, n)
		}
	}
	if len(next) != 2 {
		t.Fatalf("writers seen: %v", next)
	}
}
