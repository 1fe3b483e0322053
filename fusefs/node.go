package fusefs

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// mount is the state shared by every node of one mount. Safe for
// concurrent use.
type mount struct {
	fs            *files.FS
	opts          Options
	keepCache     bool
	keepCacheAuto bool // keep the cache when the file layer says it is valid
	// passthrough: Options.Passthrough, and the kernel took
	// CAP_PASSTHROUGH (set by Mount once the kernel answered INIT; an
	// open before that is not passed through).
	passthrough atomic.Bool
	attrTTL     time.Duration
	entryTTL    time.Duration
	negTTL      time.Duration

	// nextGen hands out the generation of every new node, so that no two
	// nodes ever share a StableAttr and go-fuse's own de-duplication never
	// merges two different files (see inode).
	nextGen atomic.Uint64

	// inoMu guards inodes. Lock order: inoMu, then go-fuse's locks
	// (Inode.Parent, Inode.NewInode); go-fuse never calls us (OnForget)
	// with its locks held.
	inoMu sync.Mutex
	// inodes maps a backing inode number to the live node that stands for
	// it, so that hard links share one Inode and a file keeps its node
	// while the kernel references it.
	inodes map[uint64]*node

	// omni serves /.omni (nil when off); set before the mount serves.
	omni *omniFS
}

// node is every kind of inode: directory, regular file, symlink, fifo,
// socket, device. It addresses the file layer by its path relative to the
// root, recomputed from the go-fuse tree for every call, so a rename of
// any ancestor is seen at once.
type node struct {
	fs.Inode
	m *mount
	// privs is set while the last attributes seen had S_ISUID or S_ISGID:
	// only then does a write look at the mode to clear them.
	privs atomic.Bool
	// last is the last stat seen; fstat of a directory removed while open
	// answers from it (the file layer has no directory handles).
	last atomic.Pointer[unix.Stat_t]

	openMu sync.Mutex
	// open holds the file layer's handles of n's open files: fchmod,
	// fchown and fgetattr of a file unlinked while open arrive without a
	// handle (the kernel names one only for ftruncate) and need one.
	open map[*files.Handle]struct{}
	// ptOpens counts the open handles the kernel passes through to the
	// file's RAM-tier segment (admit); ptGone is closed when it falls
	// back to 0.
	ptOpens int
	ptGone  chan struct{}
	// lastRelease and lastPtRelease are when an open of n, and a
	// passed-through one, were last released (admit, ptSettle).
	lastRelease, lastPtRelease time.Time
}

func (n *node) removeOpen(h *files.Handle, passthrough bool) {
	n.openMu.Lock()
	delete(n.open, h)
	n.lastRelease = time.Now()
	if passthrough {
		n.lastPtRelease = n.lastRelease
		if n.ptOpens--; n.ptOpens == 0 {
			close(n.ptGone)
		}
	}
	n.openMu.Unlock()
}

// anyOpen returns one open handle of n, or nil.
func (n *node) anyOpen() *files.Handle {
	n.openMu.Lock()
	defer n.openMu.Unlock()
	for h := range n.open {
		return h
	}
	return nil
}

// handleFor is the handle to address n through: the one the kernel named,
// or, once n has no name left, any open handle of it.
func (n *node) handleFor(f fs.FileHandle) *files.Handle {
	if h := handleOf(f); h != nil {
		return h
	}
	if n.orphaned() && !n.IsRoot() {
		return n.anyOpen()
	}
	return nil
}

var (
	_ fs.InodeEmbedder      = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFlusher        = (*node)(nil)
	_ fs.NodeReleaser       = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeLseeker        = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
)

func newRoot(fsys *files.FS, opts Options) (*node, fs.StableAttr, error) {
	st, err := fsys.Lstat("")
	if err != nil {
		return nil, fs.StableAttr{}, err
	}
	m := &mount{
		fs:       fsys,
		opts:     opts,
		attrTTL:  orDefault(opts.AttrTimeout, defaultTimeout),
		entryTTL: orDefault(opts.EntryTimeout, defaultTimeout),
		negTTL:   opts.NegativeTimeout,
		inodes:   make(map[uint64]*node),
	}
	switch opts.KeepCache {
	case KeepCacheAlways:
		m.keepCache = true
	case KeepCacheAuto:
		m.keepCacheAuto = true
	}
	// The root's identity reaches go-fuse through Options.RootStableAttr.
	return &node{m: m}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: st.Ino}, nil
}

// --- paths and identity ---

