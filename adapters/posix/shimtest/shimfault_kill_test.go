package shimtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestShimFaultClientKilled: a shim client killed -9 while it extends a
// file in a loop, next to another shim client that holds a lease of its
// own on another file. The daemon goes on serving: the other client
// extends its file on the fast path and its bytes are right; a new file
// is written and read through the kernel path and through the shim; the
// dead client's file holds what it wrote, exactly, up to its size. The
// capacity the dead client leased is given back as soon as the kernel
// released its fd: what is leased then is the other client's lease, as it
// was before the dead one started (the dead one may have spent its own
// to the last page, so the count of returned leases is no measure), and
// once both are gone nothing stays leased and the RAM tier holds only
// pages.
func TestShimFaultClientKilled(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "256MiB", "1GiB", "")
	d.start()
	other := startWriter(t, bin, filepath.Join(d.dir, "other.bin"))
	other.expect("w 3145733", "ok 3145733")
	// The other client's lease, once its refills are done (it is idle:
	// more than half a step is left, so it stays as it is).
	base, ok := d.waitStat(func(st faultStat) bool { return *st.Pool.LeaseBytes >= 32<<20 })
	if !ok {
		t.Fatalf("the other client holds no lease of half a step: %v", base)
	}
	victimPath := filepath.Join(d.dir, "victim.bin")
	victim := startWriter(t, bin, victimPath)
	victim.expect("w 1048576", "ok 1048576")
	if st := d.stat(); *st.Pool.LeaseBytes <= *base.Pool.LeaseBytes {
		t.Fatalf("the second client got no lease: %v (with the first alone: %v)", st, base)
	}
	victim.expect("loop", "looping")
	// Kill it in the middle of its extends: once they reach 16 MiB.
	if _, ok := d.waitStat(func(faultStat) bool {
		st, err := os.Stat(victimPath)
		return err == nil && st.Size() > 16<<20
	}); !ok {
		t.Fatalf("the looping writer did not reach 16 MiB")
	}
	victim.kill()
	// Once the kernel released its fd (open_files drops), its lease comes
	// back (within the wait: the release of the grant and of the handle
	// are not one step, and a refill the dead client asked for may land
	// between them), and the other client's is untouched.
	st, ok := d.waitStat(func(st faultStat) bool {
		return st.OpenFiles == base.OpenFiles && *st.Pool.LeaseBytes == *base.Pool.LeaseBytes
	})
	if !ok && st.OpenFiles != base.OpenFiles {
		t.Fatalf("the dead client's fd was not released: %v (before it started: %v)", st, base)
	}
	if *st.Pool.LeaseBytes != *base.Pool.LeaseBytes || *st.Pool.LeasesBack > *base.Pool.LeasesBack+1 {
		t.Fatalf("after the dead client's release: %v; want the other client's lease alone, as before the victim started: %v", st, base)
	}
	if msg := st.overCapacity(); msg != "" {
		t.Fatal(msg)
	}
	size := requirePattern(t, "the dead client's file", victimPath, 16<<20)
	if fi, err := os.Stat(victimPath); err != nil || fi.Size() != size {
		t.Fatalf("stat of the dead client's file: %v %v, read %d bytes", fi, err, size)
	}

	// The daemon serves the other client and new ones.
	other.expect("w 5242881", "ok 8388614")
	if r := other.close(); r.FastWrite < 6<<20 {
		t.Fatalf("the live client's writes left the fast path: %+v", r)
	}
	requirePattern(t, "the live client's file", filepath.Join(d.dir, "other.bin"), 8388614)
	if err := os.WriteFile(filepath.Join(d.dir, "kernel.bin"), patBytes(3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	requirePattern(t, "a file written through the kernel path after the kill", filepath.Join(d.dir, "kernel.bin"), 3<<20)
	fresh := startWriter(t, bin, filepath.Join(d.dir, "fresh.bin"))
	fresh.expect("w 4194305", "ok 4194305")
	requireFastWrites(t, fresh.close(), 4194305)
	requirePattern(t, "a file written by a new shim client after the kill", filepath.Join(d.dir, "fresh.bin"), 4194305)
	// The dead client's file: its pages go back to the backing store on
	// an fsync from another process, and a new shim client extends it on
	// the fast path again (the table was reset at the release: a writer
	// count the dead one left inside a page no longer holds shims off).
	syncFile(t, victimPath)
	requirePattern(t, "the dead client's file in the backing dir after an fsync", filepath.Join(d.back, "victim.bin"), size)
	again := startWriter(t, bin, victimPath)
	again.expect("w 4194305", "ok 4194305")
	requireFastWrites(t, again.close(), 4194305)

	// Everyone gone: no lease left, the RAM tier holds pages only.
	st, ok = d.waitStat(func(st faultStat) bool {
		r := st.Pool.Tiers[0]
		return *st.Pool.LeaseBytes == 0 && r.Used == r.Blobs<<20
	})
	if !ok {
		r := st.Pool.Tiers[0]
		t.Fatalf("with every client gone: %d bytes leased, RAM tier uses %d bytes for %d pages", *st.Pool.LeaseBytes, r.Used, r.Blobs)
	}
	d.term()
	for name, n := range map[string]int64{"other.bin": 8388614, "fresh.bin": 4194305, "victim.bin": 4194305} {
		if got := requirePattern(t, "backing after the clean stop", filepath.Join(d.back, name), n); got != n {
			t.Fatalf("%s: %d bytes in the backing dir, want %d", name, got, n)
		}
	}
}

// syncFile is fsync(2) of p from this process (no shim).
func syncFile(t *testing.T, p string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", p, err)
	}
}

