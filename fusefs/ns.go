package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// Namespace operations: each resolves the path(s) from the tree, calls the
// file layer, and for a new name stats it to hand the kernel an entry.

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == omniDirName && n.m.omni != nil && n.IsRoot() {
		return n.lookupOMNI(ctx, out)
	}
	if name == files.SnapshotDir && n.IsRoot() {
		return n.lookupSnapshots(ctx, out) // snapshots.go
	}
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, errno
	}
	st, err := n.m.fs.Lstat(p)
	if err != nil {
		errno = toErrno(err)
		if errno == syscall.ENOENT {
			out.SetEntryTimeout(n.m.negTTL)
		}
		return nil, errno
	}
	ch := n.inode(ctx, name, &st)
	n.entryOut(ch, &st, out)
	return ch, 0
}

// created finishes an operation that made name in n: stat it and build
// its node and entry.
func (n *node) created(ctx context.Context, name, p string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	st, err := n.m.fs.Lstat(p)
	if err != nil {
		return nil, toErrno(err)
	}
	ch := n.inode(ctx, name, &st)
	n.entryOut(ch, &st, out)
	return ch, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.m.fs.Mkdir(p, mode, caller(ctx)); err != nil {
		return nil, toErrno(err)
	}
	return n.created(ctx, name, p, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.m.fs.Mknod(p, mode, dev, caller(ctx)); err != nil {
		return nil, toErrno(err)
	}
	return n.created(ctx, name, p, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.m.fs.Symlink(target, p, caller(ctx)); err != nil {
		return nil, toErrno(err)
	}
	return n.created(ctx, name, p, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	oldPath, ok := t.path()
	if !ok {
		return nil, syscall.ENOENT
	}
	p, errno := n.childPath(name)
	if errno != 0 {
		return nil, errno
	}
	if err := n.m.fs.Link(oldPath, p); err != nil {
		return nil, toErrno(err)
	}
	return n.created(ctx, name, p, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return nil, syscall.ENOENT
	}
	target, err := n.m.fs.Readlink(p)
	if err != nil {
		return nil, toErrno(err)
	}
	return []byte(target), 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	p, errno := n.childPath(name)
	if errno != 0 {
		return errno
	}
	return toErrno(n.m.fs.Unlink(p))
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	p, errno := n.childPath(name)
	if errno != 0 {
		return errno
	}
	return toErrno(n.m.fs.Rmdir(p))
}

// Rename is renameat2; go-fuse moves (or exchanges) the children in the
// tree when we return 0.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	oldPath, errno := n.childPath(name)
	if errno != 0 {
		return errno
	}
	newPath, errno := np.childPath(newName)
	if errno != 0 {
		return errno
	}
	return toErrno(n.m.fs.Rename(oldPath, newPath, flags))
}

// --- extended attributes (user.* is served by the file layer) ---

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return 0, syscall.ENOENT
	}
	sz, err := n.m.fs.Getxattr(p, attr, dest)
	return uint32(sz), toErrno(err)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	p, ok := n.path()
	if !ok {
		return syscall.ENOENT
	}
	return toErrno(n.m.fs.Setxattr(p, attr, data, int(flags)))
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return 0, syscall.ENOENT
	}
	sz, err := n.m.fs.Listxattr(p, dest)
	return uint32(sz), toErrno(err)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	p, ok := n.path()
	if !ok {
		return syscall.ENOENT
	}
	return toErrno(n.m.fs.Removexattr(p, attr))
}
