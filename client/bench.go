package client

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/iowarp/iowarp/internal/sys"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// BenchResult is what Bench measures.
type BenchResult struct {
	SteadyP50, SteadyP99 time.Duration // empty task, back to back, daemon spinning
	SleepP50, SleepP99   time.Duration // empty task, back to back, daemon sleeping (DaemonSleeps)
	IdleP50, IdleP99     time.Duration // empty task after 2 ms of idleness
	Tasks1, Tasks4       float64       // empty tasks/s, 1 and 4 clients (synchronous calls)
	Pipelined1           float64       // empty tasks/s, 1 client, 32 calls in flight
	Xfer                 []XferResult
}

// BenchSet is the memory each transfer measurement rotates through, so
// that neither memcpy nor Put/Get copies from or into the cache: twice a
// 32 MiB L3.
const BenchSet = 64 << 20

// XferResult is Put/Get throughput of one size against memcpy, all in
// bytes/s. Memcpy copies between source and destination buffers rotated
// over BenchSet; Put reads the same rotated sources and Get writes the
// same rotated destinations, and both rotate over as many blobs.
type XferResult struct {
	Size int
	// Memcpy is the baseline; MemcpyHot copies one buffer pair again and
	// again (cache-hot, shown for reference only).
	Memcpy, MemcpyHot float64
	// Put, Get copy from / into Go slices: one copy in the client, one in
	// the daemon.
	Put, Get           float64
	PutRatio, GetRatio float64 // against Memcpy
	// PutBuf, GetBuf use one buffer in the shared segment (PutBuffer,
	// GetBuffer, the zero-copy API): the daemon's copy only.
	PutBuf, GetBuf           float64
	PutBufRatio, GetBufRatio float64
	// TierWrite, TierRead are that copy alone: pwrite / pread between the
	// rotated buffers and a memfd (what the RAM tier is), the bound of
	// PutBuf and GetBuf.
	TierWrite, TierRead float64
}

// Bench measures the ipc path to the daemon o names: it opens up to five
// clients (one asking the daemon to sleep rather than spin, three more for
// the 4-client rate). d scales the time spent per measurement.
func Bench(o Options, d time.Duration) (*BenchResult, error) {
	c, err := Connect(o)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := &BenchResult{}
	if r.SteadyP50, r.SteadyP99, err = latency(c, d, 0); err != nil {
		return nil, err
	}
	if err := r.sleeping(o, d); err != nil {
		return nil, err
	}
	if r.IdleP50, r.IdleP99, err = latency(c, d, 2*time.Millisecond); err != nil {
		return nil, err
	}
	if r.Tasks1, err = rate([]*Client{c}, d); err != nil {
		return nil, err
	}
	if r.Pipelined1, err = pipelined(c, d); err != nil {
		return nil, err
	}
	cs := []*Client{c}
	for len(cs) < 4 {
		more, err := Connect(o)
		if err != nil {
			return nil, err
		}
		defer more.Close()
		cs = append(cs, more)
	}
	if r.Tasks4, err = rate(cs, d); err != nil {
		return nil, err
	}
	for _, size := range []int{4 << 10, 1 << 20} {
		x, err := xfer(c, size, d)
		if err != nil {
			return nil, err
		}
		r.Xfer = append(r.Xfer, x)
	}
	return r, nil
}

// sleeping measures the steady round trip of a client whose daemon-side
// poller does not spin.
func (r *BenchResult) sleeping(o Options, d time.Duration) error {
	o.DaemonSleeps = true
	c, err := Connect(o)
	if err != nil {
		return err
	}
	defer c.Close()
	r.SleepP50, r.SleepP99, err = latency(c, d, 0)
	return err
}

