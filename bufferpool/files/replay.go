package files

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// Crash replay. The pool journals the dirty pages of a file that sit on a
// file tier (bufferpool/journal.go) under a tag naming the backing inode:
// its device and inode numbers, its file handle (name_to_handle_at) and
// the path it had when the file object was made, and its birth time. A new FS asks the pool
// for what the journals of dead daemons still hold (Pool.Replay) and
// writes it to the backing files before it serves: it opens each by
// handle (open_by_handle_at, which needs CAP_DAC_READ_SEARCH), else by
// path, and only if the inode is the same one; writes the pages that
// match their checksum; and sets the size to the mount's size as logged,
// but no further than the end of the last page replayed (what only RAM
// held is lost, and is not replaced by zeros), nor below the backing
// file's size. Then the dead daemon's tier files are removed.

// journalTag names the backing inode open at fd for the journal. The
// birth time tells a reused inode number from the file it was (0 where
// the file system keeps none).
func journalTag(fd int, st *unix.Stat_t) []byte {
	path, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	handle := "-"
	if h, _, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil {
		handle = fmt.Sprintf("%d:%x", h.Type(), h.Bytes())
	}
	return fmt.Appendf(nil, "dev=%d ino=%d btime=%d handle=%s path=%s", st.Dev, st.Ino, birthTime(fd), handle, path)
}

// birthTime is the inode's creation time in nanoseconds, 0 if unknown.
func birthTime(fd int) int64 {
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BTIME, &stx) != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return 0
	}
	return stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
}

// tagInfo is a parsed journalTag.
type tagInfo struct {
	key    fileKey
	btime  int64
	handle *unix.FileHandle
	path   string
}

var errBadTag = errors.New("files: bad journal tag")

func parseTag(tag []byte) (tagInfo, error) {
	var t tagInfo
	s := string(tag)
	var ok bool
	fields := make(map[string]string)
	for _, k := range []string{"dev", "ino", "btime", "handle"} {
		var v string
		if v, s, ok = strings.Cut(strings.TrimPrefix(s, k+"="), " "); !ok {
			return t, fmt.Errorf("%w: %q", errBadTag, tag)
		}
		fields[k] = v
	}
	p, ok := strings.CutPrefix(s, "path=")
	if !ok {
		return t, fmt.Errorf("%w: %q", errBadTag, tag)
	}
	t.path = p
	var err1, err2, err3 error
	t.key.dev, err1 = strconv.ParseUint(fields["dev"], 10, 64)
	t.key.ino, err2 = strconv.ParseUint(fields["ino"], 10, 64)
	t.btime, err3 = strconv.ParseInt(fields["btime"], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return t, fmt.Errorf("%w: %q", errBadTag, tag)
	}
	if h := fields["handle"]; h != "-" {
		typ, hexb, ok := strings.Cut(h, ":")
		n, err1 := strconv.ParseInt(typ, 10, 32)
		b, err2 := hex.DecodeString(hexb)
		if !ok || err1 != nil || err2 != nil {
			return t, fmt.Errorf("%w: %q", errBadTag, tag)
		}
		fh := unix.NewFileHandle(int32(n), b)
		t.handle = &fh
	}
	return t, nil
}

// openTagged opens the backing inode a tag names for writing; an inode
// that is gone (or whose path now names another) wraps
// bufferpool.ErrNotFound.
func (fs *FS) openTagged(t tagInfo) (*os.File, error) {
	if t.handle != nil {
		fd, err := unix.OpenByHandleAt(fs.rootFd, *t.handle, unix.O_WRONLY|unix.O_CLOEXEC)
		if err == nil {
			return checkInode(fd, t)
		}
		if errors.Is(err, unix.ESTALE) {
			return nil, fmt.Errorf("inode %d: %w", t.key.ino, bufferpool.ErrNotFound)
		}
	}
	fd, err := unix.Open(t.path, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("%s: %w", t.path, bufferpool.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", t.path, err)
	}
	return checkInode(fd, t)
}

// checkInode keeps fd if it is the tagged inode.
func checkInode(fd int, t tagInfo) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", t.path, err)
	}
	if keyOf(&st) != t.key || st.Mode&unix.S_IFMT != unix.S_IFREG || t.btime != 0 && birthTime(fd) != t.btime {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is no longer inode %d: %w", t.path, t.key.ino, bufferpool.ErrNotFound)
	}
	return os.NewFile(uintptr(fd), t.path), nil
}

