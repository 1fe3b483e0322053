package bufferpool

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestWriteDrainReadBack mimics the file layer in write-back mode on a
// pool much smaller than the file: a writer retries on ErrNoSpace while a
// flusher snapshots dirty pages into a backing store and marks them
// clean; then every page read back (staged in on a miss) must match.
func TestWriteDrainReadBack(t *testing.T) {
	const pgs = 16 << 10
	p := testPool(t, 4*pgs, 4*pgs)
	b := mustBucket(t, p, "big", pgs)
	var mu sync.Mutex
	backing := map[int64][]byte{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // flusher
		defer wg.Done()
		buf := make([]byte, pgs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, i := range b.DirtyPages() {
				v, dirty, found, err := b.SnapshotPage(i, buf)
				if err != nil || !found || !dirty {
					continue
				}
				mu.Lock()
				backing[i] = append([]byte(nil), buf...)
				mu.Unlock()
				b.MarkClean(i, v)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	const n = 32
	want := make([][]byte, n)
	for i := range int64(n) {
		want[i] = fill(pgs, byte(i))
		for {
			_, err := b.WritePage(i, 0, want[i], nil)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	stager := func(i int64) Filler {
		return func(buf []byte) error {
			mu.Lock()
			defer mu.Unlock()
			copy(buf, backing[i])
			return nil
		}
	}
	got := make([]byte, pgs)
	for round := range 2 {
		for i := range int64(n) {
			for {
				_, err := b.ReadPage(i, 0, got, stager(i))
				if err == nil {
					break
				}
				if !errors.Is(err, ErrNoSpace) {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			if string(got) != string(want[i]) {
				t.Fatalf("round %d: page %d differs", round, i)
			}
		}
		p.Organize()
	}
	close(stop)
	wg.Wait()
	checkAccounting(t, p)
}