// path is n's path relative to the root ("" for the root); ok is false
// once n has no name left (unlinked while open).
func (n *node) path() (p string, ok bool) {
	root := n.Root()
	var segs []string
	for in := &n.Inode; in != root; {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		in = parent
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return strings.Join(segs, "/"), true
}

// childPath is the path of name inside directory n.
func (n *node) childPath(name string) (string, syscall.Errno) {
	p, ok := n.path()
	if !ok {
		return "", syscall.ENOENT
	}
	if p == "" {
		return name, 0
	}
	return p + "/" + name, 0
}

// orphaned reports whether n has no name in the tree any more.
func (n *node) orphaned() bool {
	_, parent := n.Parent()
	return parent == nil
}

// inode returns the node for the file name in directory n whose
// attributes are st: the child already known under that name, the live
// node of the same backing inode (a hard link), or a new node. A node whose
// file was unlinked is never reused, even if the backing store reuses its
// inode number: the new file gets a new generation, hence a new node ID.
func (n *node) inode(ctx context.Context, name string, st *unix.Stat_t) *fs.Inode {
	mode := st.Mode & syscall.S_IFMT
	if ch := n.GetChild(name); ch != nil {
		if sa := ch.StableAttr(); sa.Ino == st.Ino && sa.Mode == mode {
			return ch
		}
	}
	n.m.inoMu.Lock()
	defer n.m.inoMu.Unlock()
	if old := n.m.inodes[st.Ino]; old != nil && old.StableAttr().Mode == mode && !old.orphaned() {
		return &old.Inode
	}
	child := &node{m: n.m}
	id := fs.StableAttr{Mode: mode, Ino: st.Ino, Gen: n.m.nextGen.Add(1)}
	in := n.NewInode(ctx, child, id)
	n.m.inodes[st.Ino] = child
	return in
}

// OnForget drops the node from the inode table once go-fuse lets go of it.
func (n *node) OnForget() {
	ino := n.StableAttr().Ino
	n.m.inoMu.Lock()
	if n.m.inodes[ino] == n {
		delete(n.m.inodes, ino)
	}
	n.m.inoMu.Unlock()
}

// --- attributes ---

// observe records what a write needs to know of st.
func (n *node) observe(st *unix.Stat_t) {
	n.privs.Store(st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0)
	c := *st
	n.last.Store(&c)
}

func (n *node) attrOut(st *unix.Stat_t, out *fuse.AttrOut) {
	n.observe(st)
	fillAttr(st, &out.Attr)
	out.SetTimeout(n.attrTTL())
}

// attrTTL is how long the kernel may cache n's attributes: not at all
// while a shim may write n, since shims raise its size in shared memory
// (bufferpool/lease.go) and stat, lseek(SEEK_END) and O_APPEND of other
// processes must see it at once. (One nanosecond, not 0: go-fuse puts
// the mount's default in place of a 0.)
func (n *node) attrTTL() time.Duration {
	if shimWriting(n) {
		return time.Nanosecond
	}
	return n.m.attrTTL
}

// entryOut fills the reply of a lookup or a create for child ch.
func (n *node) entryOut(ch *fs.Inode, st *unix.Stat_t, out *fuse.EntryOut) {
	if c, ok := ch.Operations().(*node); ok {
		c.observe(st)
	}
	fillAttr(st, &out.Attr)
	out.SetEntryTimeout(n.m.entryTTL)
	ttl := n.m.attrTTL
	if c, ok := ch.Operations().(*node); ok {
		ttl = c.attrTTL()
	}
	out.SetAttrTimeout(ttl)
}

// stat is fstat through f when the kernel names a handle (it works after
// unlink), lstat of the path otherwise.
func (n *node) stat(f fs.FileHandle) (unix.Stat_t, error) {
	if h := n.handleFor(f); h != nil {
		return h.Getattr()
	}
	p, ok := n.path()
	if !ok {
		return n.removedStat()
	}
	return n.m.fs.Lstat(p)
}

// removedStat is fstat of a directory (or other handle-less node) that was
// removed while open: its last attributes with no links left, as Linux
// reports it.
func (n *node) removedStat() (unix.Stat_t, error) {
	last := n.last.Load()
	if last == nil || n.IsRoot() {
		return unix.Stat_t{}, syscall.ENOENT
	}
	st := *last
	st.Nlink = 0
	return st, nil
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, err := n.stat(f)
	if err != nil {
		return toErrno(err)
	}
	n.attrOut(&st, out)
	return 0
}

// Setattr is chmod, chown, truncate/ftruncate and utimens. With
// CAP_HANDLE_KILLPRIV_V2 the kernel leaves clearing suid/sgid to us: on
// chown always (as the VFS does for regular files), on truncate when the
// kernel says the caller lacks CAP_FSETID (FATTR_KILL_SUIDGID).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	a := setAttrOf(in)
	chown := a.Uid != nil || a.Gid != nil
	if a.Mode == nil && (chown || in.Valid&fuse.FATTR_KILL_SUIDGID != 0) {
		st, err := n.stat(f)
		if err != nil {
			return toErrno(err)
		}
		// FATTR_KILL_SUIDGID means the kernel found the caller
		// unprivileged; a chown by root still clears the bits.
		unprivileged := in.Valid&fuse.FATTR_KILL_SUIDGID != 0
		if m, kill := killSuidgid(&st, caller(ctx), !unprivileged); kill {
			a.Mode = &m
		}
	}
	h := n.handleFor(f)
	p, ok := n.path()
	if !ok && h == nil {
		return n.setattrGone(in, out)
	}
	st, err := n.m.fs.Setattr(p, h, a)
	if err != nil {
		return toErrno(err)
	}
	n.attrOut(&st, out)
	return 0
}

// setattrGone answers a setattr of a node with no name and no open file
// left. Only the kernel sends one: with the writeback cache it writes the
// times of a dirty inode back (fuse_write_inode) after the last close, and
// an unlinked file has nowhere to keep them. Anything else is ENOENT.
func (n *node) setattrGone(in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	const times = fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_CTIME | fuse.FATTR_FH |
		fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW | fuse.FATTR_LOCKOWNER
	st, err := n.removedStat()
	if !n.m.opts.WritebackCache || in.Valid&^times != 0 || err != nil {
		return syscall.ENOENT
	}
	n.attrOut(&st, out)
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	st, err := n.m.fs.Statfs()
	if err != nil {
		return toErrno(err)
	}
	out.Blocks = st.Blocks
	out.Bfree = st.Bfree
	out.Bavail = st.Bavail
	out.Files = st.Files
	out.Ffree = st.Ffree
	out.Bsize = uint32(st.Bsize)
	out.Frsize = uint32(st.Frsize)
	if out.Frsize == 0 {
		out.Frsize = out.Bsize
	}
	out.NameLen = uint32(st.Namelen)
	if out.NameLen == 0 {
		out.NameLen = 255
	}
	return 0
}
