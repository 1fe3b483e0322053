// Package sdnotify is the sending side of systemd's service notification
// protocol (sd_notify(3)), for units with Type=notify: the daemon sends
// newline-separated KEY=VALUE assignments (READY=1, STOPPING=1,
// STATUS=..., EXTEND_TIMEOUT_USEC=...) as one datagram to the AF_UNIX
// SOCK_DGRAM socket named by $NOTIFY_SOCKET. A name starting with '@' is
// an abstract socket (Go's net package maps it). Without $NOTIFY_SOCKET
// (not started by systemd) every call does nothing.
//
// It is the protocol only, without libsystemd: nothing is cached, each
// call opens, sends and closes its own socket, so it is safe for
// concurrent use. Delivery is not confirmed (datagrams are fire and
// forget, as in libsystemd); an error means the datagram could not be
// sent at all.
package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// SocketEnv is the variable systemd sets to the notification socket.
const SocketEnv = "NOTIFY_SOCKET"

// Enabled reports whether a service manager listens for notifications.
func Enabled() bool { return os.Getenv(SocketEnv) != "" }

// Notify sends state, one or more KEY=VALUE lines, to $NOTIFY_SOCKET. It
// returns nil without sending when the variable is unset.
func Notify(state string) error {
	path := os.Getenv(SocketEnv)
	if path == "" {
		return nil
	}
	if path[0] != '/' && path[0] != '@' {
		return fmt.Errorf("%s=%q: not an absolute path or an abstract socket name", SocketEnv, path)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify %s: %w", path, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify %s: %w", path, err)
	}
	return nil
}

// Status is the STATUS= assignment of text: one line (a newline would
// end the assignment).
func Status(text string) string {
	return "STATUS=" + strings.ReplaceAll(text, "\n", " ")
}
