package fusefs

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/abi"
)

// The grant socket: where a shim that got a capability (Ioctl) asks for the
// shared maps of its file. The maps cannot travel through the ioctl, and
// the daemon must choose their access itself, so they come as fds over a
// Unix socket (SCM_RIGHTS), reopened by the daemon read-only for an
// O_RDONLY open and read-write for an O_RDWR one (an O_WRONLY open gets
// none: a mapping needs read access). The daemon's own fds are mode 0600,
// so a client of another uid cannot reopen a read-only fd read-write
// through /proc/self/fd.
//
// A request carries the grant id and the token of the capability. The
// daemon trusts nothing else it says: the process and the user come from
// SO_PEERCRED, the token is recomputed from them, the inode and the access
// mode (CapToken), and compared in constant time; the grant must name a
// live open of that inode by that process, user and access mode. So a
// token replayed by another process or uid, or presented for an access
// mode its open does not have, is refused (EPERM), as is a grant whose
// open was released (ESTALE).
//
// Request (struct iow_grant_req of internal/abi, 64 bytes, little
// endian): u32 magic "IOWG", u32 version, u64 grant, u64 ino, u32 access
// mode, u32 0, token[32] (decodeGrantReq). Reply (struct iow_grant_reply):
// i32 errno (0 = granted) and u32 0; on success the fds of the page
// table and the segment, in that order, as SCM_RIGHTS, and after the 8
// bytes the path of the daemon's ipc socket (Options.IPCSocket,
// NUL-terminated; empty = none), where the shim sends its misses
// (ShimHandle).

const (
	grantMagic   = abi.GrantMagic
	grantVersion = abi.GrantVersion
	grantReqSize = abi.GrantReqSize
)

// grantKey is what a grant is bound to.
type grantKey struct {
	ino           uint64
	pid, uid, acc uint32
}

// shimOpen is one open that asked for a capability.
type shimOpen struct {
	n   *node
	h   *files.Handle
	key grantKey
	rw  bool // a read-write map was granted (counted in shimReg.writers)
	// watch is a pidfd of the grantee while rw (watchGrantee).
	watch *os.File
}

// shimReg holds the live grants; writers counts, per node, the opens
// holding a read-write map: while it is non-zero every other open of the
// node bypasses the kernel page cache (newHandle).
var shimReg struct {
	mu      sync.Mutex
	next    uint64
	byID    map[uint64]*shimOpen
	byH     map[*files.Handle][]uint64
	writers map[*node]int
}

// shimRegister records a capability's open and returns its grant id.
func shimRegister(n *node, h *files.Handle, k grantKey) uint64 {
	var b [8]byte
	rand.Read(b[:])
	shimReg.mu.Lock()
	defer shimReg.mu.Unlock()
	if shimReg.byID == nil {
		shimReg.byID = make(map[uint64]*shimOpen)
		shimReg.byH = make(map[*files.Handle][]uint64)
		shimReg.writers = make(map[*node]int)
	}
	// Ids are not secrets (the token is); random ones just make a stale
	// id unlikely to name a new open.
	id := binary.LittleEndian.Uint64(b[:]) | 1
	for shimReg.byID[id] != nil {
		id += 2
	}
	shimReg.byID[id] = &shimOpen{n: n, h: h, key: k}
	shimReg.byH[h] = append(shimReg.byH[h], id)
	return id
}

// shimRelease forgets the grants of a released open; the last read-write
// map of a node lets the kernel cache it again (after dropping its copy).
func shimRelease(n *node, h *files.Handle) {
	shimReg.mu.Lock()
	ids := shimReg.byH[h]
	delete(shimReg.byH, h)
	var unmap []*shimOpen
	var watches []*os.File
	for _, id := range ids {
		if o := shimReg.byID[id]; o != nil {
			delete(shimReg.byID, id)
			if o.watch != nil {
				watches = append(watches, o.watch)
				o.watch = nil
			}
			if o.rw {
				unmap = append(unmap, o)
				if shimReg.writers[o.n]--; shimReg.writers[o.n] <= 0 {
					delete(shimReg.writers, o.n)
				}
			}
		}
	}
	shimReg.mu.Unlock()
	for _, o := range unmap {
		o.h.ShimUnmap()
	}
	if len(unmap) > 0 {
		go n.NotifyContent(0, 0)
	}
	for _, w := range watches {
		w.Close() // ends its watchGrantee
	}
}

