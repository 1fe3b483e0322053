package fusefs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iowarp/iowarp/internal/abi"
)

// The shim handshake (adapters/posix). After its open(2) on the mount
// succeeds, libiowarp.so sends IocCap on the new fd; the answer is the
// capability of that open: inode, page size, ipc endpoint, a token bound to
// (inode, process, uid, access mode), and what the fast path needs to map
// the file's RAM-tier pages. The request comes through the kernel on an fd
// the caller really opened, so the kernel has already checked permissions
// and names the caller (pid, uid) itself: a process cannot ask for the
// capability of a file it could not open, nor for a wider access mode
// than its open has. Anything else on the fd answers ENOTTY, which is also
// what the shim gets from a daemon without the handshake: it then uses the
// kernel path.
//
// While a shim handle is attached the kernel keeps no stale copy: the
// inode's cached pages are dropped at the handshake, and every write of
// the shim reaches the daemon through this mount or through the pool's
// shared pages that FUSE reads serve from.

// CapSize is the size of the capability record (C struct iow_cap).
const CapSize = abi.CapSize

// IocCap is _IOWR('W', 0x57, struct iow_cap).
const IocCap = abi.IocCap

// Capability is the decoded capability record; its layout is internal/abi's
// (struct iow_cap in adapters/posix/abi.h).
type Capability struct {
	Ino       uint64
	PageSize  uint64
	Pid, Uid  uint32
	AccMode   uint32
	Flags     uint32
	Token     [abi.CapTokenLen]byte
	Endpoint  string
	DaemonPid uint32
	DataFd    int32 // unused since version 2 (-1): maps come from the grant socket
	TableFd   int32 // unused since version 2 (-1)
	// Grant names this open at the grant socket (Endpoint), where the
	// shim asks for the maps of the file (see grant.go); 0 = none.
	Grant uint64
}

const capEndpointEnd = abi.CapOffEndpoint + abi.CapEndpointLen

// Encode writes c into b (CapSize bytes).
func (c *Capability) Encode(b []byte) {
	clear(b[:CapSize])
	le := binary.LittleEndian
	le.PutUint32(b[abi.CapOffMagic:], abi.CapMagic)
	le.PutUint32(b[abi.CapOffVersion:], abi.CapVersion)
	le.PutUint64(b[abi.CapOffIno:], c.Ino)
	le.PutUint64(b[abi.CapOffPageSize:], c.PageSize)
	le.PutUint32(b[abi.CapOffPid:], c.Pid)
	le.PutUint32(b[abi.CapOffUid:], c.Uid)
	le.PutUint32(b[abi.CapOffAccMode:], c.AccMode)
	le.PutUint32(b[abi.CapOffFlags:], c.Flags)
	copy(b[abi.CapOffToken:abi.CapOffToken+abi.CapTokenLen], c.Token[:])
	copy(b[abi.CapOffEndpoint:capEndpointEnd-1], c.Endpoint) // NUL-terminated
	le.PutUint32(b[abi.CapOffDaemonPid:], c.DaemonPid)
	le.PutUint32(b[abi.CapOffDataFd:], uint32(c.DataFd))
	le.PutUint32(b[abi.CapOffTableFd:], uint32(c.TableFd))
	le.PutUint64(b[abi.CapOffGrant:], c.Grant)
}

