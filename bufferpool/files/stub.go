package files

import (
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// FS is POSIX file semantics on the buffer pool. Safe for concurrent use.
type FS struct{}

// New opens the namespace and starts the write-back workers.
func New(pool *bufferpool.Pool, opts Options) (*FS, error) { panic("unimplemented") }

// Close drains every dirty page (except in Scratch mode), stops workers,
// closes backing fds. It does not close the pool.
func (fs *FS) Close() error { panic("unimplemented") }

// Sync is syncfs: returns when every file's data and size are on the
// backing store (no-op in Scratch mode).
func (fs *FS) Sync() error { panic("unimplemented") }

func (fs *FS) Stats() Stats { panic("unimplemented") }

// Statfs reports pool capacity as blocks (Bsize = 4096) and namespace
// inode counts.
func (fs *FS) Statfs() (unix.Statfs_t, error) { panic("unimplemented") }

// Lstat returns the attributes of path, with size/mtime/blocks taken from
// the buffered file when its data is newer than the backing store.
func (fs *FS) Lstat(path string) (unix.Stat_t, error)                   { panic("unimplemented") }
func (fs *FS) ReadDir(path string) ([]DirEntry, error)                  { panic("unimplemented") }
func (fs *FS) Mkdir(path string, mode uint32, c Cred) error             { panic("unimplemented") }
func (fs *FS) Rmdir(path string) error                                  { panic("unimplemented") }
func (fs *FS) Unlink(path string) error                                 { panic("unimplemented") }
func (fs *FS) Symlink(target, path string, c Cred) error                { panic("unimplemented") }
func (fs *FS) Readlink(path string) (string, error)                     { panic("unimplemented") }
func (fs *FS) Link(oldPath, newPath string) error                       { panic("unimplemented") }
func (fs *FS) Mknod(path string, mode uint32, dev uint32, c Cred) error { panic("unimplemented") }

// Rename is renameat2(2); flags may hold RENAME_NOREPLACE / RENAME_EXCHANGE.
func (fs *FS) Rename(oldPath, newPath string, flags uint32) error { panic("unimplemented") }

// Setattr applies a; h (may be nil) is an open handle of the file, used
// for ftruncate/fchmod of an unlinked file.
func (fs *FS) Setattr(path string, h *Handle, a SetAttr) (unix.Stat_t, error) {
	panic("unimplemented")
}

// Xattrs: only the user.* namespace is served; others get ENOTSUP
// (get of security.* returns ENODATA).
func (fs *FS) Getxattr(path, name string, dest []byte) (int, error)    { panic("unimplemented") }
func (fs *FS) Setxattr(path, name string, val []byte, flags int) error { panic("unimplemented") }
func (fs *FS) Listxattr(path string, dest []byte) (int, error)         { panic("unimplemented") }
func (fs *FS) Removexattr(path, name string) error                     { panic("unimplemented") }

// Open opens (and with O_CREAT creates, owned by c) a regular file.
// O_TRUNC, O_EXCL, O_APPEND are honoured; O_DIRECT is accepted (the pool
// is the cache the application bypasses the kernel's page cache into).
func (fs *FS) Open(path string, flags int, mode uint32, c Cred) (*Handle, unix.Stat_t, error) {
	panic("unimplemented")
}

// Handle is an open file. Safe for concurrent use.
type Handle struct{}

// ReadAt reads at off; short at EOF; 0,nil at or past EOF.
func (h *Handle) ReadAt(buf []byte, off int64) (int, error) { panic("unimplemented") }

// WriteAt writes at off, or at EOF atomically if opened O_APPEND.
func (h *Handle) WriteAt(data []byte, off int64) (int, error) { panic("unimplemented") }

// Getattr is fstat (works after unlink).
func (h *Handle) Getattr() (unix.Stat_t, error) { panic("unimplemented") }

// Fsync returns when the file's data (and size; all metadata unless
// datasync) are on the backing store.
func (h *Handle) Fsync(datasync bool) error { panic("unimplemented") }

// Flush is called on every close(2) of an fd of this handle: starts the
// write-back; waits for it with FlushOnClose.
func (h *Handle) Flush() error { panic("unimplemented") }

// Release is the last close of the handle.
func (h *Handle) Release() error { panic("unimplemented") }

// Allocate is fallocate(2); mode 0 (and KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE,
// ZERO_RANGE) supported, others EOPNOTSUPP.
func (h *Handle) Allocate(off, n int64, mode uint32) error { panic("unimplemented") }

// Lseek handles SEEK_DATA and SEEK_HOLE (the file is reported as one data
// extent up to its size); ENXIO past EOF.
func (h *Handle) Lseek(off int64, whence int) (int64, error) { panic("unimplemented") }

// PassthroughFd returns a kernel-passthrough fd (the file's RAM-tier
// memfd) when the file is opened read-only and fully resident in the
// first tier; the file stays pinned there while the handle is open.
func (h *Handle) PassthroughFd() (int, bool) { panic("unimplemented") }
