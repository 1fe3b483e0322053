package fusefs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestFsyncdirReachesBacking: fsync(2) of a directory after a create and
// a rename fsyncs the backing directory (the daemon's counter moves), and
// the backing directory holds the new names when it returns.
func TestFsyncdirReachesBacking(t *testing.T) {
	for _, mode := range []files.Mode{files.Writeback, files.Writethrough} {
		t.Run(string(mode), func(t *testing.T) {
			tm := newTestMount(t, mode)
			d := filepath.Join(tm.dir, "d")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "a"), []byte("a"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(d, "a"), filepath.Join(d, "b")); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			before := tm.fs.Stats().DirSyncs
			if err := unix.Fsync(fd); err != nil {
				t.Fatalf("fsync dir: %v", err)
			}
			if got := tm.fs.Stats().DirSyncs; got != before+1 {
				t.Errorf("backing directory fsyncs: %d -> %d, want one", before, got)
			}
			if _, err := os.Lstat(filepath.Join(tm.backing, "d", "b")); err != nil {
				t.Errorf("backing dir lacks the renamed name after fsync: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(tm.backing, "d", "a")); !os.IsNotExist(err) {
				t.Errorf("backing dir still has the old name after fsync: %v", err)
			}
		})
	}
}
