package fusefs

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Any local process reaches these decoders: the capability through an
// ioctl on a file it opened on the mount, the grant request through the
// abstract grant socket.

func encodeCap(c Capability) []byte {
	b := make([]byte, CapSize)
	c.Encode(b)
	return b
}

// FuzzDecodeCapability: no panic; an error returns the zero Capability;
// a decoded one encodes back to a record that decodes to the same value.
func FuzzDecodeCapability(f *testing.F) {
	f.Add(encodeCap(Capability{Pid: 42}))
	f.Add(encodeCap(Capability{Ino: 7, PageSize: 1 << 20, Pid: 1, Uid: 1000, AccMode: syscall.O_RDWR,
		Token: CapToken(7, 1, 1000, syscall.O_RDWR), Endpoint: "@iowarp-shim-1-0123456789abcdef",
		DaemonPid: 9, DataFd: -1, TableFd: -1, Grant: 3}))
	f.Add(encodeCap(Capability{Endpoint: string(bytes.Repeat([]byte{'e'}, 107))}))
	f.Add(make([]byte, CapSize))
	f.Add([]byte("IOWC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCapability(b)
		if err != nil {
			if c != (Capability{}) {
				t.Fatalf("error %v with a partial capability %+v", err, c)
			}
			return
		}
		c2, err := DecodeCapability(encodeCap(c))
		if err != nil {
			t.Fatalf("re-encoded capability does not decode: %v", err)
		}
		if c2 != c {
			t.Fatalf("round trip changed the capability:\n%+v\n%+v", c, c2)
		}
	})
}

// encode is the request the shim sends (adapters/posix/fast.c grant).
func (r grantReq) encode() []byte {
	b := make([]byte, grantReqSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], grantMagic)
	le.PutUint32(b[4:], grantVersion)
	le.PutUint64(b[8:], r.id)
	le.PutUint64(b[16:], r.ino)
	le.PutUint32(b[24:], r.acc)
	copy(b[32:], r.token[:])
	return b
}

// FuzzDecodeGrantReq: no panic; an error returns the zero request; a
// decoded request is exactly the bytes it came from.
func FuzzDecodeGrantReq(f *testing.F) {
	f.Add(grantReq{id: 1, ino: 2, acc: syscall.O_RDONLY, token: CapToken(2, 3, 4, 0)}.encode())
	f.Add(grantReq{id: ^uint64(0), ino: 1, acc: syscall.O_RDWR}.encode())
	f.Add(make([]byte, grantReqSize))
	f.Add([]byte("IOWG\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeGrantReq(b)
		if err != nil {
			if r != (grantReq{}) {
				t.Fatalf("error %v with a partial request %+v", err, r)
			}
			return
		}
		if !bytes.Equal(r.encode(), b) {
			t.Fatalf("request %+v does not encode back to %x", r, b)
		}
	})
}

// FuzzGrant: whatever a process sends, with no live open registered
// under it nothing is granted, and a refusal carries no fds. A request
// with the right token for the caller gets as far as the registry
// (ESTALE; a write-only open too: whether its uid may read the file, which
// a read-write map needs, is asked of the open); with another caller's
// credentials, EPERM; an access mode that is none, EINVAL.
func FuzzGrant(f *testing.F) {
	for _, acc := range []uint32{syscall.O_RDONLY, syscall.O_WRONLY, syscall.O_RDWR} {
		f.Add(grantReq{id: 5, ino: 11, acc: acc, token: CapToken(11, 100, 1000, acc)}.encode(), int32(100), uint32(1000))
	}
	f.Add(grantReq{id: 5, ino: 11, token: CapToken(11, 100, 1000, 0)}.encode(), int32(101), uint32(1000))
	f.Add([]byte{}, int32(0), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, pid int32, uid uint32) {
		fds, sock, errno := grant(b, &unix.Ucred{Pid: pid, Uid: uid})
		if errno == 0 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			t.Fatalf("granted %d fds with no open registered", len(fds))
		}
		if fds != nil || sock != "" {
			t.Fatalf("refusal %v with fds %v, socket %q", errno, fds, sock)
		}
		r, err := decodeGrantReq(b)
		switch {
		case err != nil:
			if errno != syscall.EPROTO {
				t.Fatalf("undecodable request: %v, want EPROTO", errno)
			}
		case r.token != CapToken(r.ino, uint32(pid), uid, r.acc):
			if errno != syscall.EPERM {
				t.Fatalf("wrong token: %v, want EPERM", errno)
			}
		case r.acc != syscall.O_RDONLY && r.acc != syscall.O_RDWR && r.acc != syscall.O_WRONLY:
			if errno != syscall.EINVAL {
				t.Fatalf("access mode %#x: %v, want EINVAL", r.acc, errno)
			}
		case errno != syscall.ESTALE:
			t.Fatalf("valid token for no open: %v, want ESTALE", errno)
		}
	})
}

// FuzzShimHandle: the shim's misses name their open by grant and token
// in ipc arguments (the fs module's pread/pwrite). With no open
// registered nothing resolves; a token of the wrong length or value is
// EPERM, a valid one for no open ESTALE.
func FuzzShimHandle(f *testing.F) {
	tok := CapToken(11, 100, 1000, syscall.O_RDWR)
	f.Add(uint64(5), uint64(11), uint32(100), uint32(1000), uint32(syscall.O_RDWR), tok[:], true)
	f.Add(uint64(5), uint64(11), uint32(100), uint32(1000), uint32(syscall.O_RDWR), tok[:31], false)
	f.Add(uint64(0), uint64(0), uint32(0), uint32(0), uint32(0), []byte{}, false)
	f.Fuzz(func(t *testing.T, grant, ino uint64, pid, uid, acc uint32, token []byte, write bool) {
		h, err := ShimHandle(grant, ino, pid, uid, acc, token, write)
		if h != nil || err == nil {
			t.Fatalf("resolved a handle (%v) with no open registered", err)
		}
		want := CapToken(ino, pid, uid, acc)
		switch {
		case !bytes.Equal(token, want[:]):
			if err != syscall.EPERM {
				t.Fatalf("wrong token: %v, want EPERM", err)
			}
		case err != syscall.ESTALE:
			t.Fatalf("valid token for no open: %v, want ESTALE", err)
		}
	})
}
