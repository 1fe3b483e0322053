package shimtest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestShimFaultFullTier: a burst through the shim of three writers at
// once, five times what the only tier (RAM, 16 MiB, no tier below it)
// holds. Leases are never more than the room left, so the writers fall
// back to the kernel path, where a write waits for the write-back to
// free room: nothing is lost (the files on the mount and, after the
// drain, in the backing dir are what was written), and iowarp stat,
// sampled all through the burst, never shows the tier over its capacity
// nor more leased than it uses.
func TestShimFaultFullTier(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "16MiB", "", "backing_bandwidth: 40MiB/s\n")
	d.start()
	const writers, n = 3, 27<<20 + 333
	stop := make(chan struct{})
	sampled := make(chan sampleResult, 1)
	go func() { sampled <- sampleStat(d, stop) }()
	var wg sync.WaitGroup
	reports := make([]Report, writers)
	ws := make([]*faultWriter, writers)
	for i := range ws {
		ws[i] = startWriter(t, bin, filepath.Join(d.dir, fmt.Sprintf("burst%d.bin", i)))
	}
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two steps: the second starts inside a page.
			fmt.Fprintf(w.in, "w %d\nw %d\n", n/2, n-n/2)
			reports[i] = w.close()
		}()
	}
	wg.Wait()
	close(stop)
	res := <-sampled
	t.Logf("iowarp stat during the burst: %d samples, %d failed, highest RAM tier use %d bytes", res.samples, res.failed, res.highest)
	if res.worst != "" {
		t.Fatalf("iowarp stat during the burst: %s", res.worst)
	}
	if res.samples == 0 {
		t.Fatalf("iowarp stat answered none of %d calls during the burst", res.failed)
	}
	var fast, kernel int64
	for i, r := range reports {
		requireOurs(t, r)
		if r.FastWrite+r.KernelWrite != n {
			t.Fatalf("writer %d: %d bytes fast + %d kernel, want %d", i, r.FastWrite, r.KernelWrite, n)
		}
		fast += r.FastWrite
		kernel += r.KernelWrite
	}
	if fast == 0 || kernel == 0 {
		t.Fatalf("want the fast path and the fallback both to carry the burst: %d fast, %d kernel", fast, kernel)
	}
	for i := range ws {
		p := filepath.Join(d.dir, fmt.Sprintf("burst%d.bin", i))
		if got := requirePattern(t, "on the mount after the burst", p, n); got != n {
			t.Fatalf("%s: %d bytes, want %d", p, got, n)
		}
	}
	st := d.stat()
	if msg := st.overCapacity(); msg != "" {
		t.Fatal(msg)
	}
	d.term()
	want := sum(patBytes(n))
	for i := range ws {
		p := filepath.Join(d.back, fmt.Sprintf("burst%d.bin", i))
		got, err := os.ReadFile(p)
		if err != nil || sum(got) != want {
			t.Fatalf("backing %s after the drain: %d bytes (want %d), sha256 equal %v, %v", p, len(got), n, sum(got) == want, err)
		}
	}
}

// sampleResult is what sampleStat saw.
type sampleResult struct {
	samples, failed int
	highest         int64  // the RAM tier's highest use
	worst           string // the first sample over a capacity ("" if none)
}

// sampleStat reads iowarp stat of d in a loop until stop is closed (it
// runs in a goroutine of its own: a failed stat is counted, not fatal).
func sampleStat(d *faultDaemon, stop chan struct{}) sampleResult {
	var r sampleResult
	for {
		select {
		case <-stop:
			return r
		default:
		}
		st, err := d.statNow()
		if err != nil {
			r.failed++
			continue
		}
		r.samples++
		r.highest = max(r.highest, st.Pool.Tiers[0].Used)
		if msg := st.overCapacity(); msg != "" && r.worst == "" {
			r.worst = msg
		}
	}
}
