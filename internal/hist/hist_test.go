package hist

import (
	"sync"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {time.Microsecond, 0}, {time.Microsecond + 1, 1}, {2 * time.Microsecond, 1},
		{3 * time.Microsecond, 2}, {1000 * time.Microsecond, 10}, {1024 * time.Microsecond, 10},
		{1025 * time.Microsecond, 11}, {Bound(NumBounds - 1), NumBounds - 1}, {time.Hour, NumBounds},
	}
	for _, tc := range cases {
		if got := bucketOf(tc.d); got != tc.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tc.d, got, tc.want)
		}
		if tc.want < NumBounds && tc.d > Bound(tc.want) || tc.want > 0 && tc.d <= Bound(tc.want-1) {
			t.Errorf("%v is not in (%v, %v]", tc.d, Bound(tc.want-1), Bound(tc.want))
		}
	}
}

// TestSnapshot: concurrent observers; the snapshot's count, sum and
// cumulative buckets agree.
func TestSnapshot(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				h.Observe(time.Duration(i%3+1) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	h.Observe(time.Minute)
	s := h.Snapshot()
	if s.Count != 4001 || s.Sum != 4*(334*1+333*2+333*3)*time.Millisecond+time.Minute {
		t.Fatalf("count %d sum %v", s.Count, s.Sum)
	}
	c := s.Cumulative()
	if c[Bound(10).Seconds()] != 4*334 || c[Bound(11).Seconds()] != 4*667 || c[Bound(12).Seconds()] != 4000 ||
		c[Bound(NumBounds-1).Seconds()] != 4000 || len(c) != NumBounds {
		t.Fatalf("cumulative %v", c)
	}
}
