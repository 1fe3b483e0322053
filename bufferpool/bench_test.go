package bufferpool

import (
	"fmt"
	"testing"
	"time"
)

// memcpyNs measures a copy of n bytes, the baseline the page operations
// are reported against.
func memcpyNs(n int) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	iters := max(1, (64<<20)/n)
	start := time.Now()
	for range iters {
		copy(dst, src)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(iters)
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
			base := memcpyNs(size)
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
