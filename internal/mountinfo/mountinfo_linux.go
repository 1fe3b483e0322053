package mountinfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	Point  string // mount point, unescaped
	FSType string // e.g. "fuse.iowarp", "tmpfs"
	Source string
}

// Mounts parses /proc/self/mountinfo.
func Mounts() ([]MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseMountinfo(f)
}

func parseMountinfo(r io.Reader) ([]MountInfo, error) {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root point opts [optional...] - fstype source superopts
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, MountInfo{Point: unescapeOctal(f[4]), FSType: f[sep+1], Source: unescapeOctal(f[sep+2])})
	}
	return out, sc.Err()
}

// unescapeOctal undoes the kernel's \ooo escaping of space, tab, newline
// and backslash in mountinfo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountAt reports the mount whose mount point is dir (the last one, if
// several are stacked there).
func MountAt(dir string) (MountInfo, bool, error) {
	ms, err := Mounts()
	if err != nil {
		return MountInfo{}, false, err
	}
	var found MountInfo
	ok := false
	for _, m := range ms {
		if m.Point == dir {
			found, ok = m, true
		}
	}
	return found, ok, nil
}

// Sentinel errors of the pre-mount checks, matched with errors.Is.
var (
	ErrNotDir      = errors.New("not a directory")
	ErrMountBusy   = errors.New("already a mount point")
	ErrStaleMount  = errors.New("stale FUSE mount (transport endpoint is not connected)")
	ErrNotWritable = errors.New("not writable")
)

// CheckMountPoint returns the absolute, symlink-free form of dir after
// checking that it exists, is a directory and is not already mounted on.
// Errors name dir and say what to do.
func CheckMountPoint(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, syscall.ENOTCONN):
		return "", fmt.Errorf("mount point %s: %w; run 'umount -l %s' first", abs, ErrStaleMount, abs)
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("mount point %s does not exist; create it with 'mkdir -p %s'", abs, abs)
	case err != nil:
		return "", fmt.Errorf("mount point: %w", err)
	case !st.IsDir():
		return "", fmt.Errorf("mount point %s: %w", abs, ErrNotDir)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	m, busy, err := MountAt(abs)
	if err != nil {
		return "", fmt.Errorf("read mount table: %w", err)
	}
	if busy {
		return "", fmt.Errorf("mount point %s is busy: %w (%s from %s); unmount it first",
			abs, ErrMountBusy, m.FSType, m.Source)
	}
	return abs, nil
}

// CheckWritable returns the absolute form of dir after checking that it is
// a directory in which this process can create files (by creating and
// removing one: access(2) says yes to root on a read-only file system).
// what names the directory in errors ("backing directory").
func CheckWritable(what, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s %s does not exist", what, abs)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s %s: %w", what, abs, ErrNotDir)
	}
	f, err := os.CreateTemp(abs, ".iowarp-probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("%s %s is %w: %v", what, abs, ErrNotWritable, err)
	}
	f.Close()
	os.Remove(f.Name())
	return abs, nil
}
