package bufferpool

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const ps = 16 << 10

func TestPageOps(t *testing.T) {
	p := testPool(t, 1<<20, 1<<20)
	b := mustBucket(t, p, "f", ps)
	page := fill(ps, 3)
	buf := make([]byte, 100)

	found, err := b.ReadPage(0, 0, buf, nil)
	if found || err != nil {
		t.Fatalf("read absent = %v, %v", found, err)
	}
	// Fill on miss.
	calls := 0
	filler := func(p []byte) error {
		calls++
		if len(p) != ps || slices.ContainsFunc(p, func(c byte) bool { return c != 0 }) {
			t.Errorf("filler got %d bytes, not zeroed", len(p))
		}
		copy(p, page)
		return nil
	}
	found, err = b.ReadPage(0, 100, buf, filler)
	if found || err != nil || calls != 1 {
		t.Fatalf("read fill = %v, %v (calls %d)", found, err, calls)
	}
	wantBytes(t, buf, page[100:200])
	found, err = b.ReadPage(0, 200, buf, filler)
	if !found || err != nil || calls != 1 {
		t.Fatalf("read hit = %v, %v (calls %d)", found, err, calls)
	}
	wantBytes(t, buf, page[200:300])
	if s := p.Stats(); s.Hits != 1 || s.Misses != 1 || s.DirtyBytes != 0 {
		t.Errorf("stats %+v", s)
	}
	// Full-page fill straight into the caller's buffer.
	full := fill(ps, 9)
	if _, err := b.ReadPage(7, 0, full, filler); err != nil {
		t.Fatal(err)
	}
	wantBytes(t, full, page)

	// Filler errors insert nothing.
	boom := errors.New("boom")
	_, err = b.ReadPage(1, 0, buf, func([]byte) error { return boom })
	wantErr(t, err, boom)
	if b.HasPage(1) {
		t.Fatal("failed fill inserted a page")
	}

	// Writes: versions, dirty, MarkClean.
	v1, err := b.WritePage(0, 10, []byte("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := make([]byte, ps)
	v, dirty, found, err := b.SnapshotPage(0, snap)
	if err != nil || !found || !dirty || v != v1 {
		t.Fatalf("snapshot = %d %v %v %v", v, dirty, found, err)
	}
	want := slices.Clone(page)
	copy(want[10:], "hello")
	wantBytes(t, snap, want)
	v2, _ := b.WritePage(0, 0, []byte("x"), nil)
	if v2 <= v1 {
		t.Fatalf("version %d after %d", v2, v1)
	}
	if b.MarkClean(0, v1) {
		t.Fatal("MarkClean with a stale version cleared the page")
	}
	if !slices.Equal(b.DirtyPages(), []int64{0}) {
		t.Fatalf("dirty pages %v", b.DirtyPages())
	}
	if !b.MarkClean(0, v2) || len(b.DirtyPages()) != 0 {
		t.Fatal("MarkClean with the current version")
	}
	b.MarkDirty(0)
	if !slices.Equal(b.DirtyPages(), []int64{0}) {
		t.Fatal("MarkDirty")
	}

	// Absent page without filler is zeroed; with filler starts from it.
	if _, err := b.WritePage(3, ps-2, []byte("ab"), nil); err != nil {
		t.Fatal(err)
	}
	b.SnapshotPage(3, snap)
	want = make([]byte, ps)
	copy(want[ps-2:], "ab")
	wantBytes(t, snap, want)
	if _, err := b.WritePage(4, 0, []byte("zz"), filler); err != nil {
		t.Fatal(err)
	}
	b.SnapshotPage(4, snap)
	want = slices.Clone(page)
	copy(want, "zz")
	wantBytes(t, snap, want)

	// PutPage clean and dirty.
	if err := b.PutPage(5, page, false); err != nil {
		t.Fatal(err)
	}
	if err := b.PutPage(6, page, true); err != nil {
		t.Fatal(err)
	}
	if got := b.DirtyPages(); !slices.Equal(got, []int64{0, 3, 4, 6}) {
		t.Fatalf("dirty pages %v", got)
	}
	checkAccounting(t, p)

	// Stat/List/Delete by decimal index.
	if bi, err := b.Stat("5"); err != nil || bi.Page != 5 || bi.Dirty || bi.Size != ps {
		t.Fatalf("stat 5 = %+v, %v", bi, err)
	}
	if err := b.Delete("5"); err != nil || b.HasPage(5) {
		t.Fatalf("delete 5: %v", err)
	}
	b.DeletePage(6)
	if n, all := b.Resident(5 * ps); n != 4 || all {
		t.Fatalf("resident = %d %v", n, all)
	}
	if n, all := b.Resident(ps); n != 4 || !all {
		t.Fatalf("resident(1 page) = %d %v", n, all)
	}
	checkAccounting(t, p)
}

func TestPageBadInput(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	b := mustBucket(t, p, "f", ps)
	buf := make([]byte, 10)
	for name, err := range map[string]error{
		"read past page":  second(b.ReadPage(0, ps-5, buf, nil)),
		"read neg off":    second(b.ReadPage(0, -1, buf, nil)),
		"read neg page":   second(b.ReadPage(-1, 0, buf, nil)),
		"read huge page":  second(b.ReadPage(1<<62, 0, buf, nil)),
		"write past page": second(b.WritePage(0, ps, []byte{1}, nil)),
		"put short":       b.PutPage(0, buf, false),
		"truncate neg":    b.Truncate(-1),
		"zero neg":        b.ZeroRange(-1, 5),
		"snapshot short":  snapErr(b.SnapshotPage(0, buf)),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func snapErr(_ uint64, _, _ bool, err error) error { return err }

func TestTruncateZeroRange(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	b := mustBucket(t, p, "f", ps)
	page := fill(ps, 5)
	for i := range int64(4) {
		if err := b.PutPage(i, page, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Truncate(2*ps + 100); err != nil {
		t.Fatal(err)
	}
	if b.HasPage(3) || !b.HasPage(2) {
		t.Fatal("truncate kept the wrong pages")
	}
	snap := make([]byte, ps)
	b.SnapshotPage(2, snap)
	want := slices.Clone(page)
	clear(want[100:])
	wantBytes(t, snap, want)
	if got := b.DirtyPages(); !slices.Equal(got, []int64{2}) {
		t.Fatalf("dirty after truncate %v", got)
	}
	if err := b.ZeroRange(ps-10, 20); err != nil {
		t.Fatal(err)
	}
	b.SnapshotPage(0, snap)
	want = slices.Clone(page)
	clear(want[ps-10:])
	wantBytes(t, snap, want)
	b.SnapshotPage(1, snap)
	want = slices.Clone(page)
	clear(want[:10])
	wantBytes(t, snap, want)
	if got := b.DirtyPages(); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Fatalf("dirty after zero range %v", got)
	}
	// A huge sparse range walks the map, not the range.
	if err := b.ZeroRange(0, 1<<50); err != nil {
		t.Fatal(err)
	}
	b.SnapshotPage(1, snap)
	wantBytes(t, snap, make([]byte, ps))
	if err := b.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Resident(0); n != 0 {
		t.Fatalf("%d pages after truncate 0", n)
	}
	checkAccounting(t, p)
}

func TestPinPage(t *testing.T) {
	p := testPool(t, 1<<20, 1<<20)
	b := mustBucket(t, p, "pin", 64<<10)
	if _, _, _, ok := b.PinPage(0, 0, 10); ok {
		t.Fatal("pinned an absent page")
	}
	data := bytes.Repeat([]byte("z"), 64<<10)
	if _, err := b.WritePage(1, 0, data[:1000], nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := b.PinPage(1, 0, 64<<10); ok {
		t.Fatal("pinned bytes the segment file does not hold")
	}
	fd, off, unpin, ok := b.PinPage(1, 10, 100)
	if !ok {
		t.Fatal("resident page not pinned")
	}
	got := make([]byte, 100)
	if n, err := unix.Pread(fd, got, off); err != nil || n != 100 || !bytes.Equal(got, data[:100]) {
		t.Fatalf("pread of the pinned page: %d %v", n, err)
	}
	moved := make(chan struct{})
	go func() { b.DeletePage(1); close(moved) }()
	select {
	case <-moved:
		t.Fatal("a pinned page was deleted")
	case <-time.After(50 * time.Millisecond):
	}
	unpin()
	<-moved
}

// TestInstallPage: a page read beforehand goes in clean if absent; a
// resident page (dirty or clean) is left alone.
func TestInstallPage(t *testing.T) {
	p := testPool(t, 1<<20, 1<<20)
	b := mustBucket(t, p, "f", ps)
	old, cur := fill(ps, 1), fill(ps, 2)
	if ok, err := b.InstallPage(0, old); !ok || err != nil {
		t.Fatalf("install absent page = %v, %v", ok, err)
	}
	if d := b.DirtyPages(); len(d) != 0 {
		t.Fatalf("installed page is dirty: %v", d)
	}
	if _, err := b.WritePage(1, 0, cur, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 1} {
		if ok, err := b.InstallPage(i, fill(ps, 9)); ok || err != nil {
			t.Fatalf("install over resident page %d = %v, %v", i, ok, err)
		}
	}
	buf := make([]byte, ps)
	for i, want := range [][]byte{old, cur} {
		if _, err := b.ReadPage(int64(i), 0, buf, nil); err != nil {
			t.Fatal(err)
		}
		wantBytes(t, buf, want)
	}
	if d := b.DirtyPages(); !slices.Equal(d, []int64{1}) {
		t.Fatalf("dirty pages %v, want [1]", d)
	}
	if _, err := b.InstallPage(2, buf[:100]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("install of a short page: %v", err)
	}
	checkAccounting(t, p)
}

// TestEvictClean: the clean pages go, with their tier use; a dirty page
// stays, and so does its data.
func TestEvictClean(t *testing.T) {
	p := testPool(t, 1<<20, 1<<20)
	b := mustBucket(t, p, "f", ps)
	for i := range int64(3) {
		if ok, err := b.InstallPage(i, fill(ps, byte(i))); !ok || err != nil {
			t.Fatalf("install page %d = %v, %v", i, ok, err)
		}
	}
	cur := fill(ps, 7)
	if _, err := b.WritePage(3, 0, cur, nil); err != nil {
		t.Fatal(err)
	}
	used := func() (n int64) {
		for _, ts := range p.Stats().Tiers {
			n += ts.Used
		}
		return n
	}
	before := used()
	if freed := b.EvictClean(); freed != 3*ps {
		t.Fatalf("freed %d bytes, want %d", freed, 3*ps)
	}
	if after := used(); after != before-3*ps {
		t.Fatalf("tier use %d after evicting, want %d", after, before-3*ps)
	}
	for i := range int64(3) {
		if b.HasPage(i) {
			t.Errorf("clean page %d still resident", i)
		}
	}
	buf := make([]byte, ps)
	if found, err := b.ReadPage(3, 0, buf, nil); !found || err != nil {
		t.Fatalf("dirty page: found %v, %v", found, err)
	}
	wantBytes(t, buf, cur)
	if freed := b.EvictClean(); freed != 0 {
		t.Errorf("second evict freed %d", freed)
	}
	checkAccounting(t, p)
}
