package shimtest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestShimFaultClientKilled: a shim client killed -9 while it extends a
// file in a loop, next to another shim client that holds a lease of its
// own on another file. The daemon goes on serving: the other client
// extends its file on the fast path and its bytes are right; a new file
// is written and read through the kernel path and through the shim; the
// dead client's file holds what it wrote, exactly, up to its size. The
// capacity the dead client leased is given back as soon as the kernel
// released its fd (one lease returned while the other client still holds
// its own), and once both are gone nothing stays leased and the RAM tier
// holds only pages.
func TestShimFaultClientKilled(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "128MiB", "1GiB", "")
	d.start()
	other := startWriter(t, bin, filepath.Join(d.dir, "other.bin"))
	other.expect("w 3145733", "ok 3145733")
	victimPath := filepath.Join(d.dir, "victim.bin")
	victim := startWriter(t, bin, victimPath)
	victim.expect("w 1048576", "ok 1048576")
	before := d.stat()
	if *before.Pool.LeaseBytes <= 0 {
		t.Fatalf("no lease held while two shim writers run: %+v", before.Pool)
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
	st, ok := d.waitStat(func(st faultStat) bool { return *st.Pool.LeasesBack > *before.Pool.LeasesBack })
	if !ok {
		t.Fatalf("the dead client's lease was not given back: %+v (before the kill %+v)", st.Pool, before.Pool)
	}
	if *st.Pool.LeasesBack != *before.Pool.LeasesBack+1 {
		t.Fatalf("%d leases returned after one client died (%d before)", *st.Pool.LeasesBack, *before.Pool.LeasesBack)
	}
	if *st.Pool.LeaseBytes <= 0 {
		t.Fatalf("the live client's lease went with the dead one's: %+v", st.Pool)
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
	requirePattern(t, "the dead client's file in the backing dir", filepath.Join(d.back, "victim.bin"), size)
	for name, n := range map[string]int64{"other.bin": 8388614, "fresh.bin": 4194305} {
		if got := requirePattern(t, "backing after the clean stop", filepath.Join(d.back, name), n); got != n {
			t.Fatalf("%s: %d bytes in the backing dir, want %d", name, got, n)
		}
	}
}
