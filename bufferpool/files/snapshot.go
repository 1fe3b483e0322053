package files

// Snapshots of a file tree: copy-on-write of pages in the pool.
//
// A snapshot records, for every entry of the tree under its path, the
// attributes it had when the walk reached it (mode, owner, times, size,
// a symlink's target), and for every regular file a reference to the
// file's pool object (a snapFile). It copies no data at create: a page
// of the snapshot is shared with the live file (its resident page, or
// the backing file for a page that is not resident) until something is
// about to change that page. Every path that changes a page's bytes
// (write, truncate, fallocate zeroing or punching) first calls
// file.preserve, which copies the page as it is into the snapshot's own
// page bucket ("snapshot:NAME:N", dirty so the pool never drops it)
// before the change is made. Those copies count against the tiers'
// capacity like any page; a copy that does not fit fails the write with
// ErrNoSpace and changes nothing. Delete drops the buckets: the capacity
// comes back at once.
//
// Pages not resident at create are not staged in: the backing file holds
// their bytes, and they are read from there (through the live file) until
// a write copies them. Staging them in would make a snapshot of a tree
// larger than the pool impossible and cost a full read of the tree at
// create; sharing costs nothing until a page is changed. The price: a
// change made to the backing directory outside the mount (another node)
// is seen through the pages the snapshot still shares, as it is through
// the mount itself.
//
// Locking: a reader of the snapshot takes f.mu shared, then sf.mu shared,
// and reads the copy if there is one, else the live page; a writer holds
// f.mu (shared for a write, exclusive for truncate and fallocate) and
// preserve takes sf.mu exclusively, so a live page is never read by the
// snapshot after its change began. f.mu before sf.mu, always.
//
// The shim (LD_PRELOAD) writes resident pages in shared memory, where
// preserve cannot see it: create refuses (EBUSY) a file a read-write shim
// map is granted for, and no read-write map is granted for a file a
// snapshot shares (ShimMaps), so the shim takes the kernel path for it.
//
// Create walks the namespace first, attaching every regular file, then
// installs the sharing on all of them at one instant (snapshot.install).
//
// Snapshots live in the daemon's memory and pool: they do not survive a
// restart of the daemon (export writes one to a directory for that).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// SnapshotDir is the hidden directory at the root of the mount where
// snapshots are read (fusefs serves it).
const SnapshotDir = ".snapshots"

// ErrSnapshotExists / ErrNoSnapshot are returned (wrapped) by the
// snapshot operations.
var (
	ErrSnapshotExists = errors.New("snapshot exists")
	ErrNoSnapshot     = errors.New("no such snapshot")
)

// SnapshotInfo describes one snapshot (iowarp snapshot list).
type SnapshotInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"` // mount-relative root of the tree ("" = the mount)
	Created time.Time `json:"created"`
	Files   int       `json:"files"`
	Dirs    int       `json:"dirs"`
	Bytes   int64     `json:"bytes"` // logical size of its files
	// CopiedBytes is what the snapshot holds in the pool: the pages
	// copied because the live file changed them (counted in the tiers).
	CopiedBytes int64 `json:"copied_bytes"`
	// UnlinkedBytes is the pool space of files unlinked since create
	// that only snapshots keep (their resident pages; counted in each
	// snapshot that holds the file); deleting the last of them gives it
	// back.
	UnlinkedBytes int64 `json:"unlinked_bytes"`
}

// snapshots are the FS's live snapshots.
type snapshots struct {
	mu     sync.Mutex
	byName map[string]*snapshot
	nextID atomic.Uint64
}

// snapshot is one snapshot: its entries by path relative to its root.
type snapshot struct {
	name    string
	root    string
	created time.Time
	entries map[string]*SnapEntry
	files   []*snapFile
	copied  atomic.Int64
	dead    atomic.Bool
}

// SnapEntry is one entry of a snapshot, as it was at create.
type SnapEntry struct {
	Stat     unix.Stat_t
	Target   string   // a symlink's target
	Children []string // a directory's entries, sorted
	sf       *snapFile
}

