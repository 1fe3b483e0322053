package bufferpool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPutDurable: Put against PutWith(Durable) of 1 MiB blobs on a
// pool with a file tier (the durable one adds a copy into the bbolt store
// and its commit's fsyncs), and the floor of any durable write: 1 MiB
// written to a file in the same directory and fdatasync'd. Compare the
// ns/op: ratios, not times.
func BenchmarkPutDurable(b *testing.B) {
	data := fill(1<<20, 3)
	b.Run("fdatasync-floor", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(int64(len(data)))
		for i := 0; b.Loop(); i++ {
			if _, err := f.WriteAt(data, int64(i%8)<<20); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, durable := range []bool{false, true} {
		b.Run(fmt.Sprintf("durable=%v", durable), func(b *testing.B) {
			p := testPool(b, 64<<20, 256<<20)
			bk := mustBucket(b, p, "bench", 0)
			b.SetBytes(int64(len(data)))
			for i := 0; b.Loop(); i++ {
				if err := bk.PutWith(fmt.Sprint(i%8), data, PutOptions{Durable: durable}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuery: a tag query answered from the index against the same
// selection found by walking every blob (a size filter, which no index
// serves), over 2000 buckets of 10 blobs, one blob in 1000 tagged.
func BenchmarkQuery(b *testing.B) {
	p := testPool(b, 256<<20, 0)
	for i := range 2000 {
		bk := mustBucket(b, p, fmt.Sprintf("sim/run%d/var", i), 0)
		for j := range 10 {
			size := 100
			if (i*10+j)%1000 == 0 {
				size = 200
			}
			if err := bk.Put(fmt.Sprint(j), make([]byte, size)); err != nil {
				b.Fatal(err)
			}
			if size == 200 {
				bk.SetTag(fmt.Sprint(j), "pick", "1")
			}
		}
	}
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"index", Query{Tags: []TagFilter{{Key: "pick", Value: "1"}}}},
		{"scan", Query{MinSize: 200}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := p.Query(tc.q, nil)
				if err != nil || len(res) != 20 {
					b.Fatalf("%d results, %v", len(res), err)
				}
			}
		})
	}
}

// BenchmarkPartialPutDurable: a 4 KiB PartialPut into a blob of a plain
// bucket against the same into a durable bucket (BucketOptions.Durable:
// the whole blob is copied into the store and committed on every call),
// for blobs of 64 KiB and 1 MiB, and the floor of any durable 4 KiB
// write: 4 KiB written to a file in the same directory and fdatasync'd.
// Compare the ns/op: ratios, not times.
func BenchmarkPartialPutDurable(b *testing.B) {
	page := fill(4096, 7)
	b.Run("fdatasync-floor", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "floor"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for i := 0; b.Loop(); i++ {
			if _, err := f.WriteAt(page, int64(i%16)<<12); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, durable := range []bool{false, true} {
			b.Run(fmt.Sprintf("blob=%dKiB/durable=%v", size>>10, durable), func(b *testing.B) {
				p := testPool(b, 64<<20, 256<<20)
				bk, err := p.Bucket("bench", BucketOptions{Durable: durable})
				if err != nil {
					b.Fatal(err)
				}
				if err := bk.Put("x", fill(size, 3)); err != nil {
					b.Fatal(err)
				}
				for i := 0; b.Loop(); i++ {
					if err := bk.PartialPut("x", int64(i%(size/4096))*4096, page); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
