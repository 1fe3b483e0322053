package files

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The hook of a cluster's shared namespace (package cluster,
// cluster.shared_namespace): the whole of this layer's part in it is
// here, plus one call in each of Open, Flush, lstatAt, readPage and
// readAhead. Without a Remote nothing changes: nodes meet through the
// backing store, close-to-open.
//
// With one, a file has at most one owner node at a time (the cluster
// records it in etcd with that node's lease). A writing open makes this
// node the owner, the previous owner first writing the file back. A
// read-only open on another node takes the owner's view (the size it
// published at its last close, and a version) and from then its misses
// are pages read from the owner, installed clean; the read-ahead does
// not run (it would stage the backing file's older bytes). A new view
// (the owner closed again, another node took over, the owner died and
// its lease expired) drops the pages taken from the old one:
// close-to-open consistency, as with the backing store.

// Remote is a cluster's shared namespace as the file layer asks it.
// Implementations are safe for concurrent use.
type Remote interface {
	// Open is called at each open of path before the file's pages are
	// looked at. A writing open makes this node path's owner (revoking
	// another owner, which writes the file back first) and returns nil.
	// A read-only open returns the owner's view when another node owns
	// path, nil when none does (the backing file is the truth).
	Open(path string, write bool) (*RemoteView, error)
	// Stat returns the size path's owner published, when another node
	// owns it (ok false: the backing store's size stands). An error (the
	// cluster does not answer) fails the stat: the backing store's size
	// may be short of what the owner holds.
	Stat(path string) (size int64, ok bool, err error)
	// ReadPage reads page i of path (page is one page) from v's owner;
	// n < len(page): the rest is past its end. An owner that cannot be
	// reached is an error wrapping EIO.
	ReadPage(v *RemoteView, path string, i int64, page []byte) (n int, err error)
	// Closed is called at each close of a writing handle of path, whose
	// size is then size: the owner publishes it for the next opens.
	Closed(path string, size int64)
	// Renamed is called after a rename on this node (exchange: the two
	// names were swapped): what this node owns under oldPath is owned
	// under newPath from now on.
	Renamed(oldPath, newPath string, exchange bool)
	// Unlinked is called after an unlink on this node: this node no
	// longer owns path.
	Unlinked(path string)
}

// RemoteView is what a read-only open learned of another node's file.
type RemoteView struct {
	Owner   string // node name
	Size    int64  // the size the owner published at its last close
	Version int64  // changes at each publication
}

// SetRemote attaches a cluster's shared namespace; call before serving.
func (fs *FS) SetRemote(r Remote) {
	fs.remote = r
	fs.remoteSem = make(chan struct{}, remoteInFlight)
}

// remoteAhead is how many pages past a remote miss are fetched in the
// background (each miss is a round trip to the owner: a sequential
// reader would wait for every one); remoteInFlight bounds those fetches
// per FS.
const (
	remoteAhead    = 4
	remoteInFlight = 8
)

// remoteState is a file's part in the shared namespace.
type remoteState struct {
	view atomic.Pointer[RemoteView] // nil: no other node owns the file

	mu       sync.Mutex
	inflight map[int64]chan struct{} // pages being fetched: closed when done
}

// begin registers a fetch of page i; if one is in flight already it
// returns that fetch's channel instead.
func (r *remoteState) begin(i int64) (wait chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.inflight[i]; ok {
		return ch
	}
	if r.inflight == nil {
		r.inflight = map[int64]chan struct{}{}
	}
	r.inflight[i] = make(chan struct{})
	return nil
}

func (r *remoteState) end(i int64) {
	r.mu.Lock()
	ch := r.inflight[i]
	delete(r.inflight, i)
	r.mu.Unlock()
	close(ch)
}

