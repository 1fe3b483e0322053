package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// roNode answers every call that would change a node, its name or its
// attributes with EROFS. The nodes of the read-only trees (/.omni,
// /.snapshots) embed it.
type roNode struct{}

func (roNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (roNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (roNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (roNode) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (roNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (roNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (roNode) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (roNode) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }
func (roNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (roNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (roNode) Removexattr(ctx context.Context, attr string) syscall.Errno { return syscall.EROFS }

var (
	_ fs.NodeSetattrer     = roNode{}
	_ fs.NodeMkdirer       = roNode{}
	_ fs.NodeCreater       = roNode{}
	_ fs.NodeMknoder       = roNode{}
	_ fs.NodeSymlinker     = roNode{}
	_ fs.NodeLinker        = roNode{}
	_ fs.NodeUnlinker      = roNode{}
	_ fs.NodeRmdirer       = roNode{}
	_ fs.NodeRenamer       = roNode{}
	_ fs.NodeSetxattrer    = roNode{}
	_ fs.NodeRemovexattrer = roNode{}
)
