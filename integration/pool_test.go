package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestCapacity writes 1 GiB across many files through a 64 MiB RAM tier and
// a 256 MiB file tier, reads every byte back, and checks, while it runs,
// that `iowarp stat` never shows a tier above its capacity.
func TestCapacity(t *testing.T) {
	m := startMount(t, config{ram: "64MiB", file: "256MiB"})
	const (
		nfiles = 64
		size   = 16 << 20 // 64 × 16 MiB = 1 GiB
	)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var samples int
	var maxUsed []int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st, err := m.tryStats()
			if err != nil {
				t.Error(err)
				return
			}
			samples++
			if maxUsed == nil {
				maxUsed = make([]int64, len(st.Pool.Tiers))
			}
			for i, ts := range st.Pool.Tiers {
				if ts.Used > ts.Capacity {
					t.Errorf("tier %s: used %d > capacity %d", ts.Name, ts.Used, ts.Capacity)
				}
				maxUsed[i] = max(maxUsed[i], ts.Used)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	sums := make([]string, nfiles)
	for i := range nfiles {
		sums[i] = writeRandomFile(t, m.path(fmt.Sprintf("c%02d.bin", i)), size, uint64(100+i))
	}
	for i := range nfiles {
		if got := sha256File(t, m.path(fmt.Sprintf("c%02d.bin", i))); got != sums[i] {
			t.Errorf("c%02d.bin: read back sha256 %s, want %s", i, got, sums[i])
		}
	}
	close(stop)
	wg.Wait()
	st := m.waitDrained(2 * time.Minute)
	for i := range nfiles {
		if got := sha256File(t, filepath.Join(m.backing, fmt.Sprintf("c%02d.bin", i))); got != sums[i] {
			t.Errorf("backing c%02d.bin: sha256 %s, want %s", i, got, sums[i])
		}
	}
	t.Logf("%d stat samples; peak use per tier %v of %v; %d evicted/%d demoted", samples, maxUsed,
		[]int64{st.Pool.Tiers[0].Capacity, st.Pool.Tiers[1].Capacity}, st.Pool.Tiers[1].Evicted, st.Pool.Tiers[0].Demoted)
	if samples < 3 {
		t.Errorf("only %d stat samples: the capacity check did not really run", samples)
	}
}

// TestDurability: what fsync returned 0 for is on the backing store after
// kill -9 of the daemon, with its exact size and sha256, undamaged by the
// writes in flight at the kill, and a new mount over the same backing
// directory shows it.
func TestDurability(t *testing.T) {
	m := startMount(t, config{ram: "64MiB", file: "512MiB"})
	sizes := map[string]int64{"empty": 0, "small": 1000, "page": 1 << 20, "odd": 3<<20 + 4097, "large": 40 << 20}
	want := map[string]string{}
	for name, size := range sizes {
		p := m.path(name)
		if size == 0 {
			sh(t, "/", "dd if=/dev/null of="+p+" conv=fsync status=none")
		} else {
			sh(t, "/", fmt.Sprintf("head -c %d /dev/urandom | dd of=%s bs=256k iflag=fullblock conv=fsync status=none", size, p))
		}
		want[name] = sha256File(t, p)
	}
	// python3 with os.fsync, then an append that is fsynced too
	sh(t, "/", fmt.Sprintf(`python3 -c '
import os
with open(%q, "wb") as f:
    f.write(b"x" * 123457); os.fsync(f.fileno())
with open(%q, "ab") as f:
    f.write(b"y" * 10); os.fsync(f.fileno())
'`, m.path("py"), m.path("py")))
	sizes["py"] = 123467
	want["py"] = sha256File(t, m.path("py"))

	// In flight at the kill: a large unsynced write to a new file and an
	// unsynced overwrite of a copy of nothing fsynced.
	inflight := make(chan struct{})
	go func() {
		defer close(inflight)
		sh(t, "/", "dd if=/dev/zero of="+m.path("inflight")+" bs=1M count=200 status=none 2>/dev/null || true")
	}()
	time.Sleep(300 * time.Millisecond)
	m.kill9()
	<-inflight

	for name, size := range sizes {
		p := filepath.Join(m.backing, name)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("backing %s: %v", name, err)
			continue
		}
		if st.Size() != size {
			t.Errorf("backing %s: size %d, want %d", name, st.Size(), size)
		}
		if got := sha256File(t, p); got != want[name] {
			t.Errorf("backing %s: sha256 %s, want %s", name, got, want[name])
		}
	}

	m2 := startMount(t, config{ram: "64MiB", file: "512MiB", backing: m.backing})
	for name, size := range sizes {
		p := m2.path(name)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("restarted mount %s: %v", name, err)
			continue
		}
		if st.Size() != size {
			t.Errorf("restarted mount %s: size %d, want %d", name, st.Size(), size)
		}
		if got := sha256File(t, p); got != want[name] {
			t.Errorf("restarted mount %s: sha256 %s, want %s", name, got, want[name])
		}
	}
}

