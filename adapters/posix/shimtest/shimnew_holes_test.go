package shimtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHolesBelowAnotherWriter: the ranks of one shared file, one after
// the other, the worst order of IOR's race: a first process writes the
// second half of a new file (past the size: new pages) and closes; a
// second opens it and writes the first half, holes below the size. Both
// are new data the shim places itself: every byte goes fast. The second
// grant used to publish the file's size (raised by the first writer) as
// the page table's new_from word, so no hole below it was a shim's any
// more and the whole second half took the kernel path. The file is right
// through the kernel path afterwards, and a third process that overwrites
// part of the first half in place (resident pages) goes fast too.
func TestHolesBelowAnotherWriter(t *testing.T) {
	onMount, _ := setup(t)
	const half = 8 << 20
	_, data := randFile(t, t.TempDir(), 2*half)
	lo, hi := filepath.Join(t.TempDir(), "lo"), filepath.Join(t.TempDir(), "hi")
	if err := os.WriteFile(lo, data[:half], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hi, data[half:], 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(onMount, "shared.bin")
	for _, c := range []struct {
		name, in, seek string
	}{
		{"past the size", hi, "8"},
		{"holes below it", lo, "0"},
	} {
		_, r := run(t, onMount, true, nil, "dd", "if="+c.in, "of="+f, "bs=1M", "seek="+c.seek, "conv=notrunc", "status=none")
		requireOurs(t, r)
		if r.FastWrite != half || r.KernelWrite != 0 {
			t.Fatalf("%s: want the %d new bytes written fast: %+v", c.name, half, r)
		}
	}
	requireSame(t, "through the kernel path", f, data)
	// A 1 MiB overwrite of resident pages in the middle of the first half.
	patch := bytes.Repeat([]byte{0x5a}, 1<<20)
	pf := filepath.Join(t.TempDir(), "patch")
	if err := os.WriteFile(pf, patch, 0o644); err != nil {
		t.Fatal(err)
	}
	_, r := run(t, onMount, true, nil, "dd", "if="+pf, "of="+f, "bs=1M", "seek=3", "conv=notrunc", "status=none")
	if r.FastWrite != 1<<20 || r.KernelWrite != 0 {
		t.Fatalf("overwrite: want it fast: %+v", r)
	}
	copy(data[3<<20:], patch)
	requireSame(t, "after the overwrite", f, data)
}
