package fusefs

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirHandle is an open directory. The listing is read from the file layer
// on the first readdir and again on every rewind (offset 0), so
// rewinddir(3) sees entries created since opendir. An offset is the index
// of the next entry in that listing, so telldir/seekdir are exact while
// the listing is kept.
type dirHandle struct {
	n *node

	mu sync.Mutex
	// entries is nil until loaded.
	entries []fuse.DirEntry
	next    int
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
)

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if _, ok := n.path(); !ok {
		return nil, 0, syscall.ENOENT
	}
	return &dirHandle{n: n}, 0, 0
}

// loadLocked reads the listing, with "." and ".." first as a local file
// system returns them.
func (d *dirHandle) loadLocked() syscall.Errno {
	p, ok := d.n.path()
	if !ok {
		return syscall.ENOENT
	}
	list, err := d.n.m.fs.ReadDir(p)
	if err != nil {
		return toErrno(err)
	}
	self := d.n.StableAttr().Ino
	parent := self
	if _, pi := d.n.Parent(); pi != nil {
		parent = pi.StableAttr().Ino
	}
	entries := make([]fuse.DirEntry, 0, len(list)+2)
	entries = append(entries,
		fuse.DirEntry{Name: ".", Ino: self, Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Ino: parent, Mode: syscall.S_IFDIR})
	for _, e := range list {
		entries = append(entries, fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode & syscall.S_IFMT})
	}
	d.entries = entries
	d.next = 0
	return 0
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries == nil {
		if errno := d.loadLocked(); errno != 0 {
			return nil, errno
		}
	}
	if d.next >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[d.next]
	d.next++
	e.Off = uint64(d.next)
	return &e, 0
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 {
		return d.loadLocked()
	}
	if d.entries == nil {
		if errno := d.loadLocked(); errno != 0 {
			return errno
		}
	}
	d.next = min(int(off), len(d.entries))
	return 0
}

// Fsyncdir is fsync(2) of the directory: the file layer applies every
// namespace operation to the backing directory at once, so fsyncing that
// directory makes its entries (new names, renames, unlinks) durable there.
// A directory removed while open has nothing left to make durable.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	p, ok := d.n.path()
	if !ok {
		return 0
	}
	return toErrno(d.n.m.fs.Fsyncdir(p))
}

func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {}
