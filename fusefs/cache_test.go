package fusefs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
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

// TestFsyncDir: fsync of a directory succeeds in every mode, also once it
// was removed (as on ext4 and tmpfs); the file layer fsyncs the backing
// directory and says so when there is none.
func TestFsyncDir(t *testing.T) {
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			tm := newTestMount(t, mode)
			d := filepath.Join(tm.dir, "d")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Sync(); err != nil {
				t.Fatalf("fsync of a directory: %v", err)
			}
			if err := os.Remove(d); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatalf("fsync of a removed directory: %v", err)
			}
			if err := tm.fs.Fsyncdir("d"); mode != files.Scratch && !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("Fsyncdir of a missing directory: %v", err)
			}
		})
	}
}