// watchGrantee ends o's read-write map when the process it was granted
// to exits. The kernel's release of the fd ends it too, but not while a
// child the client forked keeps the fd open: a forked child never writes
// through the maps (adapters/posix), so a client killed -9 would keep its
// file's lease of first-tier capacity, and a writer count it left inside a
// page, for as long as the child lives. The pidfd waits in the runtime's
// poller (readable once the process exited); shimRelease closes it.
func watchGrantee(o *shimOpen, id uint64) {
	fd, err := unix.PidfdOpen(int(o.key.pid), unix.PIDFD_NONBLOCK)
	if err != nil {
		if err == unix.ESRCH {
			granteeDied(o, id) // gone already
		}
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	shimReg.mu.Lock()
	live := shimReg.byID[id] == o && o.rw
	if live {
		o.watch = f
	}
	shimReg.mu.Unlock()
	if !live {
		f.Close()
		return
	}
	go func() {
		if pidfdWait(f) {
			granteeDied(o, id)
		}
	}()
}

// pidfdWait waits until the process of pidfd f exits (true) or f is
// closed (false).
func pidfdWait(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(p, 0)
		exited = n > 0
		return exited
	})
	return err == nil && exited
}

// granteeDied ends the read-write map of o, whose process exited while
// its fd lives on (as shimRelease does for that map; the grant itself
// goes with the fd's release).
func granteeDied(o *shimOpen, id uint64) {
	shimReg.mu.Lock()
	ok := shimReg.byID[id] == o && o.rw
	if ok {
		o.rw = false
		if shimReg.writers[o.n]--; shimReg.writers[o.n] <= 0 {
			delete(shimReg.writers, o.n)
		}
	}
	w := o.watch
	o.watch = nil
	shimReg.mu.Unlock()
	if w != nil {
		w.Close()
	}
	if ok {
		o.h.ShimUnmap()
		go o.n.NotifyContent(0, 0)
	}
}

// shimWriting reports whether a shim holds a read-write map of n.
func shimWriting(n *node) bool {
	shimReg.mu.Lock()
	defer shimReg.mu.Unlock()
	return shimReg.writers[n] > 0
}

var grantSrv struct {
	once sync.Once
	addr string
	err  error
}

// grantEndpoint starts the process's grant socket (abstract, so nothing to
// clean up) on first use and returns its address ("@name").
func grantEndpoint() (string, error) {
	grantSrv.once.Do(func() {
		var b [8]byte
		rand.Read(b[:])
		addr := "@iowarp-shim-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
		if err != nil {
			grantSrv.err = fmt.Errorf("grant socket: %w", err)
			return
		}
		grantSrv.addr = addr
		go grantServe(l)
	})
	return grantSrv.addr, grantSrv.err
}

// grantServeLimit bounds the requests served at once.
var grantServeLimit = make(chan struct{}, 64)

func grantServe(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Printf("fusefs: grant socket: %v", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		grantServeLimit <- struct{}{}
		go func() {
			defer func() { <-grantServeLimit }()
			defer c.Close()
			grantConn(c)
		}()
	}
}

