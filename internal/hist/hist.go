// Package hist is a latency histogram cheap enough for the daemon's I/O
// paths: fixed buckets (powers of two from 1µs to about 16s), each an
// atomic counter, so Observe is three atomic adds and never locks or
// allocates. Readers (the Prometheus endpoint) take a Snapshot at scrape
// time; a Snapshot taken during Observe calls may count a sample in Count
// before its bucket, never the reverse of what Sum says by more than the
// samples in flight. A Histogram's zero value is ready; safe for
// concurrent use; it must not be copied after first use.
package hist

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// NumBounds is the number of finite bucket bounds: 1µs·2^0 … 1µs·2^24
// (16.8s); a last bucket takes what is slower.
const NumBounds = 25

// Bound is the upper bound (inclusive) of bucket i < NumBounds.
func Bound(i int) time.Duration { return time.Microsecond << i }

// Histogram counts durations per bucket.
type Histogram struct {
	buckets [NumBounds + 1]atomic.Uint64
	sum     atomic.Int64 // nanoseconds
	count   atomic.Uint64
}

// Observe adds one sample.
func (h *Histogram) Observe(d time.Duration) {
	h.buckets[bucketOf(d)].Add(1)
	h.sum.Add(int64(d))
	h.count.Add(1)
}

// Since observes the time since start.
func (h *Histogram) Since(start time.Time) { h.Observe(time.Since(start)) }

// bucketOf is the first bucket whose bound is at least d.
func bucketOf(d time.Duration) int {
	if d <= time.Microsecond {
		return 0
	}
	us := uint64((d - 1) / time.Microsecond) // d in (2^(i-1), 2^i] µs → i
	return min(bits.Len64(us), NumBounds)
}

// Snapshot is a histogram at one instant.
type Snapshot struct {
	Count   uint64
	Sum     time.Duration
	Buckets [NumBounds + 1]uint64 // per bucket, not cumulative; the last is above every bound
}

// Snapshot reads the counters.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	for i := range h.buckets {
		s.Buckets[i] = h.buckets[i].Load()
	}
	s.Sum = time.Duration(h.sum.Load())
	s.Count = h.count.Load()
	return s
}

// Cumulative returns the count of samples at or below each finite bound
// in seconds (the form of a Prometheus histogram). The +Inf bucket is
// Count.
func (s Snapshot) Cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, NumBounds)
	var n uint64
	for i := 0; i < NumBounds; i++ {
		n += s.Buckets[i]
		out[Bound(i).Seconds()] = n
	}
	return out
}
