package bufferpool

import (
	"fmt"
	"testing"
	"time"

	"github.com/iowarp/iowarp/internal/sys"
)

// memcpyNs measures a copy of n bytes, the baseline the page operations
// are reported against.
// The best of a few rounds, to be robust against a busy machine.
func memcpyNs(n int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	iters := max(1, (16<<20)/n)
	best := 0.0
	for range 5 {
		start := time.Now()
		for range iters {
			copy(dst, src)
		}
		ns := float64(time.Since(start).Nanoseconds()) / float64(iters)
		if best == 0 || ns < best {
			best = ns
		}
	}
	return best
}

// preadNs measures a pread of n bytes from a memfd (the RAM tier's raw
// device cost, what ARCHITECTURE.md calls the tmpfs pread).
func preadNs(b *testing.B, n int) float64 {
	f, err := sys.MemfdCreate("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := fill(n, 1)
	if _, err := f.WriteAt(buf, 0); err != nil {
		b.Fatal(err)
	}
	iters := max(1, (16<<20)/n)
	best := 0.0
	for range 5 {
		start := time.Now()
		for range iters {
			f.ReadAt(buf, 0)
		}
		ns := float64(time.Since(start).Nanoseconds()) / float64(iters)
		if best == 0 || ns < best {
			best = ns
		}
	}
	return best
}

func benchPages(b *testing.B, op func(bk *Bucket, i int64, buf []byte) error) {
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			const npages = 64
			p := testPool(b, npages*int64(size), 0)
			bk := mustBucket(b, p, "f", int64(size))
			buf := fill(size, 1)
			for i := range int64(npages) {
				if err := bk.PutPage(i, buf, false); err != nil {
					b.Fatal(err)
				}
			}
			base, raw := memcpyNs(size), preadNs(b, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := op(bk, int64(i%npages), buf); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(per/base, "x_memcpy")
			b.ReportMetric(per/raw, "x_pread")
		})
	}
}

func BenchmarkReadPage(b *testing.B) {
	benchPages(b, func(bk *Bucket, i int64, buf []byte) error {
		found, err := bk.ReadPage(i, 0, buf, nil)
		if !found && err == nil {
			err = fmt.Errorf("page %d not found", i)
		}
		return err
	})
}

func BenchmarkWritePage(b *testing.B) {
	benchPages(b, func(bk *Bucket, i int64, buf []byte) error {
		_, err := bk.WritePage(i, 0, buf, nil)
		return err
	})
}