// grantConn answers one request.
func grantConn(c *net.UnixConn) {
	defer func() {
		if r := recover(); r != nil {
			log.Printf("fusefs: grant request: panic: %v", r)
		}
	}()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	cred, err := peerCred(c)
	if err != nil {
		return
	}
	buf := make([]byte, grantReqSize)
	n, err := c.Read(buf)
	if err != nil {
		return
	}
	fds, ipcSock, errno := grant(buf[:n], cred)
	resp := make([]byte, abi.GrantReplySize, abi.GrantReplySize+len(ipcSock)+1)
	binary.LittleEndian.PutUint32(resp[abi.GrantReplyOffStatus:], uint32(errno))
	var oob []byte
	if errno == 0 {
		oob = unix.UnixRights(fds...)
		resp = append(append(resp, ipcSock...), 0)
	}
	c.WriteMsgUnix(resp, oob, nil)
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// grantReq is a decoded grant request.
type grantReq struct {
	id, ino uint64
	acc     uint32
	token   [abi.CapTokenLen]byte
}

// decodeGrantReq parses a request; it checks only its form, nothing it
// claims (authorize does).
func decodeGrantReq(b []byte) (grantReq, error) {
	if len(b) != grantReqSize {
		return grantReq{}, fmt.Errorf("grant request of %d bytes", len(b))
	}
	le := binary.LittleEndian
	if m, v := le.Uint32(b[abi.GrantOffMagic:]), le.Uint32(b[abi.GrantOffVersion:]); m != grantMagic || v != grantVersion {
		return grantReq{}, fmt.Errorf("grant request magic %#x version %d", m, v)
	}
	if r := le.Uint32(b[abi.GrantOffReserved:]); r != 0 {
		return grantReq{}, fmt.Errorf("grant request reserved word %#x", r)
	}
	r := grantReq{id: le.Uint64(b[abi.GrantOffGrant:]), ino: le.Uint64(b[abi.GrantOffIno:]), acc: le.Uint32(b[abi.GrantOffAccMode:])}
	copy(r.token[:], b[abi.GrantOffToken:abi.GrantOffToken+abi.CapTokenLen])
	return r, nil
}

// grant checks a request against the caller's credentials and returns
// the fds to send (owned by the caller of grant).
func grant(b []byte, cred *unix.Ucred) ([]int, string, syscall.Errno) {
	req, err := decodeGrantReq(b)
	if err != nil {
		return nil, "", syscall.EPROTO
	}
	o, errno := authorize(req, cred)
	if errno != 0 {
		return nil, "", errno
	}
	fds, errno := grantMaps(o, req.id, req.acc != syscall.O_RDONLY)
	if errno != 0 {
		return nil, "", errno
	}
	return fds, o.n.m.opts.IPCSocket, 0
}

// authorize returns the live open that req names, if the caller (cred)
// is the process and user it was granted to and the token matches:
// EPERM (token), EACCES (no read access), ESTALE (no such open).
func authorize(req grantReq, cred *unix.Ucred) (*shimOpen, syscall.Errno) {
	k := grantKey{ino: req.ino, pid: uint32(cred.Pid), uid: cred.Uid, acc: req.acc}
	want := CapToken(k.ino, k.pid, k.uid, k.acc)
	if !hmac.Equal(want[:], req.token[:]) {
		return nil, syscall.EPERM
	}
	if req.acc != syscall.O_RDONLY && req.acc != syscall.O_RDWR && req.acc != syscall.O_WRONLY {
		return nil, syscall.EINVAL
	}
	shimReg.mu.Lock()
	o := shimReg.byID[req.id]
	shimReg.mu.Unlock()
	if o == nil || o.key != k {
		return nil, syscall.ESTALE
	}
	if req.acc == syscall.O_WRONLY && !peerMayRead(o.h, cred) {
		return nil, syscall.EACCES // a map needs read access
	}
	return o, 0
}

// peerMayRead reports whether the peer could open the file for reading
// too (mayRead): a write-only open is then granted the read-write map its
// writes need, and the read access the map brings is one the process has
// anyway.
func peerMayRead(h *files.Handle, cred *unix.Ucred) bool {
	st, err := h.Getattr()
	return err == nil && mayRead(&st, files.Cred{Uid: cred.Uid, Gid: cred.Gid})
}

// grantMaps reopens the page table and the segment of o's file with the
// access of the open (read-write if rw) and counts a first read-write map.
func grantMaps(o *shimOpen, id uint64, rw bool) ([]int, syscall.Errno) {
	tfd, dfd, err := o.h.ShimMaps(rw, func() { go o.n.NotifyContent(0, 0) })
	if err != nil {
		return nil, syscall.ENODATA
	}
	mode := unix.O_RDONLY
	if rw {
		mode = unix.O_RDWR
	}
	fds := make([]int, 0, 2)
	for _, fd := range []int{tfd, dfd} {
		nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), mode|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			if rw {
				o.h.ShimUnmap()
			}
			return nil, syscall.EIO
		}
		fds = append(fds, nfd)
	}
	if rw {
		countWriter(o, id)
	}
	return fds, 0
}

// countWriter records o's read-write map (unless it was released
// meanwhile or already counted, when the extra map is dropped).
func countWriter(o *shimOpen, id uint64) {
	shimReg.mu.Lock()
	first := false
	counted := false
	if cur := shimReg.byID[id]; cur == o && !o.rw {
		o.rw, counted = true, true
		shimReg.writers[o.n]++
		first = shimReg.writers[o.n] == 1
	}
	shimReg.mu.Unlock()
	if !counted {
		o.h.ShimUnmap() // released meanwhile, or already counted
		return
	}
	watchGrantee(o, id)
	if first {
		// From now on the kernel must not serve this inode from
		// pages the shim can change behind it, nor from attributes
		// cached before its replies came with no timeout (shims raise
		// the size: fstat of the shim's own fd must see it). The
		// attributes go before the grant's reply (no page locks: a
		// negative offset invalidates them alone).
		o.n.NotifyContent(-1, 0)
		go o.n.NotifyContent(0, 0)
	}
}
