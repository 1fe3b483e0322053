package bufferpool

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCapacityConcurrentWriters(t *testing.T) {
	const ram, file = 64 << 10, 256 << 10
	p := testPool(t, ram, file)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var over atomic.Int64
	go func() { // watch used bytes while writers run
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, ts := range p.Stats().Tiers {
				if ts.Used > ts.Capacity {
					over.Add(1)
				}
			}
		}
	}()
	var noSpace, ok atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := mustBucket(t, p, fmt.Sprint("f", w), 4096)
			data := fill(4096, byte(w))
			for i := range int64(40) {
				v, err := b.WritePage(i, 0, data, nil)
				switch {
				case errors.Is(err, ErrNoSpace):
					noSpace.Add(1)
				case err != nil:
					t.Error(err)
				default:
					ok.Add(1)
					if w%2 == 0 { // half the writers drain, making pages evictable
						b.MarkClean(i, v)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if over.Load() != 0 {
		t.Fatalf("used exceeded capacity %d times", over.Load())
	}
	checkAccounting(t, p)
	if noSpace.Load() == 0 {
		t.Errorf("8*40 dirty-ish pages fit in %d bytes?", ram+file)
	}
	s := p.Stats()
	if s.Tiers[0].Used+s.Tiers[1].Used > ram+file {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("ok %d, no space %d, stats %+v", ok.Load(), noSpace.Load(), s)
}

func TestNoSpaceWhenAllDirty(t *testing.T) {
	p := testPool(t, 64<<10, 256<<10)
	b := mustBucket(t, p, "f", 4096)
	page := fill(4096, 1)
	for i := range int64(80) {
		if _, err := b.WritePage(i, 0, page, nil); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
	}
	_, err := b.WritePage(80, 0, page, nil)
	wantErr(t, err, ErrNoSpace)
	// Named blobs are dirty too.
	nb := mustBucket(t, p, "n", 0)
	wantErr(t, nb.Put("x", page), ErrNoSpace)
	// A fill of a clean page has nowhere to go either.
	_, err = b.ReadPage(100, 0, page[:1], func([]byte) error { return nil })
	wantErr(t, err, ErrNoSpace)
	if len(b.DirtyPages()) != 80 {
		t.Fatal("dirty pages were dropped")
	}
	// Draining one page makes room again: clean pages are evicted.
	if !b.MarkClean(0, 1) {
		t.Fatal("MarkClean")
	}
	if _, err := b.WritePage(80, 0, page, nil); err != nil {
		t.Fatal(err)
	}
	if b.HasPage(0) {
		t.Fatal("clean page 0 should have been evicted")
	}
	if s := p.Stats(); s.Tiers[0].Evicted+s.Tiers[1].Evicted != 1 {
		t.Fatalf("evicted %+v", s.Tiers)
	}
	checkAccounting(t, p)
}

func TestCleanEvictionColdestFirst(t *testing.T) {
	p := testPool(t, 8*4096, 0)
	b := mustBucket(t, p, "f", 4096)
	page := fill(4096, 1)
	for i := range int64(8) {
		if err := b.PutPage(i, page, false); err != nil {
			t.Fatal(err)
		}
	}
	// Heat every page but 3 (dirty page 5 must survive anyway).
	buf := make([]byte, 10)
	for range 3 {
		for i := range int64(8) {
			if i != 3 {
				b.ReadPage(i, 0, buf, nil)
			}
		}
	}
	b.WritePage(5, 0, page, nil)
	other := mustBucket(t, p, "g", 4096)
	if err := other.PutPage(0, page, false); err != nil {
		t.Fatal(err)
	}
	if b.HasPage(3) {
		t.Fatal("the coldest page 3 was not evicted")
	}
	for i := range int64(8) {
		if i != 3 && !b.HasPage(i) {
			t.Errorf("page %d evicted", i)
		}
	}
	checkAccounting(t, p)
}

func TestNamedGrowAcrossTiers(t *testing.T) {
	p := testPool(t, 16<<10, 64<<10)
	b := mustBucket(t, p, "n", 0)
	a := fill(12<<10, 1)
	if err := b.Put("a", a); err != nil {
		t.Fatal(err)
	}
	if err := b.Put("b", fill(4<<10, 2)); err != nil {
		t.Fatal(err)
	}
	// Growing a needs 20 KiB: the RAM tier cannot hold it any more.
	tail := fill(8<<10, 3)
	if err := b.PartialPut("a", 12<<10, tail); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get("a")
	if err != nil {
		t.Fatal(err)
	}
	wantBytes(t, got, append(a, tail...))
	if st, _ := b.Stat("a"); st.Tier != "nvme" {
		t.Fatalf("a on %s", st.Tier)
	}
	checkAccounting(t, p)
	// Too big for any tier.
	wantErr(t, b.Put("huge", make([]byte, 65<<10)), ErrNoSpace)
	if got, _ := b.Get("a"); len(got) != 20<<10 {
		t.Fatal("failed put damaged another blob")
	}
	checkAccounting(t, p)
}

// A writer that needs space never waits for a bucket another goroutine
// holds (here, one inside a slow Filler): it skips it.
func TestEvictionSkipsBusyBucket(t *testing.T) {
	p := testPool(t, 4*4096, 0)
	x := mustBucket(t, p, "x", 4096)
	y := mustBucket(t, p, "y", 4096)
	for i := range int64(3) {
		x.PutPage(i, fill(4096, 1), false) // clean, evictable
	}
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := x.ReadPage(3, 0, make([]byte, 1), func([]byte) error {
			close(entered)
			<-release
			return nil
		})
		done <- err
	}()
	<-entered
	// x is locked: y cannot evict its clean pages and must not block.
	y.WritePage(0, 0, []byte{1}, nil) // takes the last free page
	_, err := y.WritePage(1, 0, []byte{1}, nil)
	wantErr(t, err, ErrNoSpace)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err) // x evicts its own clean page for the fill
	}
	if _, err := y.WritePage(1, 0, []byte{1}, nil); err != nil {
		t.Fatal("with x free, y evicts its clean pages:", err)
	}
	checkAccounting(t, p)
}