// TestShimFaultClientKilledFullTier: a shim client killed -9 while it
// extends a file in a RAM-only tier that is full (its writes wait on the
// kernel path for the slow write-back to free room), next to another shim
// writer bursting past the tier too: the other writer's file is complete,
// the dead one's exact up to its size, and once both are gone nothing is
// leased and the tier holds pages only, never more than its capacity.
func TestShimFaultClientKilledFullTier(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "16MiB", "", "backing_bandwidth: 20MiB/s\n")
	d.start()
	victimPath := filepath.Join(d.dir, "victim.bin")
	victim := startWriter(t, bin, victimPath)
	victim.expect("loop", "looping")
	other := startWriter(t, bin, filepath.Join(d.dir, "other.bin"))
	const n = 24<<20 + 5
	fmt.Fprintf(other.in, "w %d\n", n)
	// Kill the victim once the tier is full and it is past 8 MiB.
	if st, ok := d.waitStat(func(st faultStat) bool {
		fi, err := os.Stat(victimPath)
		r := st.Pool.Tiers[0]
		return err == nil && fi.Size() > 8<<20 && r.Used+2<<20 > r.Capacity
	}); !ok {
		t.Fatalf("the tier did not fill: %v", st)
	}
	victim.kill()
	if r := other.close(); r.FastWrite+r.KernelWrite != n {
		t.Fatalf("the other writer: %+v, want %d bytes written", r, n)
	}
	st, ok := d.waitStat(func(st faultStat) bool {
		r := st.Pool.Tiers[0]
		return st.OpenFiles == 0 && *st.Pool.LeaseBytes == 0 && r.Used == r.Blobs<<20
	})
	if !ok {
		t.Fatalf("with both clients gone: %v", st)
	}
	if msg := st.overCapacity(); msg != "" {
		t.Fatal(msg)
	}
	if got := requirePattern(t, "the other writer's file", filepath.Join(d.dir, "other.bin"), n); got != n {
		t.Fatalf("the other writer's file: %d bytes, want %d", got, n)
	}
	size := requirePattern(t, "the dead client's file", victimPath, 8<<20)
	d.term()
	if got := requirePattern(t, "the dead client's file in the backing dir", filepath.Join(d.back, "victim.bin"), size); got != size {
		t.Fatalf("backing victim.bin: %d bytes, the mount had %d", got, size)
	}
	requirePattern(t, "the other writer's file in the backing dir", filepath.Join(d.back, "other.bin"), n)
}

// TestShimFaultClientKilledForked: a shim client that forked a child
// (which keeps the fd, and the maps, but never writes through them: a
// forked child of the shim takes the kernel path) is killed -9 in the
// middle of extending the file. The kernel releases no fd (the child
// holds it), so the daemon tells the client's end by its process: its
// lease is given back while the child lives, and a new shim client
// extends the file on the fast path.
func TestShimFaultClientKilledForked(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "256MiB", "", "")
	d.start()
	p := filepath.Join(d.dir, "forked.bin")
	w := startWriter(t, bin, p)
	w.expect("w 1048576", "ok 1048576")
	var child int
	if line := w.do("fork"); !strings.HasPrefix(line, "forked ") {
		t.Fatalf("faultw fork: %q", line)
	} else if child, _ = strconv.Atoi(strings.TrimPrefix(line, "forked ")); child <= 0 {
		t.Fatalf("faultw fork: %q", line)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	if st := d.stat(); *st.Pool.LeaseBytes == 0 {
		t.Fatalf("no lease while the client writes: %v", st)
	}
	w.expect("loop", "looping")
	if _, ok := d.waitStat(func(faultStat) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Size() > 8<<20
	}); !ok {
		t.Fatal("the looping writer did not reach 8 MiB")
	}
	w.cmd.Process.Signal(syscall.SIGKILL) // its child keeps stderr open: no Wait yet
	st, ok := d.waitStat(func(st faultStat) bool {
		r := st.Pool.Tiers[0]
		return *st.Pool.LeaseBytes == 0 && r.Used == r.Blobs<<20
	})
	if !ok {
		t.Fatalf("the lease of a client killed -9 stays while its forked child holds the fd: %v", st)
	}
	size := requirePattern(t, "the dead client's file", p, 8<<20)
	again := startWriter(t, bin, p)
	again.expect("w 4194305", "ok 4194305")
	requireFastWrites(t, again.close(), 4194305)
	syscall.Kill(child, syscall.SIGKILL)
	w.cmd.Wait()
	t.Logf("the dead client wrote %d bytes", size)
}
