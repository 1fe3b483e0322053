package main

// #include <stdint.h>
// #include <sys/types.h>
import "C"

import (
	"sync"
	"unsafe"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/fs"
)

// The shim's misses through runtime/ipc (fast.c decides when): a read of
// pages that are not resident, or a write to such pages inside the file,
// becomes the fs module's pread or pwrite on the daemon-side handle of the
// open, named by the capability's grant and token; the daemon checks them
// against this connection's credentials. One connection per daemon socket
// per process, made on first use; a socket that failed once is not tried
// again. Any error before data moved answers -2: the caller uses the
// kernel. Never called in a forked child (fast.c checks iow_in_child).

// ipcMaxIO bounds one call (larger ones take the kernel path).
const ipcMaxIO = 1 << 20

type ipcConn struct {
	c             *ipc.Client
	pread, pwrite ipc.Method
	lease         ipc.Method
	hasLease      bool // the daemon serves fs.MLease
}

var ipcConns struct {
	mu sync.Mutex
	m  map[string]*ipcConn // nil value: the socket failed
}

// ipcConnect returns the connection to sock, dialing it once.
func ipcConnect(sock string) *ipcConn {
	ipcConns.mu.Lock()
	defer ipcConns.mu.Unlock()
	if c, ok := ipcConns.m[sock]; ok {
		return c
	}
	if ipcConns.m == nil {
		ipcConns.m = map[string]*ipcConn{}
	}
	ipcConns.m[sock] = nil
	c, err := ipc.Dial(sock, ipc.DialOptions{SegmentSize: 8 << 20})
	if err != nil {
		return nil
	}
	rd, err1 := c.Resolve(fs.Name, fs.MPread)
	wr, err2 := c.Resolve(fs.Name, fs.MPwrite)
	if err1 != nil || err2 != nil {
		c.Close()
		return nil
	}
	ic := &ipcConn{c: c, pread: rd, pwrite: wr}
	if ls, err := c.Resolve(fs.Name, fs.MLease); err == nil {
		ic.lease, ic.hasLease = ls, true
	}
	ipcConns.m[sock] = ic
	return ic
}

// iowarpIpcIO reads (write == 0) or writes n bytes at off of the open
// that (grant, ino, acc, token) names, through the daemon at sock. It
// returns the bytes moved, or -2 when nothing moved (use the kernel).
//
//export iowarpIpcIO
func iowarpIpcIO(sock *C.char, grant, ino C.uint64_t, acc C.uint32_t, token *C.uint8_t,
	buf unsafe.Pointer, n C.size_t, off C.int64_t, write C.int) C.ssize_t {
	if n == 0 || n > ipcMaxIO {
		return -2
	}
	c := ipcConnect(C.GoString(sock))
	if c == nil {
		return -2
	}
	o := fs.ShimOpen{Grant: uint64(grant), Ino: uint64(ino), AccMode: uint32(acc)}
	copy(o.Token[:], unsafe.Slice((*byte)(unsafe.Pointer(token)), len(o.Token)))
	user := unsafe.Slice((*byte)(buf), int(n))
	r, err := c.do(o, int64(off), user, write != 0)
	if err != nil && r <= 0 {
		return -2
	}
	return C.ssize_t(r)
}

// iowarpIpcLease asks the daemon at sock for a shim lease of at least
// need pages on the file of the read-write open that (grant, ino, acc,
// token) names (fs.MLease). It returns the pages the lease holds now, or
// -1 when the daemon could not be asked (the caller uses the kernel).
//
//export iowarpIpcLease
func iowarpIpcLease(sock *C.char, grant, ino C.uint64_t, acc C.uint32_t, token *C.uint8_t, need C.int64_t) C.int64_t {
	c := ipcConnect(C.GoString(sock))
	if c == nil || !c.hasLease || need <= 0 {
		return -1
	}
	o := fs.ShimOpen{Grant: uint64(grant), Ino: uint64(ino), AccMode: uint32(acc)}
	copy(o.Token[:], unsafe.Slice((*byte)(unsafe.Pointer(token)), len(o.Token)))
	w := runtime.NewArgWriter(make([]byte, 0, 80))
	fs.WriteShimOpen(w, o)
	w.I64(int64(need))
	args := w.Bytes()
	ab, err := c.c.AllocUninit(len(args))
	if err != nil {
		return -1
	}
	defer ab.Free()
	copy(ab.Bytes(), args)
	res, err := c.c.Do(c.lease, ab.All(), ipc.Span{}, ipc.Span{})
	if err != nil || res.Value > 1<<40 {
		return -1
	}
	return C.int64_t(res.Value)
}

// do makes one call; data crosses in a buffer of the shared segment.
func (c *ipcConn) do(o fs.ShimOpen, off int64, user []byte, write bool) (int, error) {
	w := runtime.NewArgWriter(make([]byte, 0, 80))
	fs.WriteShimOpen(w, o)
	w.I64(off)
	args := w.Bytes()
	ab, err := c.c.AllocUninit(len(args))
	if err != nil {
		return 0, err
	}
	defer ab.Free()
	copy(ab.Bytes(), args)
	db, err := c.c.AllocUninit(len(user))
	if err != nil {
		return 0, err
	}
	defer db.Free()
	if write {
		copy(db.Bytes(), user)
		res, err := c.c.Do(c.pwrite, ab.All(), db.All(), ipc.Span{})
		return int(res.Value), err
	}
	res, err := c.c.Do(c.pread, ab.All(), ipc.Span{}, db.All())
	if err != nil {
		return 0, err
	}
	if res.N < 0 || res.N > len(user) {
		return 0, runtime.ErrInvalid
	}
	return copy(user, db.Bytes()[:res.N]), nil
}
