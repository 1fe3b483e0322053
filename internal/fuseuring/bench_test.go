package fuseuring

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The transports serve the same in-memory direct-I/O file through the same
// go-fuse code (fs bridge, ProtocolServer parsing); only the way requests
// reach the daemon differs. Compare sub-benchmarks of one run:
//
//	go test -run '^$' -bench Transport -count 5 ./internal/fuseuring/
const benchFileSize = 64 << 20

var transports = []struct {
	name  string
	uring bool
}{{"devfuse", false}, {"uring", true}}

// BenchmarkTransportPread4K is the latency of one 4 KiB pread(2), one FUSE
// READ each (ns/op).
func BenchmarkTransportPread4K(b *testing.B) {
	data := pattern(benchFileSize)
	for _, tc := range transports {
		b.Run(tc.name, func(b *testing.B) {
			f := openData(b, data, tc.uring)
			buf := make([]byte, 4096)
			b.SetBytes(4096)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i*4096) % benchFileSize
				if n, err := f.ReadAt(buf, off); err != nil || n != len(buf) {
					b.Fatalf("pread at %d: %d, %v", off, n, err)
				}
			}
		})
	}
}

// BenchmarkTransportSeq1M is sequential 1 MiB reads (MB/s), one FUSE READ
// of 1 MiB each (max_pages 256).
func BenchmarkTransportSeq1M(b *testing.B) {
	data := pattern(benchFileSize)
	for _, tc := range transports {
		b.Run(tc.name, func(b *testing.B) {
			f := openData(b, data, tc.uring)
			buf := make([]byte, 1<<20)
			b.SetBytes(1 << 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				off := int64(i<<20) % benchFileSize
				if n, err := f.ReadAt(buf, off); err != nil || n != len(buf) {
					b.Fatalf("pread at %d: %d, %v", off, n, err)
				}
			}
		})
	}
}

func openData(b *testing.B, data []byte, uring bool) *os.File {
	s := mountData(b, data, uring)
	f, err := os.Open(filepath.Join(s.dir, "data"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// BenchmarkTransportRatio mounts both transports at once and alternates
// rounds between them (the order flips every round), so that load from
// other processes falls on both alike; it reports each one's time per
// read and the ratio devfuse/uring (> 1: io_uring is faster).
func BenchmarkTransportRatio(b *testing.B) {
	data := pattern(benchFileSize)
	for _, size := range []int{4 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dK", size>>10), func(b *testing.B) {
			files := []*os.File{openData(b, data, false), openData(b, data, true)}
			var spent [2]time.Duration
			buf := make([]byte, size)
			const round = 64
			ops := 0
			for r := 0; ops < b.N; r++ {
				for k := 0; k < 2; k++ {
					i := (r + k) % 2
					t0 := time.Now()
					readRound(b, files[i], buf, ops, round)
					spent[i] += time.Since(t0)
				}
				ops += round
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(ops), "devfuse-ns/read")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(ops), "uring-ns/read")
			b.ReportMetric(float64(spent[0])/float64(spent[1]), "devfuse/uring")
		})
	}
}

func readRound(b *testing.B, f *os.File, buf []byte, from, n int) {
	for i := from; i < from+n; i++ {
		off := int64(i*len(buf)) % benchFileSize
		if got, err := f.ReadAt(buf, off); err != nil || got != len(buf) {
			b.Fatalf("pread at %d: %d, %v", off, got, err)
		}
	}
}
