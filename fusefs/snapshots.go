package fusefs

// The hidden /.snapshots directory: one directory per snapshot of the
// file layer (bufferpool/files/snapshot.go), holding the tree as it was
// at create. Found by name only (the root's readdir does not list it, as
// /.omni). Everything is read-only (EROFS); every entry has the mode,
// owner and times its original had at create, so the kernel
// (default_permissions) grants exactly what it granted then.

import (
	"context"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// snapBase is embedded in every node under /.snapshots.
type snapBase struct {
	fs.Inode
	roNode
	m *mount
}

// snapRoot is /.snapshots: the snapshots by name.
type snapRoot struct{ snapBase }

var (
	_ fs.NodeLookuper  = (*snapRoot)(nil)
	_ fs.NodeReaddirer = (*snapRoot)(nil)
	_ fs.NodeGetattrer = (*snapRoot)(nil)
)

// lookupSnapshots is the root's lookup of ".snapshots" (hidden).
func (n *node) lookupSnapshots(ctx context.Context, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	var ch *fs.Inode
	if old := n.GetChild(files.SnapshotDir); old != nil {
		if _, ok := old.Operations().(*snapRoot); ok {
			ch = old
		}
	}
	if ch == nil {
		ch = n.NewInode(ctx, &snapRoot{snapBase{m: n.m}}, fs.StableAttr{Mode: syscall.S_IFDIR})
	}
	var ao fuse.AttrOut
	if errno := ch.Operations().(*snapRoot).Getattr(ctx, nil, &ao); errno != 0 {
		return nil, errno
	}
	out.Attr = ao.Attr
	out.SetEntryTimeout(n.m.entryTTL)
	out.SetAttrTimeout(n.m.attrTTL)
	return ch, 0
}

// Getattr: the mount root's owner and times, mode 0555.
func (r *snapRoot) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, err := r.m.fs.Lstat("")
	if err != nil {
		return toErrno(err)
	}
	ownerTimes(&st, &out.Attr)
	out.Mode = syscall.S_IFDIR | 0o555
	out.Nlink = 2
	return 0
}

func (r *snapRoot) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	names := r.m.fs.SnapshotNames()
	out := make([]fuse.DirEntry, 0, len(names))
	for _, n := range names {
		out = append(out, fuse.DirEntry{Name: n, Mode: syscall.S_IFDIR})
	}
	return fs.NewListDirStream(out), 0
}

func (r *snapRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return r.lookupEntry(ctx, name, "", out)
}

// lookupEntry returns the node of entry sub of snapshot snap, child name
// of b.
func (b *snapBase) lookupEntry(ctx context.Context, snap, sub string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	e, rd, err := b.m.fs.SnapshotEntry(snap, sub)
	if err != nil {
		return nil, toErrno(err)
	}
	name := path.Base(sub)
	if sub == "" {
		name = snap
	}
	var ch *fs.Inode
	if old := b.GetChild(name); old != nil {
		if sn, ok := old.Operations().(*snapNode); ok && sn.e == e {
			ch = old
		}
	}
	if ch == nil {
		sn := &snapNode{snapBase: snapBase{m: b.m}, snap: snap, sub: sub, e: e, rd: rd}
		ch = b.NewInode(ctx, sn, fs.StableAttr{Mode: e.Stat.Mode & unix.S_IFMT})
	}
	snapAttr(&e.Stat, &out.Attr)
	out.SetEntryTimeout(b.m.entryTTL)
	out.SetAttrTimeout(b.m.attrTTL)
	return ch, 0
}

// snapNode is one entry of a snapshot.
type snapNode struct {
	snapBase
	snap, sub string
	e         *files.SnapEntry
	rd        *files.SnapReader // regular files
}

var (
	_ fs.NodeLookuper   = (*snapNode)(nil)
	_ fs.NodeReaddirer  = (*snapNode)(nil)
	_ fs.NodeGetattrer  = (*snapNode)(nil)
	_ fs.NodeReadlinker = (*snapNode)(nil)
	_ fs.NodeOpener     = (*snapNode)(nil)
	_ fs.NodeReader     = (*snapNode)(nil)
)

// snapAttr fills a from the entry's attributes at create.
func snapAttr(st *unix.Stat_t, a *fuse.Attr) {
	a.Mode = st.Mode
	a.Nlink = uint32(st.Nlink)
	a.Size = uint64(st.Size)
	a.Blocks = uint64(st.Blocks)
	a.Blksize = uint32(st.Blksize)
	a.Rdev = uint32(st.Rdev)
	a.Uid, a.Gid = st.Uid, st.Gid
	a.Atime, a.Atimensec = uint64(st.Atim.Sec), uint32(st.Atim.Nsec)
	a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(st.Ctim.Sec), uint32(st.Ctim.Nsec)
}

// live reports whether the node's snapshot still exists (a deleted one
// answers ENOENT, whatever the kernel still references).
func (s *snapNode) live() syscall.Errno {
	e, _, err := s.m.fs.SnapshotEntry(s.snap, s.sub)
	if err != nil || e != s.e {
		return syscall.ENOENT
	}
	return 0
}

func (s *snapNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if errno := s.live(); errno != 0 {
		return errno
	}
	snapAttr(&s.e.Stat, &out.Attr)
	out.SetTimeout(s.m.attrTTL)
	return 0
}

func (s *snapNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !s.e.IsDir() {
		return nil, syscall.ENOTDIR
	}
	return s.lookupEntry(ctx, s.snap, path.Join(s.sub, name), out)
}

func (s *snapNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if errno := s.live(); errno != 0 {
		return nil, errno
	}
	if !s.e.IsDir() {
		return nil, syscall.ENOTDIR
	}
	out := make([]fuse.DirEntry, 0, len(s.e.Children))
	for _, c := range s.e.Children {
		mode := uint32(syscall.S_IFREG)
		if ce, _, err := s.m.fs.SnapshotEntry(s.snap, path.Join(s.sub, c)); err == nil {
			mode = ce.Stat.Mode & unix.S_IFMT
		}
		out = append(out, fuse.DirEntry{Name: c, Mode: mode})
	}
	return fs.NewListDirStream(out), 0
}

func (s *snapNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if s.e.Stat.Mode&unix.S_IFMT != unix.S_IFLNK {
		return nil, syscall.EINVAL
	}
	return []byte(s.e.Target), 0
}

func (s *snapNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if !readOnly(flags) {
		return nil, 0, syscall.EROFS
	}
	if errno := s.live(); errno != 0 {
		return nil, 0, errno
	}
	if s.rd == nil {
		return nil, 0, syscall.EINVAL // devices, fifos: not served from a snapshot
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0 // immutable: the kernel may keep what it read
}

func (s *snapNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if s.rd == nil {
		return nil, syscall.EISDIR
	}
	n, err := s.rd.ReadAt(dest, off)
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}
