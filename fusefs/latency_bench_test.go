package fusefs

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// BenchmarkRequestMetricsNote is the cost the timing layer adds to one
// FUSE request (a request itself costs ~20µs on these machines).
func BenchmarkRequestMetricsNote(b *testing.B) {
	var m RequestMetrics
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.note(opWrite, time.Now(), fuse.OK)
		}
	})
}

// BenchmarkTimeNowPair is the baseline: the two clock reads alone.
func BenchmarkTimeNowPair(b *testing.B) {
	var d time.Duration
	for range b.N {
		d += time.Since(time.Now())
	}
	_ = d
}
