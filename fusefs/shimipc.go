package fusefs

import (
	"crypto/hmac"
	"syscall"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// ShimHandle returns the daemon-side handle of the open that a shim's
// grant names, for the shim's misses sent through runtime/ipc (the fs
// module's pread and pwrite). It checks what the grant socket checks:
// pid and uid come from the ipc connection's SO_PEERCRED (never from the
// request), the token is recomputed from them, the inode and the access
// mode, and the grant must name a live open bound to exactly that. A
// write (or a lease, which is for writes) needs an open for writing that
// holds a read-write map (an O_WRONLY open gets one only where its uid
// may read the file; the shim's write hits are allowed there): then
// every other open of the inode bypasses the kernel page cache, and the
// kernel's copy was dropped when the map was granted, so a write here is
// seen by a plain read at once.
//
// Errors: EPERM (token), ESTALE (no such open), EBADF (access mode).
func ShimHandle(grant, ino uint64, pid, uid, acc uint32, token []byte, write bool) (*files.Handle, error) {
	k := grantKey{ino: ino, pid: pid, uid: uid, acc: acc}
	want := CapToken(k.ino, k.pid, k.uid, k.acc)
	if len(token) != len(want) || !hmac.Equal(want[:], token) {
		return nil, syscall.EPERM
	}
	shimReg.mu.Lock()
	o := shimReg.byID[grant]
	ok := o != nil && o.key == k
	rw := ok && o.rw
	shimReg.mu.Unlock()
	switch {
	case !ok:
		return nil, syscall.ESTALE
	case write && (acc == syscall.O_RDONLY || !rw):
		return nil, syscall.EBADF
	case !write && acc == syscall.O_WRONLY:
		return nil, syscall.EBADF
	}
	return o.h, nil
}
