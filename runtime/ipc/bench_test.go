package ipc

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkRoundTrip measures an empty task (admin.noop) client → daemon →
// client in one process (the daemon's poller and the client in different
// goroutines, so usually on different cores), reporting median and p99.
func BenchmarkRoundTrip(b *testing.B) {
	srv, _ := newServer(b)
	c := dial(b, srv)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := c.Do(mNoop, Span{}, Span{}, Span{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}
