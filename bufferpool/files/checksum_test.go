package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// flipByte changes the byte at off of the file at path, keeping its size
// and putting its mtime back: a change behind the daemon's back that
// size and mtime do not show (what a failing disk or a bit flip does).
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := f.ReadAt(one, off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x5a
	if _, err := f.WriteAt(one, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path); st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("size/mtime changed: %v %v", st2.Size(), st2.ModTime())
	}
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// TestChecksumBackingFile: the write-back records each page's crc32c in
// the backing file's user.iowarp.crc32c (hidden from the doors); a byte
// of the backing file changed behind the daemon's back (size and mtime
// kept) is caught at stage-in: EIO, one log line naming file and page,
// counted; the other pages read. A legitimate change (mtime moves) is
// read, not refused. A second daemon on the same backing store checks
// against the xattr.
func TestChecksumBackingFile(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	logs := captureLog(t, fs)
	data := randomBytes(4*testPage+1000, 1)
	h := mustOpen(t, fs, "c", os.O_RDWR|os.O_CREATE)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	bp := filepath.Join(fs.backing, "c")
	if n, err := unix.Getxattr(bp, sumXattr, nil); err != nil || n < 28+12+5*4 {
		t.Fatalf("xattr %s on the backing file: %d bytes, %v", sumXattr, n, err)
	}
	if _, err := fs.Getxattr("c", sumXattr, make([]byte, 256)); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("getxattr through the door: %v", err)
	}
	lb := make([]byte, 1024)
	if n, _ := fs.Listxattr("c", lb); strings.Contains(string(lb[:n]), "iowarp") {
		t.Fatalf("listxattr shows %q", lb[:n])
	}
	if err := fs.Setxattr("c", sumXattr, []byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("setxattr through the door: %v", err)
	}
	if _, err := fs.Evict(context.Background(), []string{"c"}); err != nil {
		t.Fatal(err)
	}
	flipByte(t, bp, 2*testPage+77)
	buf := make([]byte, testPage)
	if _, err := h.ReadAt(buf, 2*testPage); !errors.Is(err, unix.EIO) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt page read: %v", err)
	}
	if _, err := h.ReadAt(buf, 2*testPage); !errors.Is(err, unix.EIO) {
		t.Fatalf("corrupt page read again: %v", err)
	}
	if n, err := h.ReadAt(buf, testPage); err != nil || n != testPage || string(buf) != string(data[testPage:2*testPage]) {
		t.Fatalf("good page: %d %v", n, err)
	}
	if n, err := h.ReadAt(buf, 4*testPage); err != nil || n != 1000 || string(buf[:n]) != string(data[4*testPage:]) {
		t.Fatalf("last, short page: %d %v", n, err)
	}
	if got := fs.Stats().BackingChecksumErrors; got != 2 {
		t.Fatalf("backing checksum errors %d, want 2", got)
	}
	if n := logs.count("checksum mismatch", "page 2 of c"); n != 1 {
		t.Fatalf("%d log lines about page 2, want 1:\n%s", n, logs)
	}
	// A second daemon (pool and FS) on the same backing store.
	dir := t.TempDir()
	pool2, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 16 * testPage}}, OrganizerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	fs2, err := New(pool2, Options{Backing: fs.backing, Mode: Writeback, PageSize: testPage, ScratchDir: filepath.Join(dir, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer fs2.Close()
	h2, _, err := fs2.Open("c", os.O_RDONLY, 0, Cred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h2.ReadAt(buf, 2*testPage); !errors.Is(err, unix.EIO) {
		t.Fatalf("second daemon, corrupt page: %v", err)
	}
	if _, err := h2.ReadAt(buf, 3*testPage); err != nil {
		t.Fatalf("second daemon, good page: %v", err)
	}
	h2.Release()
	// A legitimate change: another writer rewrites the page (mtime moves).
	h.Release()
	time.Sleep(10 * time.Millisecond)
	f, err := os.OpenFile(bp, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	newPage := randomBytes(testPage, 2)
	if _, err := f.WriteAt(newPage, 2*testPage); err != nil {
		t.Fatal(err)
	}
	f.Close()
	h = mustOpen(t, fs, "c", os.O_RDONLY)
	defer h.Release()
	if _, err := h.ReadAt(buf, 2*testPage); err != nil || string(buf) != string(newPage) {
		t.Fatalf("after a legitimate change: %v", err)
	}
	if got := fs.Stats().BackingChecksumErrors; got != 2 {
		t.Fatalf("backing checksum errors %d after a legitimate change", got)
	}
}

// TestChecksumRecordOnlyWholePages: a page written back in part gets no
// checksum (its other bytes are the backing file's, which the pool may
// not have read), in memory or in the xattr; a page written whole does.
func TestChecksumRecordOnlyWholePages(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	bp := filepath.Join(fs.backing, "p")
	if err := os.WriteFile(bp, randomBytes(2*testPage, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	h := mustOpen(t, fs, "p", os.O_RDWR)
	defer h.Release()
	if _, err := h.WriteAt(randomBytes(testPage, 4), 0); err != nil { // page 0 whole
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("small"), testPage+5); err != nil { // page 1 in part
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	f := h.f
	f.sums.mu.Lock()
	_, has0 := f.sums.rec.sums[0]
	_, has1 := f.sums.rec.sums[1]
	f.sums.mu.Unlock()
	if !has0 || has1 {
		t.Fatalf("record: page 0 %v (want true), page 1 %v (want false)", has0, has1)
	}
	rec, err := decodeSumRecord(mustXattr(t, bp))
	if err != nil || len(rec.sums) != 1 || rec.size != 2*testPage {
		t.Fatalf("xattr record %+v %v", rec, err)
	}
}

func mustXattr(t *testing.T, path string) []byte {
	t.Helper()
	b := make([]byte, 4096)
	n, err := unix.Getxattr(path, sumXattr, b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// TestChecksumTierRepaired: a clean page on the file tier whose bytes
// were changed there behind the pool's back is caught by the pool's
// checksum and repaired from the backing file: the read returns the
// right bytes, counted and logged once.
func TestChecksumTierRepaired(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, nil)
	logs := captureLog(t, fs)
	data := randomBytes(4*testPage, 5)
	h := mustOpen(t, fs, "r", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	fs.pool.Shed(0) // every RAM page down to the file tier
	fs.pool.Unshed()
	if st := fs.pool.Stats().Tiers[1]; st.Blobs != 4 || st.Checksummed != 4 {
		t.Fatalf("file tier: %+v", st)
	}
	segs, _ := filepath.Glob(filepath.Join(filepath.Dir(fs.backing), "nvme", "iowarp-*", "seg-*"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	one := make([]byte, 1)
	sf, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	sf.ReadAt(one, testPage+9)
	one[0] ^= 1
	sf.WriteAt(one, testPage+9)
	sf.Close()
	buf := make([]byte, 100)
	if _, err := h.ReadAt(buf, testPage); err != nil {
		t.Fatalf("read of the corrupt page: %v", err)
	}
	if string(buf) != string(data[testPage:testPage+100]) {
		t.Fatal("repaired page has the wrong bytes")
	}
	st := fs.Stats()
	if st.TierChecksumErrors != 1 || st.Repaired != 1 || st.Pool.Tiers[1].ChecksumErrors != 1 {
		t.Fatalf("counters: tier %d repaired %d pool %d", st.TierChecksumErrors, st.Repaired, st.Pool.Tiers[1].ChecksumErrors)
	}
	if n := logs.count("checksum mismatch", "page 1 of r", "repaired"); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, logs)
	}
}

// TestChecksumNoXattrs: on a backing store without user xattrs (ramfs)
// the write-back says so once in the log and keeps the record in memory:
// corruption behind the daemon's back is still caught while the file
// object lives.
func TestChecksumNoXattrs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a ramfs backing store needs root")
	}
	dir := t.TempDir()
	backing := filepath.Join(dir, "backing")
	if err := os.Mkdir(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("none", backing, "ramfs", 0, ""); err != nil {
		t.Skipf("mount ramfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(backing, 0) })
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 16 * testPage}}, OrganizerInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := New(pool, Options{Backing: backing, Mode: Writeback, PageSize: testPage, ScratchDir: filepath.Join(dir, "s")})
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	fs := &testFS{FS: fsys, pool: pool, backing: backing}
	t.Cleanup(func() { fsys.Close(); pool.Close() }) // before the unmount
	logs := captureLog(t, fs)
	data := randomBytes(2*testPage, 6)
	for _, name := range []string{"a", "b"} {
		h := mustOpen(t, fs, name, os.O_RDWR|os.O_CREATE)
		if _, err := h.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := h.Fsync(false); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	if n := logs.count("keeps no user xattrs"); n != 1 {
		t.Fatalf("%d log lines about xattrs, want 1:\n%s", n, logs)
	}
	if _, err := unix.Getxattr(filepath.Join(backing, "a"), sumXattr, nil); err == nil {
		t.Fatal("an xattr on ramfs")
	}
	h := mustOpen(t, fs, "a", os.O_RDONLY)
	defer h.Release()
	if _, err := fs.Evict(context.Background(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(backing, "a"), testPage+3)
	buf := make([]byte, testPage)
	if _, err := h.ReadAt(buf, testPage); !errors.Is(err, unix.EIO) {
		t.Fatalf("corrupt page on a store without xattrs: %v", err)
	}
	if _, err := h.ReadAt(buf, 0); err != nil {
		t.Fatalf("good page: %v", err)
	}
}

// TestChecksumWritethrough: writethrough writes record their pages in
// memory and the xattr is written at the fsync.
func TestChecksumWritethrough(t *testing.T) {
	fs := newTestFS(t, Writethrough, 16*testPage, 16*testPage, nil)
	h := mustOpen(t, fs, "w", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := randomBytes(2*testPage, 7)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	bp := filepath.Join(fs.backing, "w")
	if _, err := unix.Getxattr(bp, sumXattr, nil); !errors.Is(err, unix.ENODATA) {
		t.Fatalf("xattr before fsync: %v", err)
	}
	if err := h.Fsync(true); err != nil {
		t.Fatal(err)
	}
	rec, err := decodeSumRecord(mustXattr(t, bp))
	if err != nil || len(rec.sums) != 2 || rec.sums[1] != pageSum(data[testPage:], testPage) {
		t.Fatalf("record after fsync: %+v %v", rec, err)
	}
}

// TestChecksumRecordTooBig: a record the backing store's xattrs cannot
// hold (ext4: one block per inode) is not stored, counted, and the
// pages are still checked from memory.
func TestChecksumRecordTooBig(t *testing.T) {
	const ps = 4096
	fs := newTestFS(t, Writeback, 4096*ps, 4096*ps, func(o *Options) { o.PageSize = ps })
	h := mustOpen(t, fs, "big", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	data := randomBytes(2048*ps, 8) // 2048 sums: an 8 KiB record
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	bp := filepath.Join(fs.backing, "big")
	if _, err := unix.Getxattr(bp, sumXattr, nil); err == nil {
		t.Skip("this backing store holds an 8 KiB xattr")
	}
	if got := fs.Stats().ChecksumsNotStored; got != 1 {
		t.Fatalf("records not stored: %d", got)
	}
	if _, err := fs.Evict(context.Background(), []string{"big"}); err != nil {
		t.Fatal(err)
	}
	flipByte(t, bp, 1000*ps+5)
	buf := make([]byte, ps)
	if _, err := h.ReadAt(buf, 1000*ps); !errors.Is(err, unix.EIO) {
		t.Fatalf("corrupt page, record in memory: %v", err)
	}
}

// FuzzDecodeSumRecord: the xattr is read from files anyone with write
// access to the backing store may have changed: a bad one is an error
// with no record, a good one encodes back to the same record.
func FuzzDecodeSumRecord(f *testing.F) {
	r := sumRecord{size: 5 * testPage, mtime: 123456789, ps: testPage, sums: map[int64]uint32{0: 1, 1: 2, 4: 3}}
	f.Add(r.encode())
	f.Add([]byte(sumMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSumRecord(b)
		if err != nil {
			if rec.sums != nil || rec.ps != 0 {
				t.Fatalf("error %v with a partial record %+v", err, rec)
			}
			return
		}
		again, err := decodeSumRecord(rec.encode())
		if err != nil || again.size != rec.size || again.mtime != rec.mtime || len(again.sums) != len(rec.sums) {
			t.Fatalf("round trip: %+v %v, want %+v", again, err, rec)
		}
		for i, c := range rec.sums {
			if again.sums[i] != c {
				t.Fatalf("page %d: %x, want %x", i, again.sums[i], c)
			}
		}
	})
}

// TestChecksumTierDirtyEIO: a dirty page (its write-back failing, so the
// pool holds the only copy) whose bytes on the file tier were changed is
// EIO, logged once however often it is read.
func TestChecksumTierDirtyEIO(t *testing.T) {
	// One drain attempt at Close: the corrupt page can never be written back.
	fs := newTestFS(t, Writeback, 16*testPage, 16*testPage, func(o *Options) { o.DrainTimeout = -1 })
	store := newFaultStore()
	fs.store = store
	store.set("write", unix.EROFS)
	logs := captureLog(t, fs)
	h := mustOpen(t, fs, "d", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	if _, err := h.WriteAt(randomBytes(2*testPage, 9), 0); err != nil {
		t.Fatal(err)
	}
	fs.pool.Shed(0)
	fs.pool.Unshed()
	if st := fs.pool.Stats().Tiers[1]; st.Blobs != 2 || st.Checksummed != 2 || st.Dirty == 0 {
		t.Fatalf("file tier: %+v", st)
	}
	segs, _ := filepath.Glob(filepath.Join(filepath.Dir(fs.backing), "nvme", "iowarp-*", "seg-*"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	flipByte(t, segs[0], 5)
	buf := make([]byte, 10)
	for range 3 {
		if _, err := h.ReadAt(buf, 0); !errors.Is(err, unix.EIO) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read of the corrupt dirty page: %v", err)
		}
	}
	if _, err := h.ReadAt(buf, testPage); err != nil {
		t.Fatalf("the other page: %v", err)
	}
	if n := logs.count("checksum mismatch", "page 0 of d", "dirty"); n != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", n, logs)
	}
	if st := fs.Stats(); st.Repaired != 0 || st.TierChecksumErrors != 3 {
		t.Fatalf("repaired %d, tier errors %d", st.Repaired, st.TierChecksumErrors)
	}
}

// TestChecksumModel: random writes (whole pages, parts of pages, past
// the end), truncations, fsyncs and evictions of one file, compared
// with a byte slice after each step: the checksums recorded at
// write-back never refuse the file's own bytes, and they are checked.
func TestChecksumModel(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checksumModel(t, seed) })
	}
}

func checksumModel(t *testing.T, seed int64) {
	fs := newTestFS(t, Writeback, 8*testPage, 8*testPage, nil)
	rng := rand.New(rand.NewSource(seed))
	h := mustOpen(t, fs, "m", os.O_RDWR|os.O_CREATE)
	defer h.Release()
	var model []byte
	for step := range 300 {
		switch op := rng.Intn(10); {
		case op < 5:
			off := rng.Int63n(6 * testPage)
			n := 1 + rng.Intn(2*testPage)
			if rng.Intn(2) == 0 { // whole pages
				off, n = off/testPage*testPage, testPage*(1+rng.Intn(2))
			}
			data := randomBytes(n, seed*1000+int64(step))
			if _, err := h.WriteAt(data, off); err != nil {
				t.Fatalf("step %d: write: %v", step, err)
			}
			if end := off + int64(n); end > int64(len(model)) {
				model = append(model, make([]byte, end-int64(len(model)))...)
			}
			copy(model[off:], data)
		case op < 6:
			size := rng.Int63n(6 * testPage)
			if _, err := fs.Setattr("m", h, SetAttr{Size: &size}); err != nil {
				t.Fatalf("step %d: truncate: %v", step, err)
			}
			if size < int64(len(model)) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-int64(len(model)))...)
			}
		case op < 8:
			if err := h.Fsync(false); err != nil {
				t.Fatalf("step %d: fsync: %v", step, err)
			}
			if _, err := fs.Evict(context.Background(), []string{"m"}); err != nil {
				t.Fatalf("step %d: evict: %v", step, err)
			}
		}
		got := make([]byte, len(model)+10)
		n, err := h.ReadAt(got, 0)
		if err != nil {
			t.Fatalf("step %d: read: %v", step, err)
		}
		if !bytes.Equal(got[:n], model) {
			t.Fatalf("step %d: %d bytes differ from the model's %d", step, n, len(model))
		}
	}
	st := fs.Stats()
	if st.ChecksumsVerified == 0 || st.BackingChecksumErrors != 0 {
		t.Fatalf("verified %d, errors %d", st.ChecksumsVerified, st.BackingChecksumErrors)
	}
	t.Logf("stage-ins checked: %d", st.ChecksumsVerified)
}
