package files

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/units"
)

// BenchmarkLearnedPrefetch: a job reads its input in a random order that
// is the same at every run (1 MiB reads at page offsets). The first run
// records the history; then each iteration restarts the daemon (a new
// pool on the same directories: nothing of the input in the pool), drops
// the input from the page cache, and times the job once with the learned
// prefetch and once without (histories off), in the same run on the same
// disk. It reports speedup (time without / time with) and both rates:
// "disk" reads the cold local disk, "pfs-2ms" adds 2 ms to every read of
// the backing file (a parallel file system's request latency).
// IOWARP_LEARN_BENCH_SIZE sets the input's size (default 256MiB; the
// issue's figure is for 2GiB), IOWARP_LEARN_BENCH_DIR the directory (on
// the disk to measure; default the test's temporary directory).
func BenchmarkLearnedPrefetch(b *testing.B) {
	size := int64(256 << 20)
	if v := os.Getenv("IOWARP_LEARN_BENCH_SIZE"); v != "" {
		n, err := units.ParseSize(v)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	d := benchLearnDirs(b)
	pages := int(size / DefaultPageSize)
	writeLearnBenchInput(b, d, pages)
	random := randomOrder(1, pages)
	for _, bc := range []struct {
		name    string
		latency time.Duration
	}{{"disk", 0}, {"pfs-2ms", 2 * time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			run := func(learned bool) time.Duration {
				return timeLearnJob(b, d, size, random, learned, bc.latency)
			}
			run(true) // the first run: records the history
			b.ResetTimer()
			var with, without time.Duration
			for range b.N {
				with += run(true)
				without += run(false)
			}
			b.StopTimer()
			reportLearned(b, size, with, without)
		})
	}
}

// timeLearnJob restarts the daemon on d with the learned prefetch on or
// off and times one run of the job reading pages in order, cold.
func timeLearnJob(b testing.TB, d learnDirs, size int64, order []int, learned bool, latency time.Duration) time.Duration {
	opts := Options{Backing: d.backing, PageSize: DefaultPageSize, HistoryDir: d.history()}
	if !learned {
		opts.HistoryDir = ""
	}
	dropBackingCache(b, filepath.Join(d.backing, "input"))
	fs, stop := d.startSized(b, "", size+64<<20, 64<<20, opts)
	defer stop()
	fs.stageLatency = latency
	start := time.Now()
	readLearnBench(b, fs, order)
	return time.Since(start)
}

func reportLearned(b *testing.B, size int64, with, without time.Duration) {
	b.ReportMetric(float64(without)/float64(with), "speedup")
	mb := float64(size) * float64(b.N) / (1 << 20)
	b.ReportMetric(mb/with.Seconds(), "MB/s-prefetched")
	b.ReportMetric(mb/without.Seconds(), "MB/s-baseline")
}

// BenchmarkSequentialReadahead is the same measure for the read-ahead
// the learned prefetch shares its workers with: a sequential read of
// the cold input with read-ahead on and off.
func BenchmarkSequentialReadahead(b *testing.B) {
	size := int64(256 << 20)
	d := benchLearnDirs(b)
	pages := int(size / DefaultPageSize)
	writeLearnBenchInput(b, d, pages)
	seq := make([]int, pages)
	for i := range seq {
		seq[i] = i
	}
	run := func(readahead int64) time.Duration {
		opts := Options{Backing: d.backing, PageSize: DefaultPageSize, Readahead: readahead}
		dropBackingCache(b, filepath.Join(d.backing, "input"))
		fs, stop := d.startSized(b, "", size+64<<20, 64<<20, opts)
		defer stop()
		start := time.Now()
		readLearnBench(b, fs, seq)
		return time.Since(start)
	}
	b.ResetTimer()
	var with, without time.Duration
	for range b.N {
		with += run(DefaultReadahead)
		without += run(-1)
	}
	b.StopTimer()
	reportLearned(b, size, with, without)
}

func benchLearnDirs(b *testing.B) learnDirs {
	dir := os.Getenv("IOWARP_LEARN_BENCH_DIR")
	if dir == "" {
		return newLearnDirs(b)
	}
	dir, err := os.MkdirTemp(dir, "learn-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	d := learnDirs{backing: filepath.Join(dir, "backing"), nvme: filepath.Join(dir, "nvme")}
	if err := os.Mkdir(d.backing, 0o755); err != nil {
		b.Fatal(err)
	}
	return d
}

// writeLearnBenchInput writes pages pages of random bytes, a page at a
// time (the input may be larger than memory should hold twice).
func writeLearnBenchInput(b testing.TB, d learnDirs, pages int) {
	f, err := os.Create(filepath.Join(d.backing, "input"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, DefaultPageSize)
	rng := rand.New(rand.NewSource(9))
	for range pages {
		rng.Read(buf)
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// dropBackingCache drops the file from the page cache: a cold input.
func dropBackingCache(b testing.TB, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

func readLearnBench(b testing.TB, fs *FS, order []int) {
	h, _, err := fs.Open("input", unix.O_RDONLY, 0, Cred{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	buf := make([]byte, DefaultPageSize)
	for _, p := range order {
		if n, err := h.ReadAt(buf, int64(p)*DefaultPageSize); err != nil || n != len(buf) {
			b.Fatalf("read page %d: %d, %v", p, n, err)
		}
	}
}
