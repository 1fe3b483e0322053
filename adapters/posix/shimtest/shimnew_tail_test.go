package shimtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestExtendTailF: a writer under the shim extends a file in shared
// memory while stat and tail -f run outside the shim: stat sees each new
// size at once, and tail -f (polling fstat, as it does on FUSE) prints
// every byte, in order; the report says the fast path carried them all.
func TestExtendTailF(t *testing.T) {
	bin := cc(t, "extend", "gcc")
	onMount, _ := setup(t)
	p := filepath.Join(onMount, "tailf.bin")
	rep := filepath.Join(t.TempDir(), "report")
	steps := []int{5, 4096, 1<<20 + 3, 3<<20 + 7, 100, 2 << 20}
	// tail follows the (empty) file from byte 0 before the writer opens it
	// (O_TRUNC of an empty file: nothing for tail to notice). On FUSE no
	// inotify event comes for a write: tail polls fstat.
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tail := exec.Command("tail", "-c", "+1", "-f", "-s", "0.05", "---disable-inotify", p)
	tail.Stderr = os.Stderr
	tout, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<16)
		for {
			n, err := tout.Read(buf)
			mu.Lock()
			seen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		tail.Process.Kill()
		tail.Wait()
		<-done
	}()
	cmd, stdin, out := startLines(t, "env", "IOWARP_REPORT="+rep, bin, p)
	var want []byte
	for i, n := range steps {
		fmt.Fprintf(stdin, "%d\n", n)
		out.expect("ok")
		want = append(want, bytes.Repeat([]byte{byte('a' + i)}, n)...)
		if st, err := os.Stat(p); err != nil || st.Size() != int64(len(want)) {
			t.Fatalf("stat after extend %d: %v %v, want size %d", i, st, err, len(want))
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	// tail polls: wait (bounded) until it printed as much as was written.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := seen.Len()
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	mu.Lock()
	got := append([]byte(nil), seen.Bytes()...)
	mu.Unlock()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("tail -f printed %d bytes, want the %d written (first difference at %d)", len(got), len(want), i)
	}
	requireFastWrites(t, parseReport(t, rep), len(want))
}
