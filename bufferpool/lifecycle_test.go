package bufferpool

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func countFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// dirEntries lists what a file tier directory holds: its files, and the
// segment files and journals inside instance directories (the lock file
// of a live instance is not counted).
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
			continue
		}
		sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sub {
			if f.Name() != "lock" {
				names = append(names, e.Name()+"/"+f.Name())
			}
		}
	}
	return names
}

func TestCloseReleasesSegments(t *testing.T) {
	before := countFds(t)
	dir := t.TempDir()
	p, err := New(Config{OrganizerInterval: -1, Tiers: []TierConfig{
		{Name: "ram", Kind: KindRAM, Capacity: 8 * 4096},
		{Name: "nvme", Kind: KindFile, Dir: dir, Capacity: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		b := mustBucket(t, p, name, 4096)
		for i := range int64(6) {
			b.WritePage(i, 0, []byte{1}, nil)
		}
		nb := mustBucket(t, p, name+"-named", 0)
		nb.Put("x", make([]byte, 5000))
	}
	b, _ := p.LookupBucket("a")
	if _, _, err := b.PageTable(false); err != nil { // exposed: kept open until Close
		t.Fatal(err)
	}
	if len(dirEntries(t, dir)) == 0 || countFds(t) <= before {
		t.Fatal("no segments open")
	}
	if err := p.DeleteBucket("b"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := dirEntries(t, dir); len(got) != 0 {
		t.Fatalf("file tier holds %v after Close", got)
	}
	if after := countFds(t); after != before {
		t.Fatalf("fds: %d before, %d after Close", before, after)
	}
	wantErr(t, b.Put("x", nil), ErrInvalid) // page bucket: kind checked first
	_, err = b.WritePage(0, 0, []byte{1}, nil)
	wantErr(t, err, ErrClosed)
	_, err = p.Bucket("z", BucketOptions{})
	wantErr(t, err, ErrClosed)
	if err := p.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestSegmentsCloseWhenEmpty(t *testing.T) {
	dir := t.TempDir()
	p := testPool(t, 4096, 1<<20, func(c *Config) { c.Tiers[1].Dir = dir })
	b := mustBucket(t, p, "f", 4096)
	b.WritePage(0, 0, []byte{1}, nil)
	b.WritePage(1, 0, []byte{1}, nil) // to nvme
	if n := len(dirEntries(t, dir)); n != 1 {
		t.Fatalf("%d segment files", n)
	}
	b.DeletePage(1)
	if n := len(dirEntries(t, dir)); n != 0 {
		t.Fatalf("%d segment files after the last page left", n)
	}
}

func TestBucketsDeleteRename(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	a := mustBucket(t, p, "a", 4096)
	if again := mustBucket(t, p, "a", 0); again != a || again.PageSize() != 4096 {
		t.Fatal("Bucket did not return the existing bucket")
	}
	mustBucket(t, p, "b", 0)
	a.WritePage(0, 0, []byte{1}, nil)
	wantErr(t, p.RenameBucket("a", "b"), ErrExist)
	wantErr(t, p.RenameBucket("x", "y"), ErrNotFound)
	if err := p.RenameBucket("a", "c"); err != nil {
		t.Fatal(err)
	}
	if a.Name() != "c" || !slices.Equal(p.Buckets(), []string{"b", "c"}) {
		t.Fatalf("after rename: %q %v", a.Name(), p.Buckets())
	}
	if c, err := p.LookupBucket("c"); err != nil || c != a || !c.HasPage(0) {
		t.Fatal("renamed bucket lost")
	}
	_, err := p.LookupBucket("a")
	wantErr(t, err, ErrNotFound)
	if err := p.DeleteBucket("c"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.DeleteBucket("c"), ErrNotFound)
	_, err = a.WritePage(0, 0, []byte{1}, nil)
	wantErr(t, err, ErrNotFound)
	if s := p.Stats(); s.Tiers[0].Used != 0 || s.DirtyBytes != 0 || s.Buckets != 1 {
		t.Fatalf("stats after delete %+v", s)
	}
}

func TestConcurrentMixed(t *testing.T) {
	p := testPool(t, 32*4096, 64*4096, func(c *Config) { c.OrganizerInterval = 1_000_000 })
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := mustBucket(t, p, itoa(int64(w%2)), 4096)
			nb := mustBucket(t, p, "n"+itoa(int64(w%2)), 0)
			buf := make([]byte, 512)
			for i := range int64(300) {
				pg := (i * 7) % 40
				switch i % 6 {
				case 0, 1:
					if v, err := b.WritePage(pg, 0, buf, nil); err == nil {
						b.MarkClean(pg, v)
					}
				case 2:
					b.ReadPage(pg, 0, buf, func(p []byte) error { return nil })
				case 3:
					nb.PartialPut(itoa(pg%5), pg*100, buf)
					nb.Get(itoa(pg % 5))
				case 4:
					b.Truncate(pg * 4096 / 2)
				case 5:
					p.Organize()
					nb.Delete(itoa(pg % 5))
				}
			}
		}()
	}
	wg.Wait()
	checkAccounting(t, p)
}