// DecodeCapability parses a capability record (the request half carries
// magic, version and the caller's claimed pid).
func DecodeCapability(b []byte) (Capability, error) {
	if len(b) < CapSize {
		return Capability{}, fmt.Errorf("capability of %d bytes", len(b))
	}
	le := binary.LittleEndian
	if m, v := le.Uint32(b[abi.CapOffMagic:]), le.Uint32(b[abi.CapOffVersion:]); m != abi.CapMagic || v != abi.CapVersion {
		return Capability{}, fmt.Errorf("capability magic %#x version %d", m, v)
	}
	ep, _, ok := bytes.Cut(b[abi.CapOffEndpoint:capEndpointEnd], []byte{0})
	if !ok {
		return Capability{}, fmt.Errorf("capability endpoint not NUL-terminated")
	}
	var c Capability
	c.Ino, c.PageSize = le.Uint64(b[abi.CapOffIno:]), le.Uint64(b[abi.CapOffPageSize:])
	c.Pid, c.Uid = le.Uint32(b[abi.CapOffPid:]), le.Uint32(b[abi.CapOffUid:])
	c.AccMode, c.Flags = le.Uint32(b[abi.CapOffAccMode:]), le.Uint32(b[abi.CapOffFlags:])
	copy(c.Token[:], b[abi.CapOffToken:abi.CapOffToken+abi.CapTokenLen])
	c.Endpoint = string(ep)
	c.DaemonPid = le.Uint32(b[abi.CapOffDaemonPid:])
	c.DataFd, c.TableFd = int32(le.Uint32(b[abi.CapOffDataFd:])), int32(le.Uint32(b[abi.CapOffTableFd:]))
	c.Grant = le.Uint64(b[abi.CapOffGrant:])
	return c, nil
}

var (
	secretOnce sync.Once
	secret     [32]byte
)

// CapToken is the token of a capability: an HMAC, under a secret of this
// daemon process, of what it is bound to. A server of shim requests
// recomputes it from the requester's SO_PEERCRED.
func CapToken(ino uint64, pid, uid, accMode uint32) [32]byte {
	secretOnce.Do(func() {
		if _, err := rand.Read(secret[:]); err != nil {
			panic(fmt.Sprintf("fusefs: no randomness for the shim secret: %v", err))
		}
	})
	var msg [20]byte
	binary.LittleEndian.PutUint64(msg[0:], ino)
	binary.LittleEndian.PutUint32(msg[8:], pid)
	binary.LittleEndian.PutUint32(msg[12:], uid)
	binary.LittleEndian.PutUint32(msg[16:], accMode)
	m := hmac.New(sha256.New, secret[:])
	m.Write(msg[:])
	var t [32]byte
	copy(t[:], m.Sum(nil))
	return t
}

var _ fs.NodeIoctler = (*node)(nil)

// Ioctl answers the shim handshake; every other ioctl is ENOTTY.
func (n *node) Ioctl(ctx context.Context, f fs.FileHandle, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	if cmd != IocCap {
		return 0, syscall.ENOTTY
	}
	h := handleOf(f)
	if h == nil || len(output) < CapSize {
		return 0, syscall.ENOTTY
	}
	if _, pt := f.(*passthroughHandle); pt {
		// The kernel reads this open from the RAM tier itself, and the
		// segment may not be mapped meanwhile (bufferpool/passthrough.go).
		return 0, syscall.ENOTTY
	}
	req, err := DecodeCapability(input)
	if err != nil {
		return 0, syscall.EPROTO
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return 0, syscall.EPROTO
	}
	// The kernel names the calling thread; the token is bound to its
	// process, which must be the one the shim claims to be.
	p, err := tgid(int(c.Pid))
	pid := uint32(p)
	if err != nil || pid != req.Pid {
		return 0, syscall.EPERM
	}
	acc := uint32(h.Flags() & syscall.O_ACCMODE)
	ino := n.StableAttr().Ino
	cp := Capability{Ino: ino, PageSize: uint64(n.m.fs.PageSize()), Pid: pid, Uid: c.Uid, AccMode: acc,
		Token: CapToken(ino, pid, c.Uid, acc), DaemonPid: uint32(os.Getpid()), DataFd: -1, TableFd: -1}
	// The fast path maps the page table and the RAM-tier segment; the
	// shim asks for them at the grant socket, presenting the token (see
	// grant.go), and gets fds with the access of this open.
	if ep, err := grantEndpoint(); err == nil {
		cp.Endpoint = ep
		cp.Grant = shimRegister(n, h, grantKey{ino: ino, pid: pid, uid: c.Uid, acc: acc})
	}
	shimAttach(n)
	cp.Encode(output)
	return 0, 0
}

// shimAttach drops what the kernel cached of n (the shim's reads and
// writes bypass the kernel from now on), asynchronously: a notification
// sent from inside a request on the same inode could wait on it.
func shimAttach(n *node) {
	go n.NotifyContent(0, 0)
}
