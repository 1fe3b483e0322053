package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestCloseToOpen: the kernel keeps a file's page cache across opens,
// except when another node rewrote the file on the backing store: the next
// open (after the attribute timeout) must see the new bytes.
func TestCloseToOpen(t *testing.T) {
	tm := newTestMount(t, files.Writeback)
	p := filepath.Join(tm.dir, "shared")
	one := bytes.Repeat([]byte("1"), 64<<10)
	if err := os.WriteFile(p, one, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tm.fs.Sync(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read is served by the kept page cache
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, one) {
			t.Fatalf("read: %v", err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	two := bytes.Repeat([]byte("2"), 64<<10)
	if err := os.WriteFile(filepath.Join(tm.backing, "shared"), two, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the attribute timeout
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, two) {
		t.Fatalf("after another node's write the mount still reads %q... (err %v)", got[:4], err)
	}
}
