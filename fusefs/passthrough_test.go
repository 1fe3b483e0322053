package fusefs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// passthroughMount is a scratch mount with Options.Passthrough; it skips
// where the kernel offers no FUSE passthrough.
func passthroughMount(t *testing.T, mode files.Mode) *testMount {
	t.Helper()
	tm := newTestMountOpts(t, mode, Options{Passthrough: true})
	if !tm.srv.passthrough() {
		t.Skip("the kernel did not take CAP_PASSTHROUGH")
	}
	return tm
}

// settle waits until every open of the mount was released (the kernel
// sends RELEASE after close returns) and ptSettle has passed: the next
// read-only open may then be passed through.
func settle(t *testing.T, tm *testMount) {
	t.Helper()
	for i := 0; tm.fs.Stats().OpenFiles != 0; i++ {
		if i == 500 {
			t.Fatal("opens not released after 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * ptSettle)
}

// TestPassthrough: with Options.Passthrough a read-only open of a resident
// file is served by the kernel from the RAM tier's memfd, without READ
// requests reaching the file layer; a second reader joins it; a writer is
// refused ETXTBSY while they are open (the kernel would send its writes
// through the memfd too), and opens once they are closed.
func TestPassthrough(t *testing.T) {
	tm := passthroughMount(t, files.Scratch)
	p := filepath.Join(tm.dir, "f")
	data := bytes.Repeat([]byte("passthrough!"), 300000) // 3.6 MB: 4 pages
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	settle(t, tm)
	before := tm.fs.Stats()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*os.File{f, g} {
		got := make([]byte, len(data)+10)
		n, _ := r.ReadAt(got, 0)
		if !bytes.Equal(got[:n], data) {
			t.Fatalf("passthrough read: %d bytes, content differs", n)
		}
	}
	after := tm.fs.Stats()
	if after.BytesRead != before.BytesRead {
		t.Errorf("file layer served %d bytes: passthrough not in effect", after.BytesRead-before.BytesRead)
	}
	if n := after.PassthroughOpens - before.PassthroughOpens; n != 2 {
		t.Errorf("%d opens passed through, want 2", n)
	}
	if w, err := os.OpenFile(p, os.O_WRONLY, 0); !errors.Is(err, syscall.ETXTBSY) {
		t.Errorf("open for write during passthrough reads: %v, want ETXTBSY", err)
		if err == nil {
			w.Close()
		}
	}
	f.Close()
	g.Close()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
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

// TestPassthroughTruncate: a truncate by path while a reader is passed
// through moves the EOF that reader sees (the segment follows the file's
// size): shorter, then longer with zeros.
func TestPassthroughTruncate(t *testing.T) {
	tm := passthroughMount(t, files.Scratch)
	p := filepath.Join(tm.dir, "f")
	data := bytes.Repeat([]byte{7}, 2<<20+5)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	settle(t, tm)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(p, 1000); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if n, err := f.ReadAt(buf, 0); n != 1000 || err != io.EOF || !bytes.Equal(buf[:n], data[:1000]) {
		t.Errorf("read after truncate to 1000: %d bytes, %v", n, err)
	}
	if err := os.Truncate(p, 3000); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(data[:1000]), make([]byte, 2000)...)
	if n, err := f.ReadAt(buf, 0); n != 3000 || err != io.EOF || !bytes.Equal(buf[:n], want) {
		t.Errorf("read after truncate up to 3000: %d bytes, %v", n, err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 3000 {
		t.Errorf("stat: %v, %v", st, err)
	}
}

// TestPassthroughNotResident: a file with pages outside the RAM tier (here
// never staged in from the backing store) is read through the daemon.
func TestPassthroughNotResident(t *testing.T) {
	tm := passthroughMount(t, files.Writeback)
	data := bytes.Repeat([]byte("cold"), 1<<19) // 2 MiB
	if err := os.WriteFile(filepath.Join(tm.backing, "cold"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := tm.fs.Stats()
	b, err := os.ReadFile(filepath.Join(tm.dir, "cold"))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("read: %d bytes, %v", len(b), err)
	}
	after := tm.fs.Stats()
	if after.PassthroughOpens != before.PassthroughOpens {
		t.Error("a file not resident in the RAM tier was passed through")
	}
	if after.BytesRead == before.BytesRead {
		t.Error("the daemon served no byte of a cold read")
	}
}

// TestPassthroughCloseThenWrite: a reader closed just before a writer
// opens does not refuse the writer, though the kernel sends its RELEASE
// after close(2) returned (the writer waits for it), and a reader that
// opens right after a writer closed is not failed EIO by the kernel (it
// is not passed through so soon, ptSettle). Every other round leaves the
// reader time to be passed through.
func TestPassthroughCloseThenWrite(t *testing.T) {
	tm := passthroughMount(t, files.Scratch)
	p := filepath.Join(tm.dir, "f")
	if err := os.WriteFile(p, []byte("v0"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tm.fs.Stats().PassthroughOpens
	for i := range 40 {
		if i%2 == 0 {
			settle(t, tm)
		}
		want := []byte("v" + string(rune('0'+i%10)))
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("round %d: read %q, %v; want %q", i, b, err, want)
		}
		next := []byte("v" + string(rune('0'+(i+1)%10)))
		if err := os.WriteFile(p, next, 0o644); err != nil {
			t.Fatalf("round %d: write right after the reader closed: %v", i, err)
		}
	}
	if tm.fs.Stats().PassthroughOpens == before {
		t.Error("no read was passed through")
	}
}