// IsDir reports whether the entry is a directory.
func (e *SnapEntry) IsDir() bool { return e.Stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// snapFile is a regular file of a snapshot: the live file it shares pages
// with, its size at create, and the pages copied so far.
type snapFile struct {
	snap *snapshot
	f    *file
	size int64

	mu     sync.RWMutex
	copied map[int64]pageCopy
	bucket *bufferpool.Bucket // the copies; nil until the first
}

// pageCopy is what a snapshot holds of a page the live file changed.
type pageCopy uint8

const (
	pageKept  pageCopy = iota + 1 // in the snapshot's bucket
	pageZeros                     // all zeros (a hole): nothing stored
)

// snapShare is the file's side: the snapshots that share its pages.
type snapShare struct {
	mu   sync.Mutex // serializes changes of list
	list atomic.Pointer[[]*snapFile]
}

func (s *snapShare) shared() bool { return s.list.Load() != nil }

func (s *snapShare) add(sf *snapFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l []*snapFile
	if p := s.list.Load(); p != nil {
		l = slices.Clone(*p)
	}
	l = append(l, sf)
	s.list.Store(&l)
}

func (s *snapShare) remove(sf *snapFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.list.Load()
	if p == nil {
		return
	}
	l := slices.DeleteFunc(slices.Clone(*p), func(x *snapFile) bool { return x == sf })
	if len(l) == 0 {
		s.list.Store(nil)
		return
	}
	s.list.Store(&l)
}

// preserve copies the pages of [off, off+n) that snapshots still share
// into them, before the caller changes those bytes. Called with f.mu
// held (shared or exclusive). n < 0: to the end.
func (f *file) preserve(off, n int64) error {
	p := f.snap.list.Load()
	if p == nil {
		return nil
	}
	for _, sf := range *p {
		if err := sf.preserve(off, n); err != nil {
			return err
		}
	}
	return nil
}

func (sf *snapFile) preserve(off, n int64) error {
	end := sf.size
	if n >= 0 && n < end-off {
		end = off + n
	}
	if off < 0 {
		off = 0
	}
	if off >= end {
		return nil
	}
	f := sf.f
	ps := f.fs.ps
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if sf.snap.dead.Load() {
		return nil
	}
	bp := f.fs.getPage()
	defer f.fs.putPage(bp)
	buf := *bp
	for i := off / ps; i <= (end-1)/ps; i++ {
		if sf.copied[i] != 0 {
			continue
		}
		if err := f.oldPage(i, buf); err != nil {
			return fmt.Errorf("snapshot %s: copy page %d of %s: %w", sf.snap.name, i, f.displayName(), err)
		}
		if allZero(buf) { // a hole, or zeros: a truncate of a sparse file copies nothing
			sf.copied[i] = pageZeros
			continue
		}
		if sf.bucket == nil {
			b, err := f.fs.pool.Bucket(fmt.Sprintf("snapshot:%s:%d", sf.snap.name, f.fs.snaps.nextID.Add(1)),
				bufferpool.BucketOptions{PageSize: ps})
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", sf.snap.name, err)
			}
			sf.bucket = b
		}
		if err := sf.bucket.PutPage(i, buf, true); err != nil {
			return fmt.Errorf("snapshot %s keeps page %d of %s: %w", sf.snap.name, i, f.displayName(), err)
		}
		sf.copied[i] = pageKept
		sf.snap.copied.Add(ps)
	}
	return nil
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.NativeEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// oldPage reads page i as the file holds it now (resident page, else the
// backing file, else zeros). Called with f.mu held: an absent page's
// bytes are the backing file's (see readAround).
func (f *file) oldPage(i int64, buf []byte) error {
	found, err := f.bucket.ReadPage(i, 0, buf, nil)
	if err != nil || found {
		return err
	}
	clear(buf)
	if f.fs.scratch || i*f.fs.ps >= f.backingSize.Load() {
		return nil
	}
	n, err := f.stageRead(buf, i*f.fs.ps, false)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	clear(buf[n:])
	return nil
}

// readAt reads the snapshot's bytes of the file at off.
func (sf *snapFile) readAt(buf []byte, off int64) (int, error) {
	if off < 0 {
		return 0, unix.EINVAL
	}
	if off >= sf.size {
		return 0, nil
	}
	if int64(len(buf)) > sf.size-off {
		buf = buf[:sf.size-off]
	}
	f := sf.f
	f.syncShim()
	f.mu.RLock()
	defer f.mu.RUnlock()
	sf.mu.RLock()
	defer sf.mu.RUnlock()
	if sf.snap.dead.Load() {
		return 0, unix.ESTALE
	}
	err := f.pageSpan(off, len(buf), func(i, po int64, lo, hi int) error {
		switch sf.copied[i] {
		case 0:
			return f.readPage(i, po, buf[lo:hi], false)
		case pageZeros:
			clear(buf[lo:hi])
			return nil
		}
		found, err := sf.bucket.ReadPage(i, po, buf[lo:hi], nil)
		if err == nil && !found {
			err = fmt.Errorf("snapshot %s: page %d of %s is gone from the pool: %w", sf.snap.name, i, f.displayName(), unix.EIO)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return len(buf), nil
}

// validSnapshotName: one path component, printable, no leading dot.
func validSnapshotName(name string) error {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, "/\x00") || name[0] == '.' {
		return fmt.Errorf("snapshot name %q: one path component, not starting with '.': %w", name, unix.EINVAL)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("snapshot name %q: control character: %w", name, unix.EINVAL)
		}
	}
	return nil
}

// CreateSnapshot snapshots the tree at mount-relative p ("" = the whole
// mount) as name. The walk records the namespace entry by entry; then
// the data of all its files is captured at one instant (install).
// Nothing is kept if it fails.
func (fs *FS) CreateSnapshot(name, p string) (SnapshotInfo, error) {
	if err := validSnapshotName(name); err != nil {
		return SnapshotInfo{}, err
	}
	r, err := rel(p)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if r == SnapshotDir || strings.HasPrefix(r, SnapshotDir+"/") {
		return SnapshotInfo{}, fmt.Errorf("snapshot of %s: snapshots are read-only: %w", p, unix.EINVAL)
	}
	fs.snaps.mu.Lock()
	defer fs.snaps.mu.Unlock()
	if fs.closed.Load() {
		return SnapshotInfo{}, ErrClosed
	}
	if _, ok := fs.snaps.byName[name]; ok {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, ErrSnapshotExists)
	}
	s := &snapshot{name: name, root: r, created: time.Now(), entries: map[string]*SnapEntry{}}
	byFile := map[*file]*snapFile{}
	err = fs.snapWalk(s, r, "", byFile)
	if err == nil {
		err = s.install()
	}
	if err != nil {
		s.drop()
		return SnapshotInfo{}, err
	}
	if fs.snaps.byName == nil {
		fs.snaps.byName = map[string]*snapshot{}
	}
	fs.snaps.byName[name] = s
	return s.info(), nil
}

// snapWalk records the entry at mount path full (sub inside the
// snapshot) and, for a directory, everything under it.
func (fs *FS) snapWalk(s *snapshot, full, sub string, byFile map[*file]*snapFile) error {
	st, err := fs.Lstat(full)
	if err != nil {
		return err
	}
	e := &SnapEntry{Stat: st}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		ents, err := fs.ReadDir(full)
		if err != nil {
			return err
		}
		for _, d := range ents {
			if d.Name == "." || d.Name == ".." || (full == "" && d.Name == SnapshotDir) {
				continue
			}
			e.Children = append(e.Children, d.Name)
		}
		sort.Strings(e.Children)
		s.entries[sub] = e
		for _, c := range e.Children {
			if err := fs.snapWalk(s, path.Join(full, c), path.Join(sub, c), byFile); err != nil {
				return err
			}
		}
		return nil
	case unix.S_IFLNK:
		if e.Target, err = fs.Readlink(full); err != nil {
			return err
		}
	case unix.S_IFREG:
		sf, err := fs.snapFile(s, full, byFile)
		if err != nil {
			return err
		}
		e.sf = sf
	}
	s.entries[sub] = e
	return nil
}