// inNamespace reports whether the open file is under the backing
// directory: a replay writes nowhere else, whatever a journal says.
//
// The fd's own path says so, unless the file was opened by handle and its
// dentry is disconnected (evicted since: the kernel then prints "/" or
// "/name", a path that does not lead to the inode). A disconnected file
// is taken if the tag's path still leads to it beneath the root, or, when
// it was renamed since, if it is on the backing directory's file system:
// the journal naming it is the daemon's own (bufferpool checks its owner
// and mode before it replays anything), so this only guards against a
// journal gone wrong, not a forged one.
func (fs *FS) inNamespace(f *os.File, t tagInfo) bool {
	root := strings.TrimSuffix(fs.rootPath, "/") + "/"
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return false
	}
	if strings.HasPrefix(p, root) {
		return true
	}
	var open, st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &open) != nil {
		return false
	}
	same := func(st *unix.Stat_t) bool { return st.Dev == open.Dev && st.Ino == open.Ino }
	if unix.Lstat(p, &st) == nil && same(&st) {
		return false // connected, and outside the root
	}
	if r, ok := strings.CutPrefix(t.path, root); ok {
		if a, err := fs.resolve(r); err == nil {
			err = unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW)
			a.close()
			if err == nil && same(&st) {
				return true
			}
		}
	}
	return unix.Fstat(fs.rootFd, &st) == nil && st.Dev == open.Dev
}

// replaySink writes one file's replayed pages to its backing file.
type replaySink struct {
	f  *os.File
	ps int64
}

func (fs *FS) openReplay(rf *bufferpool.ReplayFile) (bufferpool.ReplaySink, error) {
	t, err := parseTag(rf.Tag)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, bufferpool.ErrNotFound)
	}
	f, err := fs.openTagged(t)
	if err != nil {
		return nil, err
	}
	if !fs.inNamespace(f, t) {
		f.Close()
		return nil, fmt.Errorf("%s is outside the backing directory %s: %w", t.path, fs.rootPath, bufferpool.ErrNotFound)
	}
	return &replaySink{f: f, ps: rf.PageSize}, nil
}

func (s *replaySink) WritePage(i int64, data []byte) error {
	off := i * s.ps
	if _, err := s.f.WriteAt(data, off); err != nil {
		return fmt.Errorf("write page %d of %s: %w", i, s.f.Name(), err)
	}
	return nil
}

func (s *replaySink) Close(err error) error {
	if err == nil {
		err = s.finish()
	}
	return errors.Join(err, s.f.Close())
}

// finish fsyncs. The pages were cut at the logged size, and a write
// past the backing file's end extends it to the end of that page: the
// size the comment at the top describes.
func (s *replaySink) finish() error {
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.f.Name(), err)
	}
	return nil
}

// replay writes back what the journals of dead daemons hold, and logs it.
func (fs *FS) replay() *bufferpool.ReplayReport {
	rep := fs.pool.Replay(fs.openReplay)
	if rep.Dirs == 0 {
		return nil
	}
	log := logrus.WithField("backing", fs.rootPath)
	for _, m := range rep.Messages {
		log.Warnf("replay: %s", m)
	}
	if rep.Pages == 0 && rep.Skipped == 0 && rep.Failed == 0 {
		// A killed daemon that had nothing dirty on the file tier.
		log.Infof("replay: nothing to write back from the file tier of a killed daemon; %d bytes of its tier files reclaimed", rep.Reclaimed)
		return &rep
	}
	log.Warnf("replay: %d pages (%d bytes) of %d files written back from the file tier of a killed daemon; %d pages skipped, %d files failed, %d bytes of tier files reclaimed",
		rep.Pages, rep.Bytes, rep.Files, rep.Skipped, rep.Failed, rep.Reclaimed)
	return &rep
}