// TestBurstAbsorption: with write-back throttled to 16 MiB/s, a checkpoint
// of 4× the RAM tier returns far faster than the backing store could take
// it, and the backing store then catches up with the exact content.
func TestBurstAbsorption(t *testing.T) {
	const (
		ram       = 32 << 20
		bandwidth = 16 << 20
		total     = 4 * ram
		nfiles    = 4
	)
	m := startMount(t, config{ram: "32MiB", file: "512MiB", bandwidth: "16MiB/s"})
	start := time.Now()
	sums := make([]string, nfiles)
	for i := range nfiles {
		sums[i] = writeRandomFile(t, m.path(fmt.Sprintf("ckpt.%d", i)), total/nfiles, uint64(i+1))
	}
	elapsed := time.Since(start)
	st := m.stats()
	backingTime := time.Duration(float64(total) / bandwidth * float64(time.Second))
	t.Logf("checkpoint of %d MiB written in %v (the throttled backing store needs %v); dirty right after: %d MiB",
		total>>20, elapsed.Round(time.Millisecond), backingTime, st.DirtyBytes>>20)
	if elapsed > backingTime/3 {
		t.Errorf("checkpoint took %v: not absorbed (the backing store alone needs %v)", elapsed, backingTime)
	}
	if st.DirtyBytes < total/4 {
		t.Errorf("only %d bytes dirty right after the burst: was the write-back really throttled?", st.DirtyBytes)
	}
	drainStart := time.Now()
	m.waitDrained(3 * time.Minute)
	t.Logf("drained in %v", time.Since(drainStart).Round(time.Millisecond))
	for i := range nfiles {
		p := filepath.Join(m.backing, fmt.Sprintf("ckpt.%d", i))
		if got := sha256File(t, p); got != sums[i] {
			t.Errorf("backing %s: sha256 %s, want %s", p, got, sums[i])
		}
	}
}

// TestCleanUnmount: after SIGTERM the backing directory holds exactly what
// the mount showed: names, sizes, contents, modes, symlinks.
func TestCleanUnmount(t *testing.T) {
	for _, mode := range []files.Mode{files.Writeback, files.Writethrough} {
		t.Run(string(mode), func(t *testing.T) {
			m := startMount(t, config{mode: string(mode), ram: "64MiB", file: "256MiB"})
			// some content present in the backing store before the mount
			os.WriteFile(filepath.Join(m.backing, "preexisting"), []byte("old"), 0o644)
			sh(t, m.dir, `
mkdir -p a/b/c d
chmod 0750 d
echo hello > a/b/c/hello.txt
head -c 5000000 /dev/urandom > a/big
head -c 3000 /dev/urandom > a/small; chmod 0600 a/small
ln -s b/c/hello.txt a/link
ln -s ../missing a/dangling
truncate -s 10M sparse
echo x > to-rename; mv to-rename renamed
echo gone > gone; rm gone
echo v1 > over; echo v2 > over.new; mv over.new over
head -c 70000 /dev/urandom > trunc; truncate -s 1234 trunc
echo exe > tool; chmod 0755 tool
mkdir empty
echo new >> preexisting
cp -a a/b copyb
mv a/b a/b2
`)
			before := walkTree(t, m.dir)
			if err := m.stop(); err != nil {
				t.Fatalf("iowarp exited with %v:\n%s", err, m.log())
			}
			compareTrees(t, "mount", before, "backing", walkTree(t, m.backing))
		})
	}
}

// TestStatText checks the human output of `iowarp stat`.
func TestStatText(t *testing.T) {
	m := startMount(t, config{ram: "64MiB", file: "128MiB"})
	os.WriteFile(m.path("f"), bytes.Repeat([]byte("z"), 3<<20), 0o644)
	out, code := run(m.bin, "stat", m.dir, "--control-dir", m.ctl)
	if code != 0 {
		t.Fatalf("iowarp stat: exit %d\n%s", code, out)
	}
	for _, want := range []string{"mode writeback", "TIER", "CAPACITY", "DIRTY", "ram", "nvme", "64MiB", "128MiB", "hits", "misses", "flush backlog"} {
		if !strings.Contains(out, want) {
			t.Errorf("iowarp stat output lacks %q:\n%s", want, out)
		}
	}
	f, _ := os.Open(m.path("f"))
	io.Copy(io.Discard, f)
	f.Close()
	if st := m.stats(); st.ReadHits+st.ReadMisses == 0 || st.BytesWritten < 3<<20 {
		t.Errorf("stats do not count the I/O: %+v", st)
	}
}
