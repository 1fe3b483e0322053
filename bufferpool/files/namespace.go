package files

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// rel validates a mount-relative path and returns it in the form the *at
// system calls take relative to the namespace root ("." for the root).
func rel(p string) (string, error) {
	if p == "" || p == "." {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("files: bad path %q: %w", p, syscall.EINVAL)
	}
	return p, nil
}

// resolve validates a mount-relative path and resolves it to its parent
// directory and name (resolve.go). The caller calls close.
func (fs *FS) resolve(p string) (at, error) {
	r, err := rel(p)
	if err != nil {
		return at{}, err
	}
	return fs.at(r)
}

// resolve2 is resolve of both paths of a link or rename.
func (fs *FS) resolve2(a, b string) (at, at, error) {
	ra, err := rel(a)
	if err != nil {
		return at{}, at{}, err
	}
	rb, err := rel(b)
	if err != nil {
		return at{}, at{}, err
	}
	return fs.at2(ra, rb)
}

// pathErr wraps err (nil stays nil) with the operation and the path.
func pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, p, err)
}

func keyOf(st *unix.Stat_t) fileKey { return fileKey{dev: uint64(st.Dev), ino: st.Ino} }

// Lstat returns the attributes of path, with size/mtime/blocks taken from
// the buffered file when its data is newer than the backing store.
func (fs *FS) Lstat(p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	a, err := fs.resolve(p)
	if err != nil {
		return st, pathErr("lstat", p, err)
	}
	defer a.close()
	return fs.lstatAt(a, p)
}

// lstatAt is Lstat of a resolved entry.
func (fs *FS) lstatAt(a at, p string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, pathErr("lstat", p, err)
	}
	fs.overlay(&st)
	if err := fs.statRemote(p, &st); err != nil { // remote.go
		return st, pathErr("lstat", p, err)
	}
	return st, nil
}

// overlay replaces what the backing store knows with what the pool knows.
func (fs *FS) overlay(st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if f := fs.lookupFile(keyOf(st)); f != nil {
		f.overlay(st)
	}
}

// ReadDir lists a directory without "." and "..".
func (fs *FS) ReadDir(p string) ([]DirEntry, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	fd, err := fs.openDir(r)
	if err != nil {
		return nil, pathErr("opendir", p, err)
	}
	defer unix.Close(fd)
	var out []DirEntry
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, pathErr("readdir", p, err)
		}
		if n <= 0 {
			return out, nil
		}
		out, err = parseDirents(buf[:n], out)
		if err != nil {
			return nil, pathErr("readdir", p, err)
		}
	}
}

// Mkdir creates a directory owned by c.
func (fs *FS) Mkdir(p string, mode uint32, c Cred) error {
	a, err := fs.resolve(p)
	if err != nil {
		return pathErr("mkdir", p, err)
	}
	defer a.close()
	if err := unix.Mkdirat(a.dir, a.name, mode&0o7777); err != nil {
		return pathErr("mkdir", p, err)
	}
	c, mode = inherit(a.dir, c, mode&0o7777, true)
	return pathErr("mkdir", p, own(a, c, mode, true, fs.isRoot))
}

