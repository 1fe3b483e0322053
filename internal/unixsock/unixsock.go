// Package unixsock holds what the daemon's Unix-socket servers (the
// control socket, the ipc socket) share: a listener only the daemon's uid
// can connect to, and an accept loop that rides out transient errors.
package unixsock

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Listen creates a Unix socket at path that only the caller's uid can
// connect to: its directory is made with mode 0700 and the socket is bound
// under umask 0177 (mode 0600). A socket left behind by a dead daemon is
// replaced; one that a live daemon answers on is an error. The listener
// removes the socket when closed. what names the socket in errors
// ("control socket").
//
// The umask is process-wide for the instant of the bind: files created
// concurrently by other goroutines get it too.
func Listen(path, what string) (*net.UnixListener, error) {
	if len(path) > maxPath {
		return nil, fmt.Errorf("%s %s: %d bytes, more than a socket address holds (%d): use a shorter control_dir",
			what, path, len(path), maxPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s directory: %w", what, err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s %s is in use by a running daemon", what, path)
	}
	os.Remove(path)
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}

// maxPath is the longest path a Unix socket address holds (sun_path is
// 108 bytes with its NUL).
const maxPath = 107

// Accept returns the next connection on ln, or nil once ln is closed.
// Other errors (EMFILE and friends) are retried after a short back-off.
func Accept(ln *net.UnixListener) *net.UnixConn {
	for {
		c, err := ln.AcceptUnix()
		if err == nil {
			return c
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}