func latency(c *Client, d, idle time.Duration) (p50, p99 time.Duration, err error) {
	var lat []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) || len(lat) < 100 {
		if idle > 0 {
			time.Sleep(idle)
		}
		t0 := time.Now()
		if err := c.Noop(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, time.Since(t0))
		if idle > 0 && len(lat) >= 300 {
			break
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

func rate(cs []*Client, d time.Duration) (float64, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int
	var first error
	start := time.Now()
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for end := start.Add(d); time.Now().Before(end); n++ {
				if err := c.Noop(); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds(), first
}

func pipelined(c *Client, d time.Duration) (float64, error) {
	m, err := c.c.Resolve(runtime.AdminModule, "noop")
	if err != nil {
		return 0, err
	}
	ic := c.IPC()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		var calls [32]*ipc.Call
		for i := range calls {
			if calls[i], err = ic.Start(m, ipc.Span{}, ipc.Span{}, ipc.Span{}); err != nil {
				return 0, err
			}
		}
		for _, k := range calls {
			if _, err := k.Wait(); err != nil {
				return 0, err
			}
		}
		n += len(calls)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// rotation is BenchSet split into n source and n destination buffers of
// size bytes, and n blob names.
type rotation struct {
	src, dst [][]byte
	names    []string
	i        int
}

func newRotation(size int) *rotation {
	n := max(2, BenchSet/2/size)
	r := &rotation{}
	srcs, dsts := make([]byte, n*size), make([]byte, n*size)
	for i := range srcs {
		srcs[i] = byte(i * 7)
	}
	for i := 0; i < n; i++ {
		r.src = append(r.src, srcs[i*size:(i+1)*size:(i+1)*size])
		r.dst = append(r.dst, dsts[i*size:(i+1)*size:(i+1)*size])
		r.names = append(r.names, fmt.Sprintf("blob-%d-%d", size, i))
	}
	return r
}

// next advances to the next buffers and blob.
func (r *rotation) next() int {
	r.i = (r.i + 1) % len(r.src)
	return r.i
}

func xfer(c *Client, size int, d time.Duration) (XferResult, error) {
	x := XferResult{Size: size}
	b, err := c.Bucket("bench-ipc")
	if err != nil {
		return x, err
	}
	defer b.Close()
	rot := newRotation(size)
	hot := rot.dst[0]
	x.MemcpyHot = throughput(size, d, func() error { copy(hot, rot.src[0]); return nil })
	x.Memcpy = throughput(size, d, func() error { i := rot.next(); copy(rot.dst[i], rot.src[i]); return nil })
	if err := tierCopy(&x, rot, d); err != nil {
		return x, err
	}
	for i := range rot.names { // create the blobs: their first write allocates
		if err := b.Put(rot.names[i], rot.src[i]); err != nil {
			return x, err
		}
	}
	var first error
	check := func(err error) error {
		if err != nil && first == nil {
			first = err
		}
		return err
	}
	x.Put = throughput(size, d, func() error { i := rot.next(); return check(b.Put(rot.names[i], rot.src[i])) })
	x.Get = throughput(size, d, func() error {
		i := rot.next()
		n, err := b.PartialGet(rot.names[i], 0, rot.dst[i])
		if err == nil && n != size {
			err = fmt.Errorf("get %s: %d bytes of %d: %w", rot.names[i], n, size, io.ErrShortBuffer)
		}
		return check(err)
	})
	buf, err := c.Alloc(size)
	if err != nil {
		return x, err
	}
	defer buf.Free()
	copy(buf.Bytes(), rot.src[0])
	x.PutBuf = throughput(size, d, func() error { return check(b.PutBuffer(rot.names[rot.next()], buf, size)) })
	x.GetBuf = throughput(size, d, func() error { _, err := b.GetBuffer(rot.names[rot.next()], buf); return check(err) })
	for _, name := range rot.names {
		check(b.Delete(name))
	}
	x.PutRatio, x.GetRatio = x.Put/x.Memcpy, x.Get/x.Memcpy
	x.PutBufRatio, x.GetBufRatio = x.PutBuf/x.Memcpy, x.GetBuf/x.Memcpy
	return x, first
}

// tierCopy measures the daemon's copy alone: pwrite and pread of the
// rotated buffers to and from a memfd.
func tierCopy(x *XferResult, rot *rotation, d time.Duration) error {
	f, err := sys.MemfdCreate("iowarp-bench-tier")
	if err != nil {
		return err
	}
	defer f.Close()
	size := int64(x.Size)
	write := func() error { i := rot.next(); _, err := f.WriteAt(rot.src[i], int64(i)*size); return err }
	for range rot.src { // allocate the pages, as the blobs' first Put does
		if err := write(); err != nil {
			return err
		}
	}
	x.TierWrite = throughput(x.Size, d, write)
	x.TierRead = throughput(x.Size, d, func() error { i := rot.next(); _, err := f.ReadAt(rot.dst[i], int64(i)*size); return err })
	return nil
}

// throughput runs f repeatedly for about d and returns bytes/s.
func throughput(size int, d time.Duration, f func() error) float64 {
	n := 0
	start := time.Now()
	for time.Since(start) < d || n < 3 {
		if f() != nil {
			return 0
		}
		n++
	}
	return float64(n*size) / time.Since(start).Seconds()
}

// Print writes r as a table.
func (r *BenchResult) Print(w io.Writer) {
	fmt.Fprintf(w, "empty task round trip, steady, daemon spinning: median %v  p99 %v\n", r.SteadyP50, r.SteadyP99)
	fmt.Fprintf(w, "empty task round trip, steady, daemon sleeping: median %v  p99 %v  (a futex wake-up per task)\n",
		r.SleepP50, r.SleepP99)
	fmt.Fprintf(w, "empty task round trip, after 2 ms idle:         median %v  p99 %v\n", r.IdleP50, r.IdleP99)
	fmt.Fprintf(w, "tasks/s: 1 client %.0f   4 clients %.0f   1 client pipelined (32 in flight) %.0f\n",
		r.Tasks1, r.Tasks4, r.Pipelined1)
	fmt.Fprintf(w, "transfers rotate over %d MiB of buffers and as many blobs (no cache-hot copies); memcpy likewise\n",
		BenchSet>>20)
	for _, x := range r.Xfer {
		fmt.Fprintf(w, "%7d B: memcpy %.2f GB/s (cache-hot, not the baseline: %.2f GB/s)\n", x.Size, x.Memcpy/1e9, x.MemcpyHot/1e9)
		fmt.Fprintf(w, "%7d B, Go slices (2 copies):     put %.2f GB/s (%.2fx memcpy)  get %.2f GB/s (%.2fx memcpy)\n",
			x.Size, x.Put/1e9, x.PutRatio, x.Get/1e9, x.GetRatio)
		fmt.Fprintf(w, "%7d B, shared buffer (1 copy):   put %.2f GB/s (%.2fx memcpy)  get %.2f GB/s (%.2fx memcpy)\n",
			x.Size, x.PutBuf/1e9, x.PutBufRatio, x.GetBuf/1e9, x.GetBufRatio)
		fmt.Fprintf(w, "%7d B, that copy alone (pwrite/pread of a memfd, the RAM tier): %.2f / %.2f GB/s (%.2fx / %.2fx memcpy)\n",
			x.Size, x.TierWrite/1e9, x.TierRead/1e9, x.TierWrite/x.Memcpy, x.TierRead/x.Memcpy)
	}
}
