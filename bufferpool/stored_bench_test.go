package bufferpool

import (
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the slower tiers' stored form. Throughput is per byte of
// logical data (MB/s); "ratio" is logical bytes over stored bytes (each
// 64 KiB chunk compressed on its own, as the pool stores it, a chunk
// that does not shrink counted raw). The baseline in the same run is a
// memmove of the same bytes (BenchmarkChecksum/copy): compare against it,
// not across machines.
//
//	go test -run '^$' -bench 'Checksum|Codec' -benchtime 20x ./bufferpool/

// BenchmarkChecksum: crc32c of 1 MiB (hardware accelerated) against a
// copy of it.
func BenchmarkChecksum(b *testing.B) {
	src := random(1<<20, 7)
	dst := make([]byte, len(src))
	b.Run("crc32c", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			crc32.Checksum(src, castagnoli)
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}

var (
	ckptOnce sync.Once
	ckpt     []byte
	ckptErr  string
)

// checkpoint returns the bytes of an HDF5 checkpoint written by h5py
// (testdata/checkpoint.py), or skips.
func checkpoint(b *testing.B) []byte {
	ckptOnce.Do(func() {
		dir, err := os.MkdirTemp("", "iowarp-ckpt-")
		if err != nil {
			ckptErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "ckpt.h5")
		if msg, err := exec.Command("/usr/bin/python3", "testdata/checkpoint.py", out).CombinedOutput(); err != nil {
			ckptErr = "python3 with h5py and numpy (make deps): " + err.Error() + ": " + string(msg)
			return
		}
		ckpt, err = os.ReadFile(out)
		if err != nil {
			ckptErr = err.Error()
		}
	})
	if ckpt == nil {
		b.Skip(ckptErr)
	}
	return ckpt
}

// BenchmarkCodec: compression and decompression of an HDF5 checkpoint
// and of random bytes, per codec, in the pool's 64 KiB chunks.
func BenchmarkCodec(b *testing.B) {
	inputs := []struct {
		name string
		data func(*testing.B) []byte
	}{
		{"hdf5", checkpoint},
		{"random", func(*testing.B) []byte { return random(8<<20, 9) }},
	}
	for _, in := range inputs {
		for _, name := range []string{CompressZstd, CompressS2, CompressLZ4} {
			c, _ := codecByName(name)
			b.Run(in.name+"/"+name+"/encode", func(b *testing.B) {
				data := in.data(b)
				cbuf := make([]byte, 3*storedChunk)
				var stored int64
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					stored = 0
					for off := 0; off < len(data); off += storedChunk {
						chunk := data[off:min(off+storedChunk, len(data))]
						out, ok := c.encode(cbuf[:0], chunk)
						if !ok {
							out = chunk
						}
						stored += int64(len(out))
					}
				}
				b.ReportMetric(float64(len(data))/float64(stored), "ratio")
			})
			b.Run(in.name+"/"+name+"/decode", func(b *testing.B) {
				data := in.data(b)
				var enc [][]byte
				for off := 0; off < len(data); off += storedChunk {
					chunk := data[off:min(off+storedChunk, len(data))]
					out, ok := c.encode(nil, chunk)
					if !ok {
						out = nil // raw: nothing to decode
					}
					enc = append(enc, append([]byte(nil), out...))
				}
				dst := make([]byte, storedChunk)
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					for k, e := range enc {
						n := min(storedChunk, len(data)-k*storedChunk)
						if e == nil {
							copy(dst[:n], data[k*storedChunk:])
							continue
						}
						if err := c.decode(dst[:n], e); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkMove: a 1 MiB page of the HDF5 checkpoint moved down to the
// file tier and back up, per codec ("none": checksummed only), against
// the same move storing the page raw without checksums ("plain": what a
// move was before stored forms, the baseline), interleaved so that the
// load of a shared machine falls on all alike. Reported: ms per round
// trip of each, and each over plain.
func BenchmarkMove(b *testing.B) {
	page := checkpoint(b)[4<<20 : 5<<20]
	kinds := []string{"plain", CompressNone, CompressZstd, CompressS2, CompressLZ4}
	buckets := make([]*Bucket, len(kinds))
	for j, codec := range kinds {
		p := testPool(b, 8<<20, 8<<20)
		bk := mustBucket(b, p, "m", 1<<20)
		if codec != "plain" {
			bk.SetCompress(codec)
		}
		if err := bk.PutPage(0, page, false); err != nil {
			b.Fatal(err)
		}
		buckets[j] = bk
	}
	spent := make([]time.Duration, len(kinds))
	n := 0
	for b.Loop() {
		for j, bk := range buckets {
			storeSlower = kinds[j] != "plain"
			t := time.Now()
			bk.mu.Lock()
			bl := bk.pages[0]
			bk.demoteLocked(bl, 0)
			if bl.tier != 1 || !bk.p.tiers[0].reserve(bl.alloc) {
				b.Fatal("not demoted, or no room to promote")
			}
			err := bk.moveLocked(bl, 0)
			bk.mu.Unlock()
			spent[j] += time.Since(t)
			if err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
	storeSlower = true
	for j, kind := range kinds {
		b.ReportMetric(float64(spent[j].Microseconds())/1000/float64(n), kind+"-ms/move")
		if j > 0 {
			b.ReportMetric(float64(spent[j])/float64(spent[0]), kind+"/plain")
		}
	}
}

// BenchmarkSlowTierRead: 4 KiB reads at random offsets of 1 MiB pages on
// the file tier (in the page cache), interleaved in batches of 64 so
// that the load of a shared machine falls on all alike: pages stored raw
// and unchecksummed ("plain", the baseline: such a read before stored
// forms), checksummed (each read checks the 16 KiB chunk it touches),
// and compressed with lz4 and zstd (each read decompresses and checks a
// 64 KiB chunk). Reported: ns per read of each, and each over plain.
func BenchmarkSlowTierRead(b *testing.B) {
	data := checkpoint(b)[:8<<20]
	kinds := []string{"plain", CompressNone, CompressLZ4, CompressZstd}
	buckets := make([]*Bucket, len(kinds))
	for j, codec := range kinds {
		storeSlower = codec != "plain"
		p := testPool(b, 16<<20, 16<<20)
		bk := mustBucket(b, p, "r", 1<<20)
		if codec != "plain" {
			bk.SetCompress(codec)
		}
		for i := range int64(8) {
			if err := bk.PutPage(i, data[i<<20:(i+1)<<20], false); err != nil {
				b.Fatal(err)
			}
		}
		p.Shed(0) // all to the file tier
		p.Unshed()
		if st := p.Stats().Tiers[1]; st.Blobs != 8 {
			b.Fatalf("%s: file tier %+v", codec, st)
		}
		buckets[j] = bk
	}
	storeSlower = true
	buf := make([]byte, 4096)
	spent := make([]time.Duration, len(kinds))
	k := 0
	for b.Loop() {
		for j, bk := range buckets {
			t := time.Now()
			for r := range 64 {
				off := int64((k+r)*7919*4096) % (1<<20 - 4096)
				if _, err := bk.ReadPage(int64((k+r)%8), off, buf, nil); err != nil {
					b.Fatal(err)
				}
			}
			spent[j] += time.Since(t)
		}
		k += 64
	}
	for j, kind := range kinds {
		b.ReportMetric(float64(spent[j].Nanoseconds())/float64(k), kind+"-ns/read")
		if j > 0 {
			b.ReportMetric(float64(spent[j])/float64(spent[0]), kind+"/plain")
		}
	}
}
