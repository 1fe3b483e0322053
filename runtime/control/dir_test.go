package control

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecureDir: a missing directory is fine, a loose one is set to 0700
// with a message, one owned by another user or a file is refused.
func TestSecureDir(t *testing.T) {
	base := t.TempDir()
	if msg, err := SecureDir(filepath.Join(base, "missing")); msg != "" || err != nil {
		t.Errorf("missing dir: %q, %v", msg, err)
	}
	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o777)
	msg, err := SecureDir(loose)
	if err != nil || !strings.Contains(msg, "had mode 0777") || !strings.Contains(msg, "set it to 0700") {
		t.Fatalf("loose dir: %q, %v", msg, err)
	}
	if st, _ := os.Stat(loose); st.Mode().Perm() != 0o700 {
		t.Errorf("loose dir left at %v", st.Mode().Perm())
	}
	if msg, err := SecureDir(loose); msg != "" || err != nil {
		t.Errorf("fixed dir: %q, %v", msg, err)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := SecureDir(file); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("file: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("chown to another owner needs root")
	}
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o700)
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := SecureDir(other); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("other's dir: %v", err)
	}
}

// TestSockets lists the control sockets of a directory and nothing else.
func TestSockets(t *testing.T) {
	dir := t.TempDir()
	if s, err := Sockets(filepath.Join(dir, "none")); s != nil || err != nil {
		t.Errorf("missing dir: %v, %v", s, err)
	}
	a, b := SocketPath(dir, "/a"), SocketPath(dir, "/b")
	for _, p := range []string{a, b, strings.TrimSuffix(a, ".sock") + ".ipc"} {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
	}
	os.WriteFile(filepath.Join(dir, "x.sock.log"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "plain.sock"), nil, 0o600)
	got, err := Sockets(dir)
	if err != nil || len(got) != 2 || !(got[0] == a && got[1] == b || got[0] == b && got[1] == a) {
		t.Errorf("Sockets = %v, %v; want %s and %s", got, err, a, b)
	}
}