// openRemote is Open's call, before the file is attached (a revoked
// owner has written it back by then).
func (fs *FS) openRemote(p string, flags int) (*RemoteView, error) {
	if fs.remote == nil || fs.scratch {
		return nil, nil
	}
	v, err := fs.remote.Open(p, flags&unix.O_ACCMODE != unix.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	return v, nil
}

// useRemote takes view v (nil: no other owner) for f; it reports whether
// the pages of the previous view were dropped.
func (f *file) useRemote(v *RemoteView) (dropped bool) {
	if f.fs.remote == nil {
		return false
	}
	old := f.remote.view.Load()
	if old == v || (old != nil && v != nil && *old == *v) {
		return false
	}
	f.lockBacking()
	defer f.unlockBacking()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bucket.HasDirty() {
		f.remote.view.Store(nil) // this node wrote it: its pages are the newest
		return false
	}
	// The view first: a fetch of the old one still in flight then fails
	// its install check, or installed before the truncation drops it.
	f.remote.view.Store(v)
	if err := f.bucket.Truncate(0); err != nil {
		return false
	}
	size := int64(0)
	if v != nil {
		size = v.Size
	} else {
		var st unix.Stat_t
		if unix.Fstat(int(f.backing.Fd()), &st) == nil {
			size = st.Size
			f.backingSize.Store(st.Size)
			f.stateMu.Lock()
			f.seenSize, f.seenMtime = st.Size, st.Mtim
			f.stateMu.Unlock()
		}
	}
	f.size.Store(size)
	f.shareSize()
	return true
}

// closedRemote is Flush's call for a writing handle.
func (f *file) closedRemote() {
	if r := f.fs.remote; r != nil && f.remote.view.Load() == nil {
		f.syncShim()
		r.Closed(f.displayName(), f.size.Load())
	}
}

// renamedRemote is Rename's call.
func (fs *FS) renamedRemote(oldPath, newPath string, flags uint32) {
	if fs.remote != nil {
		fs.remote.Renamed(oldPath, newPath, flags&unix.RENAME_EXCHANGE != 0)
	}
}

// unlinkedRemote is Unlink's call.
func (fs *FS) unlinkedRemote(p string) {
	if fs.remote != nil {
		fs.remote.Unlinked(p)
	}
}

// statRemote puts the size another node's owner published into st.
func (fs *FS) statRemote(p string, st *unix.Stat_t) error {
	if fs.remote == nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	size, ok, err := fs.remote.Stat(p)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if ok {
		st.Size = size
		if blocks := (size + 4095) / 4096 * 8; blocks > st.Blocks {
			st.Blocks = blocks
		}
	}
	return nil
}

// readRemote serves a miss of page i from the owner of view v (or waits
// for the fetch of it in flight) and fetches the next pages behind it.
func (f *file) readRemote(v *RemoteView, i, po int64, dst []byte) error {
	if ch := f.remote.begin(i); ch != nil {
		<-ch
		f.aheadRemote(v, i)
		if found, err := f.bucket.ReadPage(i, po, dst, nil); err != nil || found {
			return err
		}
		return f.fetchRemote(v, i, po, dst) // that fetch failed or found no room
	}
	err := f.fetchRemote(v, i, po, dst)
	f.remote.end(i)
	if err == nil {
		f.aheadRemote(v, i)
	}
	return err
}

// aheadRemote fetches the pages after i that are absent, in the
// background, as far as remoteInFlight allows.
func (f *file) aheadRemote(v *RemoteView, i int64) {
	last := (v.Size - 1) / f.fs.ps
	for k := i + 1; k <= min(i+remoteAhead, last); k++ {
		if f.bucket.HasPage(k) || f.remote.begin(k) != nil {
			continue
		}
		select {
		case f.fs.remoteSem <- struct{}{}:
		default:
			f.remote.end(k)
			return
		}
		go func() {
			defer func() { <-f.fs.remoteSem }()
			f.fetchRemote(v, k, 0, nil) // a failure: the demand read asks again
			f.remote.end(k)
		}()
	}
}

// fetchRemote reads page i from the owner of view v, installs it clean
// while v is still the file's view, and copies it into dst at po (dst
// nil: the read-ahead).
func (f *file) fetchRemote(v *RemoteView, i, po int64, dst []byte) error {
	bp := f.fs.getPage()
	defer f.fs.putPage(bp)
	page := *bp
	n, err := f.fs.remote.ReadPage(v, f.displayName(), i, page)
	if err != nil {
		return fmt.Errorf("page %d from node %s: %w", i, v.Owner, err)
	}
	clear(page[n:])
	if _, err := f.bucket.InstallPageIf(i, page, func() bool { return f.remote.view.Load() == v }); err != nil && !errors.Is(err, ErrNoSpace) {
		return err
	}
	copy(dst, page[po:]) // installed, or not (full, or read meanwhile): the same bytes
	return nil
}
