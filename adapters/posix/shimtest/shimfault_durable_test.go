package shimtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestShimFaultFsyncKill: files extended under the shim in new pages (the
// lease), one fsync'ed and one fdatasync'ed, then extended further without
// a sync, and the daemon killed -9. What the syncs returned 0 for is on the
// backing store, bytes and size: the fsync'ed prefix is there byte for
// byte, and the file is not shorter. A daemon started again on the same
// backing and file tier (its replay of the dead one's journal) keeps them
// so, and a clean stop of it leaves them on the backing store.
func TestShimFaultFsyncKill(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "256MiB", "1GiB", "")
	d.start()
	// Not whole pages, the second step from an offset inside a page.
	const n1, n2, unsynced = 5<<20 + 12345, 3<<20 + 1, 2<<20 + 7
	synced := map[string]int64{}
	var ws []*faultWriter
	for _, sync := range []string{"fsync", "fdatasync"} {
		name := sync + ".bin"
		w := startWriter(t, bin, filepath.Join(d.dir, name))
		w.expect(fmt.Sprintf("w %d", n1), fmt.Sprintf("ok %d", n1))
		w.expect(fmt.Sprintf("w %d", n2), fmt.Sprintf("ok %d", n1+n2))
		w.expect(sync, "synced")
		w.expect(fmt.Sprintf("w %d", unsynced), fmt.Sprintf("ok %d", n1+n2+unsynced))
		synced[name] = n1 + n2
		ws = append(ws, w)
	}
	// The shims placed the new pages themselves (most of them: one that
	// meets the daemon's harvest goes to the kernel).
	if st := d.stat(); *st.Pool.LeaseAdopted < 2*(n1+n2)>>20/2 {
		t.Fatalf("the daemon adopted %d pages placed by the shims, want at least %d", *st.Pool.LeaseAdopted, 2*(n1+n2)>>20/2)
	}
	d.kill()
	for _, w := range ws {
		w.kill()
	}
	for name, n := range synced {
		requirePattern(t, "backing after kill -9 of the daemon", filepath.Join(d.back, name), n)
	}
	d.start()
	for name, n := range synced {
		requirePattern(t, "on the mount of a daemon started after the kill", filepath.Join(d.dir, name), n)
	}
	d.term()
	for name, n := range synced {
		requirePattern(t, "backing after that daemon's clean stop", filepath.Join(d.back, name), n)
	}
}

// TestShimFaultFsyncFullTier: a file extended under the shim past the
// RAM tier (its pages go down to the file tier, the lease runs dry and
// writes fall back to the kernel path), fsync'ed, then the daemon killed
// -9: every byte and the size are on the backing store, and the journal
// of the file tier leaves nothing to replay that would change them.
func TestShimFaultFsyncFullTier(t *testing.T) {
	bin := cc(t, "faultw", "gcc")
	setup(t)
	d := newFaultDaemon(t, "16MiB", "1GiB", "")
	d.start()
	const n = 40<<20 + 4097
	p := filepath.Join(d.dir, "big.bin")
	w := startWriter(t, bin, p)
	w.expect(fmt.Sprintf("w %d", n), fmt.Sprintf("ok %d", n))
	w.expect("fsync", "synced")
	d.kill()
	w.kill()
	if got := requirePattern(t, "backing after fsync + kill -9", filepath.Join(d.back, "big.bin"), n); got != n {
		t.Fatalf("backing file is %d bytes, want %d", got, n)
	}
	d.start()
	if st, err := os.Stat(p); err != nil || st.Size() != n {
		t.Fatalf("stat after the restart: %v %v, want size %d", st, err, n)
	}
	requirePattern(t, "on the mount after the restart", p, n)
	d.term()
}
