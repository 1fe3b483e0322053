package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen opens a datagram socket the way systemd's manager does and
// returns it with the address to put in NOTIFY_SOCKET.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func recv(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotify(t *testing.T) {
	for _, tc := range []struct{ name, addr string }{
		{"path", filepath.Join(t.TempDir(), "notify")},
		{"abstract", "@iowarp-sdnotify-test-" + strconv.Itoa(os.Getpid())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := listen(t, tc.addr)
			t.Setenv(SocketEnv, tc.addr)
			if !Enabled() {
				t.Fatal("Enabled() false with NOTIFY_SOCKET set")
			}
			msg := "READY=1\n" + Status("mounted\n/iowarp")
			if err := Notify(msg); err != nil {
				t.Fatal(err)
			}
			if got, want := recv(t, c), "READY=1\nSTATUS=mounted /iowarp"; got != want {
				t.Errorf("received %q, want %q", got, want)
			}
		})
	}
}

func TestNotifyUnset(t *testing.T) {
	t.Setenv(SocketEnv, "")
	if Enabled() {
		t.Error("Enabled() true without NOTIFY_SOCKET")
	}
	if err := Notify("READY=1"); err != nil {
		t.Errorf("Notify without a socket: %v", err)
	}
}

// TestNotifyErrors: a socket nobody listens on, or a relative name, is
// an error naming the socket, not a silent success.
func TestNotifyErrors(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "none")
	for _, addr := range []string{gone, "relative/sock"} {
		t.Setenv(SocketEnv, addr)
		if err := Notify("READY=1"); err == nil {
			t.Errorf("NOTIFY_SOCKET=%s: no error", addr)
		}
	}
}
