package control

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// ErrUnsafeDir: a control directory that this user does not own, or that
// is not a directory. Its sockets could be anyone's: neither the daemon
// nor the client uses it.
var ErrUnsafeDir = errors.New("unsafe control directory")

// SecureDir checks an existing control directory before a daemon listens
// in it or a client trusts the sockets it finds there. It must be a
// directory owned by this user (root: by root); group and other bits are
// removed (with them another user could replace a socket, or list who
// runs where), and fixed says so in a sentence for the log. A missing
// directory is fine: Listen creates it with mode 0700.
func SecureDir(dir string) (fixed string, err error) {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("control directory: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("control directory %s: %w: not a directory", dir, ErrUnsafeDir)
	}
	if uid := ownerOf(st); uid != os.Geteuid() {
		return "", fmt.Errorf("control directory %s: %w: owned by uid %d, not by you (uid %d); remove it or use --control-dir",
			dir, ErrUnsafeDir, uid, os.Geteuid())
	}
	loose := st.Mode().Perm() & 0o077
	if loose == 0 {
		return "", nil
	}
	mode := st.Mode().Perm() &^ 0o077
	if err := os.Chmod(dir, mode|st.Mode()&(os.ModeSticky|os.ModeSetgid)); err != nil {
		return "", fmt.Errorf("control directory %s has mode %04o (group/other may reach its sockets): %w",
			dir, st.Mode().Perm(), err)
	}
	return fmt.Sprintf("control directory %s had mode %04o (group/other may reach its sockets); set it to %04o",
		dir, st.Mode().Perm(), mode), nil
}

func ownerOf(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// Sockets lists the control sockets in dir ("" = DefaultDir()), sorted;
// none (and no error) if dir does not exist. Whether a daemon answers on
// each is for the caller to ask.
func Sockets(dir string) ([]string, error) {
	if dir == "" {
		dir = DefaultDir()
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("control directory: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 && strings.HasSuffix(e.Name(), ".sock") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
