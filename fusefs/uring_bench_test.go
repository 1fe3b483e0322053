package fusefs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/fuseuring"
)

// BenchmarkIoUringRatio reads (and overwrites) a file resident in the RAM
// tier through two mounts of the same pool layout, one over /dev/fuse and
// one over io_uring, in alternating rounds (the order flips every round),
// with O_DIRECT so that every call is one FUSE READ or WRITE. It reports
// each transport's time per call and devfuse/uring (> 1: io_uring faster).
//
//	go test -run '^$' -bench IoUringRatio -benchtime 20000x -count 3 ./fusefs/
func BenchmarkIoUringRatio(b *testing.B) {
	if err := fuseuring.Enable(); err != nil {
		b.Skipf("FUSE over io_uring: %v", err)
	}
	const size = 16 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	cases := []struct {
		name  string
		size  int
		write bool
	}{{"read4K", 4 << 10, false}, {"read1024K", 1 << 20, false}, {"write4K", 4 << 10, true}}
	for _, tc := range cases {
		rs := tc.size
		b.Run(tc.name, func(b *testing.B) {
			var fds [2]*os.File
			for i, mode := range []fuseuring.Mode{fuseuring.Off, fuseuring.On} {
				tm := newTestMountOpts(b, files.Writeback, Options{IoUring: mode})
				name := filepath.Join(tm.dir, "f")
				if err := os.WriteFile(name, data, 0o644); err != nil {
					b.Fatal(err)
				}
				f, err := os.OpenFile(name, os.O_RDWR|syscall.O_DIRECT, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { f.Close() })
				fds[i] = f
			}
			buf := alignedBuf(b, rs)
			var spent [2]time.Duration
			const round = 64
			ops := 0
			for r := 0; ops < b.N; r++ {
				for k := 0; k < 2; k++ {
					i := (r + k) % 2
					t0 := time.Now()
					for j := ops; j < ops+round; j++ {
						off := int64(j*rs) % size
						var n int
						var err error
						if tc.write {
							n, err = fds[i].WriteAt(buf, off)
						} else {
							n, err = fds[i].ReadAt(buf, off)
						}
						if err != nil || n != rs {
							b.Fatalf("%s at %d: %d, %v", tc.name, off, n, err)
						}
					}
					spent[i] += time.Since(t0)
				}
				ops += round
			}
			b.ReportMetric(float64(spent[0].Nanoseconds())/float64(ops), "devfuse-ns/call")
			b.ReportMetric(float64(spent[1].Nanoseconds())/float64(ops), "uring-ns/call")
			b.ReportMetric(float64(spent[0])/float64(spent[1]), "devfuse/uring")
		})
	}
}

// alignedBuf is a page-aligned buffer (O_DIRECT), unmapped at the end.
func alignedBuf(b *testing.B, n int) []byte {
	buf, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { syscall.Munmap(buf) })
	return buf
}
