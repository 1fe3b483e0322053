package fusefs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// sh runs a shell command line (real programs on the mount).
func sh(t *testing.T, line string) {
	t.Helper()
	if out, err := exec.Command("/bin/sh", "-c", line).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// TestWritethroughHeadNotAmplified: `head -c 3000000 /dev/urandom >
// MOUNT/f` in writethrough mode writes the file to the backing store
// about once (it rewrote each 1 MiB page from its start on every write:
// 123x the file).
func TestWritethroughHeadNotAmplified(t *testing.T) {
	tm := newTestMount(t, files.Writethrough)
	const size = 3000000
	sh(t, "head -c 3000000 /dev/urandom > "+filepath.Join(tm.dir, "f"))
	written := tm.fs.Stats().FlushedBytes
	t.Logf("%d bytes written to the backing store for a %d-byte file (%.2fx)", written, size, float64(written)/size)
	if written > size*11/10 {
		t.Fatalf("%d bytes written to the backing store for a %d-byte file (%.1fx)", written, size, float64(written)/size)
	}
	got, err := os.ReadFile(filepath.Join(tm.backing, "f"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(tm.dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size || !bytes.Equal(got, want) {
		t.Fatalf("backing file: %d bytes, equal to the mount's %d: %v", len(got), len(want), bytes.Equal(got, want))
	}
}

// TestSparseWriteKeepsHolesFUSE: 3 bytes written at 5 MB of a new file
// (dd, then sync(1) of the file) allocate a block on the backing store,
// not the 788 KiB of the page before them, and the rest stays a hole.
func TestSparseWriteKeepsHolesFUSE(t *testing.T) {
	for _, mode := range []files.Mode{files.Writeback, files.Writethrough} {
		t.Run(string(mode), func(t *testing.T) {
			tm := newTestMount(t, mode)
			const off = 5000000
			f := filepath.Join(tm.dir, "s")
			sh(t, "printf abc | dd of="+f+" bs=3 seek=5000000 oflag=seek_bytes status=none && sync "+f)
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(tm.backing, "s"), &st); err != nil {
				t.Fatal(err)
			}
			t.Logf("backing file: size %d, st_blocks %d (%d KiB)", st.Size, st.Blocks, st.Blocks/2)
			if st.Size != off+3 || st.Blocks*512 > 8192 {
				t.Fatalf("backing file: size %d, %d KiB allocated; want %d and at most 8 KiB", st.Size, st.Blocks/2, off+3)
			}
			data, err := os.ReadFile(filepath.Join(tm.backing, "s"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data[off:], []byte("abc")) || bytes.ContainsFunc(data[:off], func(r rune) bool { return r != 0 }) {
				t.Fatal("backing file: not zeros then abc")
			}
		})
	}
}
