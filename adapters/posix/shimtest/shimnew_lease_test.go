package shimtest

import (
	"path/filepath"
	"testing"
)

// TestLeaseRefillIPC: a write of more new pages than the lease holds (the
// first lease of a file is a 64 MiB step) asks the daemon for more over
// runtime/ipc and lands in shared memory whole, instead of taking the
// kernel path until the next harvest; the file is right on the mount.
func TestLeaseRefillIPC(t *testing.T) {
	setup(t)
	dir, _, _ := startOwnDaemon(t)
	const n = 96 << 20
	src, data := randFile(t, t.TempDir(), n)
	_, r := run(t, dir, true, nil, "dd", "if="+src, "of=big.bin", "bs=96M", "iflag=fullblock", "status=none")
	requireOurs(t, r)
	if r.FastWrite != n || r.KernelWrite != 0 || r.IPCLease == 0 {
		t.Fatalf("one write of %d new bytes: want it fast after a lease refill over ipc: %+v", n, r)
	}
	requireSame(t, "on the mount", filepath.Join(dir, "big.bin"), data)
}