// own gives a new entry a its owner c (when the daemon is root) and, with
// chmod, exactly mode: the daemon's umask must not apply (the kernel
// already applied the caller's). Callers take c and mode from inherit.
func own(a at, c Cred, mode uint32, chmod, chown bool) error {
	if chown {
		if err := unix.Fchownat(a.dir, a.name, int(c.Uid), int(c.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("chown new entry: %w", err)
		}
	}
	if chmod {
		if err := unix.Fchmodat(a.dir, a.name, mode, 0); err != nil {
			return fmt.Errorf("chmod new entry: %w", err)
		}
	}
	return nil
}

// inherit returns the owner and mode of a new entry in directory parent:
// the caller and the mode asked for, except that in a set-group-ID
// directory the entry takes the directory's group and a new directory
// keeps the bit, as on any Linux file system.
func inherit(parent int, c Cred, mode uint32, dir bool) (Cred, uint32) {
	var st unix.Stat_t
	if unix.Fstat(parent, &st) == nil && st.Mode&unix.S_ISGID != 0 {
		c.Gid = st.Gid
		if dir {
			mode |= unix.S_ISGID
		}
	}
	return c, mode
}

// Rmdir removes an empty directory.
func (fs *FS) Rmdir(p string) error {
	a, err := fs.resolve(p)
	if err != nil {
		return pathErr("rmdir", p, err)
	}
	defer a.close()
	if err := unix.Unlinkat(a.dir, a.name, unix.AT_REMOVEDIR); err != nil {
		return pathErr("rmdir", p, err)
	}
	return nil
}

// Unlink removes a name; the file's pages go when its last name and last
// handle are gone.
func (fs *FS) Unlink(p string) error {
	a, err := fs.resolve(p)
	if err != nil {
		return pathErr("unlink", p, err)
	}
	defer a.close()
	var st unix.Stat_t
	if err := unix.Fstatat(a.dir, a.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("unlink", p, err)
	}
	if err := unix.Unlinkat(a.dir, a.name, 0); err != nil {
		return pathErr("unlink", p, err)
	}
	fs.unlinked(&st)
	fs.unlinkedRemote(p) // remote.go
	return nil
}

// unlinked tells the file object of st that one of its names is gone.
func (fs *FS) unlinked(st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	var now unix.Stat_t
	if f := fs.lookupFile(keyOf(st)); f != nil {
		f.bucket.AttrChanged() // its links and ctime: shims' cached fstat
		if err := unix.Fstat(int(f.backing.Fd()), &now); err != nil || now.Nlink == 0 {
			f.markUnlinked()
		}
	}
}

// Symlink creates a symbolic link owned by c.
func (fs *FS) Symlink(target, p string, c Cred) error {
	a, err := fs.resolve(p)
	if err != nil {
		return pathErr("symlink", p, err)
	}
	defer a.close()
	if err := unix.Symlinkat(target, a.dir, a.name); err != nil {
		return pathErr("symlink", p, err)
	}
	c, _ = inherit(a.dir, c, 0, false)
	return pathErr("symlink", p, own(a, c, 0, false, fs.isRoot))
}

// Readlink returns a symbolic link's target.
func (fs *FS) Readlink(p string) (string, error) {
	a, err := fs.resolve(p)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	defer a.close()
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(a.dir, a.name, buf)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	return string(buf[:n]), nil
}

// Link makes a hard link; both names share one file object (by inode).
func (fs *FS) Link(oldPath, newPath string) error {
	ao, an, err := fs.resolve2(oldPath, newPath)
	if err != nil {
		return pathErr("link", newPath, err)
	}
	defer ao.close()
	defer an.close()
	if err := unix.Linkat(ao.dir, ao.name, an.dir, an.name, 0); err != nil {
		return pathErr("link", newPath, err)
	}
	fs.attrChangedAt(an.dir, an.name)
	return nil
}

// attrChangedAt tells the open file at dir/name, if any, that its stat
// changed (links, ctime, mode, owner): shims' cached fstat (shim.go).
func (fs *FS) attrChangedAt(dir int, name string) {
	var st unix.Stat_t
	if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	if f := fs.lookupFile(keyOf(&st)); f != nil {
		f.bucket.AttrChanged()
	}
}

// Mknod creates a FIFO, socket or device node owned by c.
func (fs *FS) Mknod(p string, mode uint32, dev uint32, c Cred) error {
	if mode&unix.S_IFMT == unix.S_IFREG || mode&unix.S_IFMT == 0 {
		h, _, err := fs.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, mode&0o7777, c)
		if err != nil {
			return err
		}
		return h.Release()
	}
	a, err := fs.resolve(p)
	if err != nil {
		return pathErr("mknod", p, err)
	}
	defer a.close()
	if err := unix.Mknodat(a.dir, a.name, mode, int(dev)); err != nil {
		return pathErr("mknod", p, err)
	}
	c, mode = inherit(a.dir, c, mode&0o7777, false)
	return pathErr("mknod", p, own(a, c, mode, true, fs.isRoot))
}

