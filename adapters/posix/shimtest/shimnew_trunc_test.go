package shimtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestTruncateWhileReading: a writer under the shim extends a file in
// shared memory and ftruncates it down and up on its attached fd (one
// FUSE SETATTR, which the daemon serves under the bucket's exclusive lock:
// it harvests the shim's pages, drops those past the new end, zeroes the
// last partial page's tail and lowers the shared size, all before any
// shim writes again), while another process reads the file in a loop.
// After each step stat, cat without the shim and cat under the shim (fast
// reads) see exactly the model: bytes past an old end read as zeros after
// an extending truncate; the reader never sees a byte that was never
// written (only letters and zeros).
func TestTruncateWhileReading(t *testing.T) {
	bin := cc(t, "truncw", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "t.bin")
	rep := filepath.Join(t.TempDir(), "report")
	cmd, stdin, out := startLines(t, "env", "IOWARP_REPORT="+rep, bin, p)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			for i, c := range b {
				if c != 0 && (c < 'a' || c > 'd') {
					bad.Store(fmt.Sprintf("byte %q at %d of %d", c, i, len(b)))
					return
				}
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	var model []byte
	letter := byte('a')
	steps := []struct {
		op byte
		n  int
	}{
		{'w', 3<<20 + 5}, {'t', 1<<20 + 100}, {'t', 5<<19 + 3}, {'w', 1 << 20},
		{'t', 0}, {'w', 10}, {'t', 4 << 20}, {'w', 7}, {'s', 0},
	}
	for _, s := range steps {
		switch s.op {
		case 'w':
			model = append(model, bytes.Repeat([]byte{letter}, s.n)...)
			letter++
		case 't':
			if s.n < len(model) {
				model = model[:s.n]
			} else {
				model = append(model, make([]byte, s.n-len(model))...)
			}
		}
		fmt.Fprintf(stdin, "%c %d\n", s.op, s.n)
		if l := out.line(); l != "ok" {
			t.Fatalf("%c %d: %s", s.op, s.n, l)
		}
		what := fmt.Sprintf("after %c %d", s.op, s.n)
		if st, err := os.Stat(p); err != nil || st.Size() != int64(len(model)) {
			t.Fatalf("%s: stat %v %v, want size %d", what, st, err, len(model))
		}
		requireSame(t, what+" (cat without the shim)", p, model)
		got, r := run(t, onMount, true, nil, "cat", p)
		if got != string(model) {
			t.Fatalf("%s: cat under the shim read %d bytes, want the model's %d", what, len(got), len(model))
		}
		if s.op == 'w' && s.n > 1<<20 && r.FastRead == 0 {
			t.Fatalf("%s: cat under the shim read nothing from shared memory: %+v", what, r)
		}
		if v := bad.Load(); v != nil {
			t.Fatalf("%s: the reader saw %s", what, v)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	r := parseReport(t, rep)
	requireOurs(t, r)
	if r.FastWrite < 3<<20+5 {
		t.Fatalf("the first extend did not go through shared memory: %+v", r)
	}
	t.Logf("writer: %d bytes fast, %d through the kernel", r.FastWrite, r.KernelWrite)
}