// snapFile attaches the file at p to s (once per file: hard links share
// it); install starts the sharing.
func (fs *FS) snapFile(s *snapshot, p string, byFile map[*file]*snapFile) (*snapFile, error) {
	h, _, err := fs.Open(p, unix.O_RDONLY, 0, Cred{})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.name, err)
	}
	fs.stats.openFiles.Add(-1) // the snapshot's reference is not an open
	f := h.f
	if sf := byFile[f]; sf != nil {
		f.release()
		return sf, nil
	}
	sf := &snapFile{snap: s, f: f, copied: map[int64]pageCopy{}}
	byFile[f] = sf
	s.files = append(s.files, sf)
	return sf, nil
}

// install starts sharing the pages of every file of s at one instant:
// with the shim's grant lock and the size lock of all of them held (in
// inode order; every other path holds one file's locks at a time), no
// write is in flight to any, so the files' data in the snapshot is what
// the pool held at one point in time (the namespace was walked before,
// entry by entry). It fails (EBUSY) if a shim maps one of them
// read-write.
func (s *snapshot) install() error {
	files := slices.Clone(s.files)
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i].f.key, files[j].f.key
		return a.dev < b.dev || (a.dev == b.dev && a.ino < b.ino)
	})
	for i, sf := range files {
		sf.f.shimMu.Lock()
		if shimWatched(sf.f) { // a live read-write grant (ShimMaps, under shimMu)
			for _, o := range files[:i+1] {
				o.f.shimMu.Unlock()
			}
			return fmt.Errorf("snapshot %s of %s: a read-write shim map of the file is in use (close it and retry): %w",
				s.name, sf.f.displayName(), unix.EBUSY)
		}
	}
	for _, sf := range files {
		sf.f.syncShim() // what an ended grant wrote is in the pages; fold its size
		sf.f.mu.Lock()
	}
	for _, sf := range files {
		sf.size = sf.f.size.Load()
		sf.f.snap.add(sf)
	}
	for _, sf := range files {
		sf.f.mu.Unlock()
		sf.f.shimMu.Unlock()
	}
	for _, e := range s.entries {
		if e.sf != nil {
			e.Stat.Size = e.sf.size
		}
	}
	return nil
}

