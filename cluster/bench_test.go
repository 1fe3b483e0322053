package cluster

import (
	"context"
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

// BenchmarkBlobMoveRatio: the organizer moving 1 MiB blobs off a full
// node (read from the pool, put on the target with the map switched in
// a transaction, deleted here) against plain puts of the same blobs on
// the same target over gRPC (the spill path of Node.Put), measured in
// the same run, on loopback. Reports MiB/s of both and the ratio.
func BenchmarkBlobMoveRatio(b *testing.B) {
	const size = 1 << 20
	for b.Loop() {
		ns := startNodesWith(b, b.TempDir(), 2, nodeOpts{page: testPage, ram: 64 << 20})
		ctx := context.Background()
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		conn, err := ns[0].node.conn(ctx, "n2")
		if err != nil {
			b.Fatal(err)
		}
		const base = 16
		start := time.Now()
		for i := range base {
			if _, err := call(ctx, conn, "BlobPut", rawFrame(encodeBlob(blobHeader{Bucket: "base", Blob: blobName(i)}, data))); err != nil {
				b.Fatal(err)
			}
		}
		put := time.Since(start)
		bk, err := ns[1].pool.LookupBucket("cluster:base")
		if err != nil {
			b.Fatal(err)
		}
		for i := range base {
			bk.Delete(blobName(i))
		}
		for i := range 60 { // 60 of 64 MiB: past the high watermark
			if err := ns[0].node.putLocal(ctx, "ckpt", blobName(i), data); err != nil {
				b.Fatal(err)
			}
		}
		r, err := ns[0].node.OrganizeBlobs(ctx)
		if err != nil || r.Moved == 0 || r.Failed != 0 {
			b.Fatalf("pass %+v, %v", r, err)
		}
		putRate := float64(base*size) / (1 << 20) / put.Seconds()
		moveRate := float64(r.MovedBytes) / (1 << 20) / r.Took.Seconds()
		b.ReportMetric(putRate, "put_MiB/s")
		b.ReportMetric(moveRate, "move_MiB/s")
		b.ReportMetric(moveRate/putRate, "move_vs_put_x")
		b.ReportMetric(float64(r.MovedBytes)/(1<<20), "moved_MiB")
		closeAll(ns)
	}
}
