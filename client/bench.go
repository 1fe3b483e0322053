package client

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// BenchResult is what Bench measures.
type BenchResult struct {
	SteadyP50, SteadyP99 time.Duration // empty task, back to back
	IdleP50, IdleP99     time.Duration // empty task after 2 ms of idleness
	Tasks1, Tasks4       float64       // empty tasks/s, 1 and 4 clients (synchronous calls)
	Pipelined1           float64       // empty tasks/s, 1 client, 32 calls in flight
	Xfer                 []XferResult
}

// XferResult is Put/Get throughput of one size against memcpy.
type XferResult struct {
	Size               int
	Put, Get, Memcpy   float64 // bytes/s
	PutRatio, GetRatio float64 // against Memcpy
	// PutBuf, GetBuf use buffers in the shared segment (PutBuffer,
	// GetBuffer): no copy in the client.
	PutBuf, GetBuf float64
}

// Bench measures the ipc path to a daemon; connect opens one more client
// (for the 4-client run). d scales the time spent per measurement.
func Bench(connect func() (*Client, error), d time.Duration) (*BenchResult, error) {
	c, err := connect()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r := &BenchResult{}
	if r.SteadyP50, r.SteadyP99, err = latency(c, d, 0); err != nil {
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
		o, err := connect()
		if err != nil {
			return nil, err
		}
		defer o.Close()
		cs = append(cs, o)
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
	m, err := c.method("admin", "noop")
	if err != nil {
		return 0, err
	}
	ic := c.IPC()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		var calls [32]*ipcCall
		for i := range calls {
			if calls[i], err = ic.Start(m, span0, span0, span0); err != nil {
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

func xfer(c *Client, size int, d time.Duration) (XferResult, error) {
	x := XferResult{Size: size}
	b, err := c.Bucket("bench-ipc")
	if err != nil {
		return x, err
	}
	defer b.Close()
	src := make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, size)
	x.Memcpy = throughput(size, d, func() error { copy(dst, src); return nil })
	name := fmt.Sprintf("blob-%d", size)
	x.Put = throughput(size, d, func() error { return b.Put(name, src) })
	var gerr error
	x.Get = throughput(size, d, func() error {
		n, err := b.PartialGet(name, 0, dst)
		if err == nil && n != size {
			err = io.ErrShortBuffer
		}
		if err != nil {
			gerr = err
		}
		return err
	})
	x.PutRatio, x.GetRatio = x.Put/x.Memcpy, x.Get/x.Memcpy
	buf, err := c.Alloc(size)
	if err != nil {
		return x, err
	}
	defer buf.Free()
	copy(buf.Bytes(), src)
	x.PutBuf = throughput(size, d, func() error { return b.PutBuffer(name, buf, size) })
	x.GetBuf = throughput(size, d, func() error { _, err := b.GetBuffer(name, buf); return err })
	return x, gerr
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
	fmt.Fprintf(w, "empty task round trip, steady:     median %v  p99 %v\n", r.SteadyP50, r.SteadyP99)
	fmt.Fprintf(w, "empty task round trip, after idle: median %v  p99 %v\n", r.IdleP50, r.IdleP99)
	fmt.Fprintf(w, "tasks/s: 1 client %.0f   4 clients %.0f   1 client pipelined (32 in flight) %.0f\n",
		r.Tasks1, r.Tasks4, r.Pipelined1)
	for _, x := range r.Xfer {
		fmt.Fprintf(w, "%7d B: put %.2f GB/s (%.2fx memcpy)  get %.2f GB/s (%.2fx memcpy)  memcpy %.2f GB/s\n",
			x.Size, x.Put/1e9, x.PutRatio, x.Get/1e9, x.GetRatio, x.Memcpy/1e9)
		fmt.Fprintf(w, "%7d B, shared buffers: put %.2f GB/s (%.2fx)  get %.2f GB/s (%.2fx)\n",
			x.Size, x.PutBuf/1e9, x.PutBuf/x.Memcpy, x.GetBuf/1e9, x.GetBuf/x.Memcpy)
	}
}