// Rename is renameat2(2); flags may hold RENAME_NOREPLACE / RENAME_EXCHANGE.
func (fs *FS) Rename(oldPath, newPath string, flags uint32) error {
	ao, an, err := fs.resolve2(oldPath, newPath)
	if err != nil {
		return pathErr("rename", oldPath+" -> "+newPath, err)
	}
	defer ao.close()
	defer an.close()
	var target unix.Stat_t
	replaced := flags&unix.RENAME_EXCHANGE == 0 &&
		unix.Fstatat(an.dir, an.name, &target, unix.AT_SYMLINK_NOFOLLOW) == nil
	if err := unix.Renameat2(ao.dir, ao.name, an.dir, an.name, uint(flags)); err != nil {
		return pathErr("rename", oldPath+" -> "+newPath, err)
	}
	fs.attrChangedAt(an.dir, an.name) // its ctime
	if flags&unix.RENAME_EXCHANGE != 0 {
		fs.attrChangedAt(ao.dir, ao.name)
	}
	fs.renamedRemote(oldPath, newPath, flags) // remote.go
	if replaced {
		var src unix.Stat_t
		// rename of a name onto another name of the same inode is a no-op.
		if unix.Fstatat(an.dir, an.name, &src, unix.AT_SYMLINK_NOFOLLOW) == nil && keyOf(&src) == keyOf(&target) {
			return nil
		}
		fs.unlinked(&target)
	}
	return nil
}

// Setattr applies a; h (may be nil) is an open handle of the file, used
// for ftruncate/fchmod of an unlinked file.
func (fs *FS) Setattr(p string, h *Handle, a SetAttr) (unix.Stat_t, error) {
	if h != nil {
		return h.setattr(a)
	}
	e, err := fs.resolve(p)
	if err != nil {
		return unix.Stat_t{}, pathErr("setattr", p, err)
	}
	defer e.close()
	if a.Size != nil {
		f, err := fs.fileAt(e)
		if err != nil {
			return unix.Stat_t{}, pathErr("truncate", p, err)
		}
		defer f.release()
		if err := f.truncate(*a.Size); err != nil {
			return unix.Stat_t{}, pathErr("truncate", p, err)
		}
	}
	if err := fs.setMeta(e, a); err != nil {
		return unix.Stat_t{}, pathErr("setattr", p, err)
	}
	fs.attrChangedAt(e.dir, e.name)
	return fs.lstatAt(e, p)
}