// drop releases everything s holds; its reads fail from now on.
func (s *snapshot) drop() {
	s.dead.Store(true)
	for _, sf := range s.files {
		sf.f.snap.remove(sf)
		sf.mu.Lock()
		if sf.bucket != nil {
			sf.f.fs.pool.DeleteBucket(sf.bucket.Name())
			sf.bucket = nil
		}
		sf.copied = nil
		sf.mu.Unlock()
		sf.f.release()
	}
	// s.entries and s.files stay as they are: a reader that found s
	// before its delete may still look at them (its reads fail: dead).
}

func (s *snapshot) info() SnapshotInfo {
	in := SnapshotInfo{Name: s.name, Path: s.root, Created: s.created, CopiedBytes: s.copied.Load()}
	for _, sf := range s.files {
		f := sf.f
		holders := 0
		if l := f.snap.list.Load(); l != nil {
			holders = len(*l) // each snapshot holds one reference
		}
		f.stateMu.Lock()
		alone := f.unlinked && f.refs == holders
		f.stateMu.Unlock()
		if alone {
			pages, _ := f.bucket.Resident(0)
			in.UnlinkedBytes += pages * f.fs.ps
		}
	}
	for _, e := range s.entries {
		switch {
		case e.IsDir():
			in.Dirs++
		case e.Stat.Mode&unix.S_IFMT == unix.S_IFREG:
			in.Files++
			in.Bytes += e.Stat.Size
		}
	}
	return in
}

// DeleteSnapshot drops snapshot name and gives its pages back.
func (fs *FS) DeleteSnapshot(name string) error {
	fs.snaps.mu.Lock()
	s, ok := fs.snaps.byName[name]
	delete(fs.snaps.byName, name)
	fs.snaps.mu.Unlock()
	if !ok {
		return fmt.Errorf("snapshot %s: %w", name, ErrNoSnapshot)
	}
	s.drop()
	fs.signalSpace()
	return nil
}

