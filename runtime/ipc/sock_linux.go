package ipc

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// peerCred returns the credentials of the process at the other end of c
// (SO_PEERCRED: what it was when it connected).
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, serr
}

// sendFd writes msg with f attached (SCM_RIGHTS).
func sendFd(c *net.UnixConn, msg []byte, f *os.File) error {
	var oob []byte
	if f != nil {
		oob = unix.UnixRights(int(f.Fd()))
	}
	n, oobn, err := c.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n != len(msg) || oobn != len(oob) {
		return fmt.Errorf("short write %d/%d, %d/%d", n, len(msg), oobn, len(oob))
	}
	return nil
}

// recvFd reads one message of exactly n bytes and the fd attached to it
// (nil if none). Extra fds a peer attached are closed.
func recvFd(c *net.UnixConn, n int) ([]byte, *os.File, error) {
	buf := make([]byte, n)
	oob := make([]byte, unix.CmsgSpace(4*4))
	m, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return nil, nil, perr
		}
		for _, cm := range msgs {
			got, rerr := unix.ParseUnixRights(&cm)
			if rerr == nil {
				fds = append(fds, got...)
			}
		}
	}
	var f *os.File
	for i, fd := range fds {
		if i == 0 {
			unix.CloseOnExec(fd)
			f = os.NewFile(uintptr(fd), "memfd:iowarp-ipc")
		} else {
			unix.Close(fd)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 || m != n {
		if f != nil {
			f.Close()
		}
		return nil, nil, fmt.Errorf("handshake message of %d bytes (flags %#x)", m, flags)
	}
	return buf[:m], f, nil
}
