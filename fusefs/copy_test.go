package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestCopyFileRange: copy_file_range on the mount is served from the pool,
// not by the kernel splicing through its page cache. The source's cached
// pages are made stale the way a shim makes them (the pool changes behind
// the kernel: here a write through the file layer), and the copy must
// carry the pool's bytes; a copy to a second file and one across the
// source's EOF (short) also hold the right bytes.
func TestCopyFileRange(t *testing.T) {
	tm := newTestMount(t, files.Writeback)
	const k = 64 << 10
	p := filepath.Join(tm.dir, "src")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{'A'}, 4*k), 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4*k)
	if _, err := f.ReadAt(got, 0); err != nil { // the kernel caches 'A'
		t.Fatal(err)
	}
	h, _, err := tm.fs.Open("src", unix.O_RDWR, 0, files.Cred{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(bytes.Repeat([]byte{'B'}, k), k); err != nil {
		t.Fatal(err)
	}
	h.Release()
	copyAt := func(dst *os.File, in, out int64, n int) int {
		t.Helper()
		r, err := unix.CopyFileRange(int(f.Fd()), &in, int(dst.Fd()), &out, n, 0)
		if err != nil {
			t.Fatalf("copy_file_range: %v", err)
		}
		return r
	}
	if r := copyAt(f, k, 3*k, k); r != k {
		t.Fatalf("copied %d, want %d", r, k)
	}
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append(append(bytes.Repeat([]byte{'A'}, k), bytes.Repeat([]byte{'B'}, k)...), bytes.Repeat([]byte{'A'}, k)...)
	want = append(want, bytes.Repeat([]byte{'B'}, k)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("after the copy: %q..., %d 'B' (want %d)", got[3*k:3*k+8], bytes.Count(got, []byte{'B'}), 2*k)
	}
	g, err := os.OpenFile(filepath.Join(tm.dir, "dst"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if r := copyAt(g, 3*k+k/2, 100, k); r != k/2 {
		t.Fatalf("copy across EOF: %d, want %d", r, k/2)
	}
	b, err := os.ReadFile(g.Name())
	if wantG := append(make([]byte, 100), bytes.Repeat([]byte{'B'}, k/2)...); err != nil || !bytes.Equal(b, wantG) {
		t.Fatalf("second file: %d bytes %v", len(b), err)
	}
}
