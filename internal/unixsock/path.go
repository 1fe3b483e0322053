package unixsock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDir is the per-user directory of the daemon's sockets: /run/iowarp
// for root, $XDG_RUNTIME_DIR/iowarp otherwise (or a per-uid directory in
// the temp dir).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/run/iowarp"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "iowarp")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("iowarp-%d", os.Geteuid()))
}

// Path is the socket, with extension ext (".sock" for control, ".ipc"),
// of the daemon serving mount (an absolute path; "" for a daemon without a
// mount, named as "/" is) in dir ("" = DefaultDir()).
// The name is a hash of the whole path behind as much of its tail (up to
// 32 bytes) as the 108-byte limit of a socket address leaves room for, so
// it stays unique and bindable however deep dir and mount are.
func Path(dir, mount, ext string) string {
	if dir == "" {
		dir = DefaultDir()
	}
	if mount == "" {
		mount = "/"
	}
	clean := filepath.Clean(mount)
	sum := sha256.Sum256([]byte(clean))
	tail := strings.Trim(strings.ReplaceAll(clean, "/", "-"), "-")
	if tail == "" {
		tail = "root"
	}
	id := hex.EncodeToString(sum[:6]) + ext
	// The tail gets what room the directory leaves in a socket address.
	room := min(32, maxPath-len(filepath.Join(dir, id))-1)
	if len(tail) > room {
		tail = strings.TrimLeft(tail[len(tail)-max(room, 0):], "-")
	}
	if tail == "" {
		return filepath.Join(dir, id)
	}
	return filepath.Join(dir, tail+"-"+id)
}
