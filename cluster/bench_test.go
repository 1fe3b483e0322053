package cluster

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// BenchmarkReadBackRatio: the N-to-N read-back of a 3-node checkpoint
// (each node reads the ranks another node wrote) through the shared
// namespace (pages fetched from the writer over gRPC on loopback, before
// any write-back) against through the backing dir (written back and
// fsynced, dropped from the page cache, read by nodes without a shared
// namespace: stage-in from the backing store, the close-to-open path).
// Reports MB/s of both and the ratio, and the same with the write-back
// counted (the other way: ask the writer to write back, then read the
// backing store). The backing dir here is a local
// disk, not a PFS: the ratio understates what a PFS round trip costs.
func BenchmarkReadBackRatio(b *testing.B) {
	const n, ranks, rankSize = 3, 4, 4 << 20
	off := false
	for b.Loop() {
		backing := b.TempDir()
		opts := nodeOpts{page: files.DefaultPageSize, ram: 128 << 20}
		ns := startNodesWith(b, backing, n, opts)
		data := make([]byte, rankSize)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		gen := "a"
		name := func(node, r int) string { return fmt.Sprintf("%s.n%d.rank%d", gen, node, r) }
		writeAll := func() {
			for i, tn := range ns {
				for r := range ranks {
					write(b, tn.fs, name(i, r), data)
				}
			}
		}
		writeAll()
		readAll := func(nodes []*testNode) time.Duration {
			start := time.Now()
			for i, tn := range nodes {
				for r := range ranks {
					got, err := read(tn.fs, name((i+1)%n, r))
					if err != nil || len(got) != rankSize {
						b.Fatalf("node %d read %s: %d bytes, %v", i, name((i+1)%n, r), len(got), err)
					}
				}
			}
			return time.Since(start)
		}
		shared := readAll(ns)
		for _, tn := range ns {
			if err := tn.fs.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		dropPageCache(b, backing)
		opts.remote = &off
		plain := startNodesWith(b, backing, n, opts) // their own etcd; no shared namespace
		backed := readAll(plain)
		total := float64(n * ranks * rankSize)
		b.ReportMetric(total/shared.Seconds()/1e6, "shared_MB/s")
		b.ReportMetric(total/backed.Seconds()/1e6, "backing_MB/s")
		b.ReportMetric(backed.Seconds()/shared.Seconds(), "shared_x")
		// The other way to read before the write-back finished on its
		// own: ask the writers to write back first (what a revocation
		// does), then read the backing store. A new checkpoint, timed
		// from its last close.
		gen = "b"
		writeAll()
		start := time.Now()
		for _, tn := range ns {
			if err := tn.fs.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		dropPageCache(b, backing)
		readAll(plain)
		wb := time.Since(start)
		b.ReportMetric(total/wb.Seconds()/1e6, "writeback+backing_MB/s")
		b.ReportMetric(wb.Seconds()/shared.Seconds(), "shared_vs_writeback_x")
		for _, tn := range append(plain, ns...) {
			tn.close()
		}
	}
}

// dropPageCache evicts the backing files from the kernel's page cache, so
// that the baseline reads them from the device.
func dropPageCache(b *testing.B, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}
