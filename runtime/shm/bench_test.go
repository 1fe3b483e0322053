package shm

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

func BenchmarkAllocFree(b *testing.B) {
	for _, size := range []uint64{48, 4000, 1 << 20} {
		b.Run(strconv.FormatUint(size, 10), func(b *testing.B) {
			s := newMemfdSegment(b, 64<<20)
			for b.Loop() {
				p, err := s.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				s.Free(p)
			}
		})
	}
	b.Run("48-parallel", func(b *testing.B) {
		s := newMemfdSegment(b, 64<<20)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, err := s.Alloc(48)
				if err != nil {
					b.Fatal(err)
				}
				s.Free(p)
			}
		})
	})
}

// Ring round trips: a request on one ring, the echo on another. "spin"
// waits by spinning (up to 10 ms), "sleep" goes straight to the futex,
// "adaptive" spins DefaultRingSpin and then sleeps. A channel ping-pong
// between two goroutines is the baseline of the same run.
var ringModes = []struct {
	name string
	spin time.Duration
}{
	{"spin", 10 * time.Millisecond},
	{"adaptive", DefaultRingSpin},
	{"sleep", 0},
}

func BenchmarkRingPingPongGoroutines(b *testing.B) {
	b.Run("chan-baseline", func(b *testing.B) {
		req, resp := make(chan uint64), make(chan uint64)
		go func() {
			for v := range req {
				resp <- v
			}
		}()
		pingPong(b, func(v uint64) uint64 { req <- v; return <-resp })
		close(req)
	})
	for _, m := range ringModes {
		b.Run(m.name, func(b *testing.B) {
			s := newMemfdSegment(b, 1<<20)
			req, resp := newRingPair(b, s, m.spin)
			done := make(chan error)
			go func() { done <- echo(s, req.Pointer(), resp.Pointer(), m.spin) }()
			pingPong(b, ringRoundTrip(b, req, resp))
			req.Enqueue(^uint64(0), time.Second)
			resp.Dequeue(time.Second)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkRingPingPongProcesses(b *testing.B) {
	for _, m := range ringModes {
		b.Run(m.name, func(b *testing.B) {
			s, name := newPosixSegment(b, 1<<20)
			req, resp := newRingPair(b, s, m.spin)
			c := startChild(b, "echo", name, []uint64{req.Pointer().Offset, resp.Pointer().Offset, uint64(m.spin)})
			if err := c.waitLine("ready"); err != nil {
				b.Fatal(err)
			}
			pingPong(b, ringRoundTrip(b, req, resp))
			req.Enqueue(^uint64(0), time.Second)
			resp.Dequeue(time.Second)
			if err := c.wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func newRingPair(b *testing.B, s *Segment, spin time.Duration) (*Ring[uint64], *Ring[uint64]) {
	req, err := NewRing[uint64](s, 64)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := NewRing[uint64](s, 64)
	if err != nil {
		b.Fatal(err)
	}
	req.Spin, resp.Spin = spin, spin
	return req, resp
}

func ringRoundTrip(b *testing.B, req, resp *Ring[uint64]) func(uint64) uint64 {
	return func(v uint64) uint64 {
		if err := req.Enqueue(v, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		got, err := resp.Dequeue(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		return got
	}
}

// pingPong times b.N round trips and reports the median and p99.
func pingPong(b *testing.B, rt func(uint64) uint64) {
	lat := make([]time.Duration, 0, min(b.N, 1<<20))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if got := rt(uint64(i)); got != uint64(i) {
			b.Fatalf("echo %d for %d", got, i)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	}
}