// setMeta applies mode, owner and times to an entry.
func (fs *FS) setMeta(e at, a SetAttr) error {
	if a.Mode != nil {
		if err := unix.Fchmodat(e.dir, e.name, *a.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	if a.Uid != nil || a.Gid != nil {
		if err := unix.Fchownat(e.dir, e.name, idOrKeep(a.Uid), idOrKeep(a.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if a.Atime != nil || a.Mtime != nil {
		ts := [2]unix.Timespec{timespec(a.Atime), timespec(a.Mtime)}
		if err := unix.UtimesNanoAt(e.dir, e.name, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		fs.noteMtime(e, a.Mtime)
	}
	return nil
}

// noteMtime records an explicit mtime on a buffered file, so its later
// write-back keeps it instead of the time of the last write.
func (fs *FS) noteMtime(e at, m *TimeSpec) {
	if m == nil || m.Omit {
		return
	}
	var st unix.Stat_t
	if unix.Fstatat(e.dir, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if f := fs.lookupFile(keyOf(&st)); f != nil {
		f.setMtime(timeOf(st.Mtim))
	}
}

func idOrKeep(id *uint32) int {
	if id == nil {
		return -1
	}
	return int(*id)
}

func timespec(t *TimeSpec) unix.Timespec {
	switch {
	case t == nil || t.Omit:
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	case t.Now:
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	default:
		return unix.NsecToTimespec(t.Time.UnixNano())
	}
}

// fileAt opens the file object of a regular file by path (for truncate
// without a handle). The caller calls release.
func (fs *FS) fileAt(e at) (*file, error) {
	fd, err := unix.Openat(e.dir, e.name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	f, _, err := fs.attach(fd, true, nil)
	return f, err
}

// Xattrs: only the user.* namespace is served.

// xpath resolves p for the l*xattr calls, which take paths only: the
// parent directory through /proc/self/fd, then the name (not followed),
// so the path stays short however deep the entry is. The caller calls
// close.
func (fs *FS) xpath(p string) (string, at, error) {
	a, err := fs.resolve(p)
	if err != nil {
		return "", at{}, err
	}
	return "/proc/self/fd/" + strconv.Itoa(a.dir) + "/" + a.name, a, nil
}

var errNoUserXattr = errors.New("only user.* extended attributes are served")

// hiddenXattr reports whether name is one of the daemon's own attributes
// on backing files (user.iowarp.*: the write-back's checksums), which the
// doors neither show nor let anyone change.
func hiddenXattr(name string) bool { return strings.HasPrefix(name, hiddenXattrs) }

// Getxattr reads a user.* attribute; other namespaces have none (ENODATA),
// which answers the kernel's security.capability probe cheaply.
func (fs *FS) Getxattr(p, name string, dest []byte) (int, error) {
	if !strings.HasPrefix(name, "user.") || hiddenXattr(name) {
		return 0, unix.ENODATA
	}
	fp, a, err := fs.xpath(p)
	if err != nil {
		return 0, pathErr("xattr", p, err)
	}
	defer a.close()
	n, err := unix.Lgetxattr(fp, name, dest)
	if err != nil {
		return 0, pathErr("getxattr "+name, p, err)
	}
	return n, nil
}

// Setxattr sets a user.* attribute.
func (fs *FS) Setxattr(p, name string, val []byte, flags int) error {
	if !strings.HasPrefix(name, "user.") {
		return fmt.Errorf("setxattr %s: %w: %w", name, errNoUserXattr, unix.EOPNOTSUPP)
	}
	if hiddenXattr(name) {
		return fmt.Errorf("setxattr %s: the daemon's own attribute: %w", name, unix.EPERM)
	}
	fp, a, err := fs.xpath(p)
	if err != nil {
		return pathErr("xattr", p, err)
	}
	defer a.close()
	if err := unix.Lsetxattr(fp, name, val, flags); err != nil {
		return pathErr("setxattr "+name, p, err)
	}
	return nil
}

// Listxattr lists user.* attributes (NUL-separated, as listxattr(2)).
func (fs *FS) Listxattr(p string, dest []byte) (int, error) {
	fp, a, err := fs.xpath(p)
	if err != nil {
		return 0, pathErr("xattr", p, err)
	}
	defer a.close()
	sz, err := unix.Llistxattr(fp, nil)
	if err != nil {
		return 0, pathErr("listxattr", p, err)
	}
	all := make([]byte, sz)
	sz, err = unix.Llistxattr(fp, all)
	if err != nil {
		return 0, pathErr("listxattr", p, err)
	}
	var out []byte
	for _, n := range strings.Split(string(all[:sz]), "\x00") {
		if strings.HasPrefix(n, "user.") && !hiddenXattr(n) {
			out = append(out, n...)
			out = append(out, 0)
		}
	}
	if len(dest) == 0 {
		return len(out), nil
	}
	if len(out) > len(dest) {
		return 0, unix.ERANGE
	}
	return copy(dest, out), nil
}

// Removexattr removes a user.* attribute.
func (fs *FS) Removexattr(p, name string) error {
	if !strings.HasPrefix(name, "user.") {
		return unix.ENODATA
	}
	if hiddenXattr(name) {
		return fmt.Errorf("removexattr %s: the daemon's own attribute: %w", name, unix.EPERM)
	}
	fp, a, err := fs.xpath(p)
	if err != nil {
		return pathErr("xattr", p, err)
	}
	defer a.close()
	if err := unix.Lremovexattr(fp, name); err != nil {
		return pathErr("removexattr "+name, p, err)
	}
	return nil
}

// Fsyncdir is fsync(2) of a directory: its entries (creations, renames,
// unlinks, already applied to the backing directory) are made durable
// there. A no-op in Scratch mode.
func (fs *FS) Fsyncdir(p string) error {
	if fs.scratch {
		return nil
	}
	r, err := rel(p)
	if err != nil {
		return err
	}
	fd, err := fs.openDir(r)
	if err != nil {
		return pathErr("fsyncdir", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return pathErr("fsyncdir", p, err)
	}
	fs.stats.dirSyncs.Add(1)
	return nil
}
