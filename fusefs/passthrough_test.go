package fusefs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestPassthrough: with Options.Passthrough a read-only open of a resident
// file is served by the kernel from the RAM tier's memfd, without READ
// requests reaching the file layer.
func TestPassthrough(t *testing.T) {
	tm := newTestMountOpts(t, files.Scratch, Options{Passthrough: true})
	p := filepath.Join(tm.dir, "f")
	data := bytes.Repeat([]byte("passthrough!"), 300000) // 3.6 MB: 4 pages
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _, err := tm.fs.Open("f", unix.O_RDONLY, 0, files.Cred{}); err == nil {
		_, ok := h.PassthroughFd()
		h.Release()
		if !ok {
			t.Skip("files.Handle.PassthroughFd offers no fd for a resident read-only file")
		}
	}
	before := tm.fs.Stats().BytesRead
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data)+10)
	n, _ := f.ReadAt(got, 0)
	if !bytes.Equal(got[:n], data) {
		t.Fatalf("passthrough read: %d bytes, content differs", n)
	}
	if after := tm.fs.Stats().BytesRead; after != before {
		t.Errorf("file layer served %d bytes: passthrough not in effect", after-before)
	}
	// While a passthrough open exists the kernel refuses cached opens of
	// the inode; this is the documented cost of the option.
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	t.Logf("open for write during passthrough read: %v", err)
	if err == nil {
		w.Close()
	}
	f.Close()
	w, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("open for write after passthrough closed: %v", err)
	}
	w.Write([]byte("more"))
	w.Close()
	b, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(b, append(data, "more"...)) {
		t.Errorf("read after append: %d bytes, %v", len(b), err)
	}
}