// Snapshots lists the snapshots by name.
func (fs *FS) Snapshots() []SnapshotInfo {
	fs.snaps.mu.Lock()
	defer fs.snaps.mu.Unlock()
	out := make([]SnapshotInfo, 0, len(fs.snaps.byName))
	for _, s := range fs.snaps.byName {
		out = append(out, s.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (fs *FS) snapshot(name string) (*snapshot, error) {
	fs.snaps.mu.Lock()
	defer fs.snaps.mu.Unlock()
	s, ok := fs.snaps.byName[name]
	if !ok {
		return nil, fmt.Errorf("snapshot %s: %w", name, ErrNoSnapshot)
	}
	return s, nil
}

// SnapshotNames lists the names (the door's readdir of .snapshots).
func (fs *FS) SnapshotNames() []string {
	fs.snaps.mu.Lock()
	defer fs.snaps.mu.Unlock()
	out := make([]string, 0, len(fs.snaps.byName))
	for n := range fs.snaps.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SnapshotEntry returns the entry at sub ("" = the root of the tree) of
// snapshot name, and a reader for a regular file (nil otherwise).
func (fs *FS) SnapshotEntry(name, sub string) (*SnapEntry, *SnapReader, error) {
	s, err := fs.snapshot(name)
	if err != nil {
		return nil, nil, unix.ENOENT
	}
	e, ok := s.entries[sub]
	if !ok {
		return nil, nil, unix.ENOENT
	}
	if e.sf == nil {
		return e, nil, nil
	}
	return e, &SnapReader{sf: e.sf}, nil
}

// SnapReader reads one file of a snapshot.
type SnapReader struct{ sf *snapFile }

// ReadAt reads the snapshot's bytes at off (short at its EOF).
func (r *SnapReader) ReadAt(buf []byte, off int64) (int, error) { return r.sf.readAt(buf, off) }

// ExportSnapshot writes snapshot name to dir (absent or empty; created
// 0700 until done, then given the root's mode; a snapshot of one file
// is written into dir under its name): directories, files with
// the snapshot's bytes, symlinks, with their modes and times (and owners
// when the daemon runs as root). Other types are skipped and counted.
func (fs *FS) ExportSnapshot(name, dir string) (SnapshotInfo, error) {
	s, err := fs.snapshot(name)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if !filepath.IsAbs(dir) {
		return SnapshotInfo{}, fmt.Errorf("export %s: %s is not an absolute path: %w", name, dir, unix.EINVAL)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return SnapshotInfo{}, fmt.Errorf("export %s: %s is not empty: %w", name, dir, unix.ENOTEMPTY)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return SnapshotInfo{}, fmt.Errorf("export %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("export %s: %w", name, err)
	}
	buf := make([]byte, fs.ps)
	dst := dir
	if !s.entries[""].IsDir() {
		dst = filepath.Join(dir, path.Base(s.root)) // a snapshot of one file
	}
	if err := s.export("", dst, buf, fs.isRoot); err != nil {
		return SnapshotInfo{}, fmt.Errorf("export %s to %s: %w", name, dir, err)
	}
	return s.info(), nil
}

func (s *snapshot) export(sub, dst string, buf []byte, chown bool) error {
	e := s.entries[sub]
	st := &e.Stat
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if sub != "" {
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
		}
		for _, c := range e.Children {
			if err := s.export(path.Join(sub, c), filepath.Join(dst, c), buf, chown); err != nil {
				return err
			}
		}
	case unix.S_IFLNK:
		if err := os.Symlink(e.Target, dst); err != nil {
			return err
		}
		if chown {
			unix.Lchown(dst, int(st.Uid), int(st.Gid))
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFREG:
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		var off int64
		for off < e.sf.size {
			n, err := e.sf.readAt(buf, off)
			if err == nil && n == 0 {
				err = io.ErrUnexpectedEOF
			}
			if err == nil {
				_, err = out.WriteAt(buf[:n], off)
			}
			if err != nil {
				out.Close()
				return fmt.Errorf("%s: %w", sub, err)
			}
			off += int64(n)
		}
		if err := out.Close(); err != nil {
			return err
		}
	default:
		return nil // devices, fifos, sockets: not exported
	}
	if chown {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if err := os.Chmod(dst, os.FileMode(st.Mode&0o777)|modeBits(st.Mode)); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// modeBits turns setuid, setgid and sticky into os.FileMode bits.
func modeBits(m uint32) os.FileMode {
	var fm os.FileMode
	if m&unix.S_ISUID != 0 {
		fm |= os.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		fm |= os.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		fm |= os.ModeSticky
	}
	return fm
}

// closeSnapshots drops every snapshot (FS.Close).
func (fs *FS) closeSnapshots() {
	fs.snaps.mu.Lock()
	all := fs.snaps.byName
	fs.snaps.byName = nil
	fs.snaps.mu.Unlock()
	for _, s := range all {
		s.drop()
	}
}
