package files

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTopDirty: files are listed by dirty bytes, most first, at most n,
// and a file that was written back is not listed. The backing store fails
// writes meanwhile, so the background write-back cannot clean them.
func TestTopDirty(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	store := newFaultStore()
	fs.store = store
	store.set("write", unix.EIO)
	for _, f := range []struct {
		name  string
		pages int
	}{{"a", 3}, {"b", 1}, {"dir/c", 2}} {
		if f.name == "dir/c" {
			if err := fs.Mkdir("dir", 0o755, Cred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}); err != nil {
				t.Fatal(err)
			}
		}
		h := mustOpen(t, fs, f.name, os.O_RDWR|os.O_CREATE)
		if _, err := h.WriteAt(make([]byte, f.pages*testPage-10), 0); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	got := fs.TopDirty(2)
	if len(got) != 2 || got[0].Path != "a" || got[0].DirtyBytes != 3*testPage-10 ||
		got[1].Path != "dir/c" || got[1].DirtyBytes != 2*testPage-10 || got[1].Size != 2*testPage-10 {
		t.Fatalf("TopDirty(2) = %+v", got)
	}
	if all := fs.TopDirty(10); len(all) != 3 || all[2].Path != "b" {
		t.Fatalf("TopDirty(10) = %+v", all)
	}
	store.set("write", nil)
	if err := fs.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := fs.TopDirty(10); len(got) != 0 {
		t.Fatalf("after sync: %+v", got)
	}
}

// TestLatencies: each write-back write and each stage-in read is timed.
func TestLatencies(t *testing.T) {
	fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
	h := mustOpen(t, fs, "f", os.O_RDWR|os.O_CREATE)
	if _, err := h.WriteAt(make([]byte, 3*testPage), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	h.Release()
	wb, si := fs.Latencies()
	if wb.Count < 1 || wb.Sum <= 0 || si.Count != 0 {
		t.Fatalf("after a write-back: write-back %+v, stage-in %+v", wb, si)
	}
	if err := os.WriteFile(filepath.Join(fs.backing, "cold"), make([]byte, 2*testPage), 0o644); err != nil {
		t.Fatal(err)
	}
	h = mustOpen(t, fs, "cold", os.O_RDONLY)
	defer h.Release()
	if _, err := h.ReadAt(make([]byte, 2*testPage), 0); err != nil {
		t.Fatal(err)
	}
	if _, si = fs.Latencies(); si.Count < 2 {
		t.Fatalf("after reading 2 cold pages: stage-in %+v", si)
	}
}
