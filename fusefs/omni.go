package fusefs

// OMNI views: the hidden /.omni directory (see doc.go, "OMNI views").
// This file holds the per-mount state, the datasets and their
// generations; omni_nodes.go the node tree; omni_data.go the data files
// and the block cache in the pool.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
)

// omniDirName is the hidden directory at the root of the mount.
const omniDirName = ".omni"

// Formats reads datasets in isolation from the daemon: formats/helper's
// Pool implements it (format readers run in helper processes, never in
// the daemon's address space, which holds dirty buffers).
type Formats interface {
	// Open returns the schema of the dataset at path.
	Open(ctx context.Context, path string) (*omni.Dataset, error)
	// ReadTo reads the selection h of the fixed-size variable v into dst
	// at off and returns the bytes written.
	ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error)
	// ReadAll reads a whole variable (EncodeStrings form for
	// variable-length strings).
	ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error)
}

// OMNIOptions turn on the /.omni views of a mount (Options.OMNI).
type OMNIOptions struct {
	// Formats runs the format readers (required).
	Formats Formats
	// Pool caches the data read through the views, one page bucket
	// "omni:<path>" per dataset (required).
	Pool *bufferpool.Pool
	// Registry is the directory of assimilated datasets (omni.Registry)
	// listed in /.omni; "" lists none.
	Registry string
	// BlockSize is the bytes one helper request aims to read (0 = 8 MiB);
	// blocks follow the variable's chunking, up to 8× this.
	BlockSize int64
	// Logf logs failures of the views (default logrus.Warnf), one line
	// each; the Formats should not log them again.
	Logf func(format string, args ...any)
	// RetryAfter is how long a failed open or block read is remembered
	// (answered at once with its error) before a helper tries again,
	// when the source did not change (0 = 30s). A crafted file costs
	// one helper request per RetryAfter; a helper that failed for a
	// passing reason (a deadline on a loaded node) is not final.
	RetryAfter time.Duration
}

// OMNIStats counts what the views did; for tests and `iowarp stat`.
type OMNIStats struct {
	Opens      uint64 // datasets (generations) opened by a helper
	BlockReads uint64 // blocks read by a helper (pool misses)
	BlockHits  uint64 // block reads served from the pool
}

// errStale: the dataset changed (its size or mtime) while a view of the
// old contents was open; reopen the view.
var errStale = fmt.Errorf("dataset changed since the view was opened: %w", syscall.ESTALE)

// omniFS is the state of the views of one mount. Safe for concurrent use.
//
// Locks: omniFS.mu guards sets only; dataset.mu guards its current
// generation; generation.mu guards plans and in-flight fetches. Each is
// taken alone, and none is held while a helper or the file layer works
// (in Scratch mode the helper reads through this mount, and its reads
// must not need anything a waiting view request holds; elsewhere it
// reads the backing store, but a held lock would still serialise every
// reader behind the slowest helper request).
type omniFS struct {
	m        *mount
	opt      OMNIOptions
	mountDir string
	stats    struct{ opens, blockReads, blockHits atomic.Uint64 }
	staging  stagingPool

	mu sync.Mutex
	// sets holds every dataset looked up since mount, by key ("m:" +
	// mount-relative path, or "x:" + absolute path of a file outside the
	// mount). Bounded by the files looked up under /.omni.
	sets map[string]*dataset
}

func newOMNI(m *mount, dir string, opt *OMNIOptions) *omniFS {
	if opt == nil || opt.Formats == nil || opt.Pool == nil {
		return nil
	}
	o := &omniFS{m: m, opt: *opt, mountDir: filepath.Clean(dir), sets: map[string]*dataset{}}
	if o.opt.BlockSize <= 0 {
		o.opt.BlockSize = 8 << 20
	}
	if o.opt.Logf == nil {
		o.opt.Logf = logrus.Warnf
	}
	if o.opt.RetryAfter <= 0 {
		o.opt.RetryAfter = 30 * time.Second
	}
	return o
}

// Stats returns the views' counters.
func (o *omniFS) Stats() OMNIStats {
	return OMNIStats{Opens: o.stats.opens.Load(), BlockReads: o.stats.blockReads.Load(), BlockHits: o.stats.blockHits.Load()}
}

// close frees what the views hold outside the pool.
func (o *omniFS) close() { o.staging.close() }

// OMNIStats returns the counters of the /.omni views (zero when off).
func (s *Server) OMNIStats() OMNIStats {
	if s.omni == nil {
		return OMNIStats{}
	}
	return s.omni.Stats()
}

// datasetAt returns the dataset of the file or store at mount-relative
// path rel.
func (o *omniFS) datasetAt(rel string) *dataset {
	return o.dataset("m:"+rel, rel, "")
}

// datasetOf returns the dataset of an assimilated source: inside the
// mount (by mount point or backing path) it is addressed through the
// file layer, elsewhere directly.
func (o *omniFS) datasetOf(src string) *dataset {
	src = filepath.Clean(src)
	for _, root := range []string{o.mountDir, o.m.fs.Root()} {
		if r, ok := strings.CutPrefix(src, root+"/"); ok {
			return o.datasetAt(r)
		}
	}
	return o.dataset("x:"+src, "", src)
}

func (o *omniFS) dataset(key, rel, abs string) *dataset {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.sets[key]
	if d == nil {
		d = &dataset{o: o, key: key, rel: rel, abs: abs}
		o.sets[key] = d
	}
	return d
}

// dataset is one file or store seen as OMNI views. Its generation is
// replaced when the source's size, mtime or inode changes.
type dataset struct {
	o   *omniFS
	key string
	rel string // mount-relative path; "" for a file outside the mount
	abs string // absolute path when rel == ""

	mu sync.Mutex
	// gen is the current generation (nil before the first use); loading
	// is closed when the generation being loaded is in gen.
	gen     *generation
	loading chan struct{}
}

// stamp is what must not change for a generation to stay valid.
type stamp struct {
	ino, size int64
	mtime     unix.Timespec
	mode      uint32
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim, mode: st.Mode}
}

func (d *dataset) name() string {
	if d.rel != "" {
		return d.rel
	}
	return d.abs
}

func (d *dataset) lstat() (unix.Stat_t, error) {
	if d.rel != "" {
		return d.o.m.fs.Lstat(d.rel)
	}
	var st unix.Stat_t
	err := unix.Stat(d.abs, &st)
	return st, err
}

// current returns the generation for the source as it is now, loading a
// new one (in a helper) when it changed. A failed open is remembered for
// its generation: a malformed file costs one helper request, not one per
// lookup, until the file changes or RetryAfter passed.
func (d *dataset) current() (*generation, error) {
	st, err := d.lstat()
	if err != nil {
		return nil, err
	}
	s := stampOf(&st)
	d.mu.Lock()
	for {
		if g := d.gen; g != nil && g.st == s && (g.err == nil || time.Now().Before(g.retryAt)) {
			d.mu.Unlock()
			return g, g.err
		}
		ch := d.loading
		if ch == nil {
			break
		}
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
		if g := d.gen; g != nil {
			d.mu.Unlock()
			return g, g.err
		}
	}
	ch := make(chan struct{})
	d.loading = ch
	old := d.gen
	d.mu.Unlock()

	g := d.load(&st, old)

	d.mu.Lock()
	d.gen, d.loading = g, nil
	d.mu.Unlock()
	close(ch)
	return g, g.err
}

// load opens a new generation. No lock is held: the helper may take the
// whole deadline.
func (d *dataset) load(st *unix.Stat_t, old *generation) *generation {
	o := d.o
	g := &generation{d: d, st: stampOf(st), stat: *st, plans: map[string]*plan{}, fetching: map[int64]*fetch{}}
	bucket := "omni:" + d.name()
	if old != nil {
		old.dead.Store(true)
		if old.bucket != nil {
			o.opt.Pool.DeleteBucket(bucket)
		}
	}
	g.path, g.err = d.prepare(st)
	if g.err == nil {
		o.stats.opens.Add(1)
		g.ds, g.err = o.opt.Formats.Open(d.confined(), g.path)
	}
	if g.err == nil {
		g.bucket, g.err = o.opt.Pool.Bucket(bucket, bufferpool.BucketOptions{PageSize: omniPage})
	}
	if g.err != nil {
		g.err = fmt.Errorf("open %s: %w", d.name(), g.err)
		g.retryAt = time.Now().Add(o.opt.RetryAfter)
		o.logf(g.err)
	}
	return g
}

// prepare makes the source's current bytes visible to a helper and
// returns the path it should read. With a backing store: the backing
// file, after the file's dirty pages are written back (a directory
// store: every file's), so the helper never enters this mount. In
// Scratch mode there is no backing copy: the helper reads through the
// mount itself (throughMount), which always serves the current bytes.
func (d *dataset) prepare(st *unix.Stat_t) (string, error) {
	if d.rel == "" {
		return d.abs, nil
	}
	fsys := d.o.m.fs
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR, unix.S_IFREG:
	default:
		return "", fmt.Errorf("not a file or directory store: %w", omni.ErrNotSupported)
	}
	if d.o.throughMount() {
		return filepath.Join(d.o.mountDir, d.rel), nil
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := fsys.Sync(); err != nil {
			return "", fmt.Errorf("write back before reading: %w", err)
		}
	} else {
		h, _, err := fsys.Open(d.rel, unix.O_RDONLY, 0, files.Cred{})
		if err != nil {
			return "", err
		}
		err = h.Fsync(true)
		h.Release()
		if err != nil {
			return "", fmt.Errorf("write back before reading: %w", err)
		}
	}
	return filepath.Join(fsys.Root(), d.rel), nil
}

// root is the directory the helpers reading d are confined to: the
// backing store, or the mount in Scratch mode; the source's directory
// for a file outside the mount.
func (d *dataset) root() string {
	switch {
	case d.rel == "":
		return filepath.Dir(d.abs)
	case d.o.throughMount():
		return d.o.mountDir
	}
	return d.o.m.fs.Root()
}

// confined is the context of the helper requests that read d's own
// bytes (its schema and the data stored in it), which every user the
// kernel lets see the view may read (the views mirror the source's
// owner and mode; the mount uses default_permissions): they run as the
// daemon, confined to root, and are shared.
func (d *dataset) confined() context.Context {
	return helper.WithAs(context.Background(), helper.As{Root: d.root()})
}

// asCaller is the context of a helper request made for the FUSE caller
// of ctx: data stored in other files (external storage, virtual
// datasets) is read with the caller's credentials, never shared.
func (d *dataset) asCaller(ctx context.Context) (context.Context, error) {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return nil, fmt.Errorf("no caller for a read of data in other files: %w", syscall.EACCES)
	}
	return helper.WithAs(ctx, helper.As{Set: true, Uid: c.Uid, Gid: c.Gid, Groups: groupsOf(c.Pid), Root: d.root()}), nil
}

// throughMount reports whether helpers read the mount's files through
// the mount (Scratch mode: no backing copy) rather than the backing
// store.
func (o *omniFS) throughMount() bool { return o.m.fs.Mode() == files.Scratch }

// formatProcesses is implemented by Formats whose readers run in
// processes of their own (formats/helper.Pool).
type formatProcesses interface {
	// Runs reports whether pid is one of those processes.
	Runs(pid int) bool
}

// helperOpen reports whether the FUSE request in ctx comes from a format
// helper reading through the mount. Its opens get direct I/O, so that
// its reads are synchronous FUSE requests: a buffered read would go
// through kernel readahead, which is queued as a background request, and
// the background queue (MaxBackground) may be full of reads of views
// waiting on that very helper.
func (o *omniFS) helperOpen(ctx context.Context) bool {
	if o == nil || !o.throughMount() {
		return false
	}
	procs, ok := o.opt.Formats.(formatProcesses)
	if !ok {
		return false
	}
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return false
	}
	// The kernel sends the calling thread's id; helpers are known by
	// their process id.
	pid, err := tgid(int(c.Pid))
	return err == nil && procs.Runs(pid)
}

// logf logs a view failure: one line per failed open or block read of a
// generation (failures are remembered until the source changes). The
// helper pool of the daemon does not log its own crashes and timeouts:
// the error carries the helper's last words.
func (o *omniFS) logf(err error) {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, context.Canceled) {
		return
	}
	o.opt.Logf("omni: %v", err)
}

// generation is one state of a dataset's source: its schema, the path
// the helpers read and the pool bucket holding the blocks read so far.
// It is immutable once loaded, except for plans and fetches.
type generation struct {
	d       *dataset
	st      stamp
	stat    unix.Stat_t
	path    string
	ds      *omni.Dataset
	err     error
	retryAt time.Time   // when a failed open (err) is tried again
	dead    atomic.Bool // superseded: its bucket is gone
	bucket  *bufferpool.Bucket

	mu sync.Mutex
	// plans are the resolved views by group and view name; nextPage is
	// the first page of the bucket no plan uses yet; fetching are the
	// blocks being read, by their first page.
	plans    map[string]*plan
	nextPage int64
	fetching map[int64]*fetch
	memBytes int64 // held by cached plans' mem (string views)
}

// fresh fails with ESTALE once the source changed after g was loaded.
func (g *generation) fresh() error {
	if g.dead.Load() {
		return errStale
	}
	st, err := g.d.lstat()
	if err != nil {
		return err
	}
	if stampOf(&st) != g.st {
		return errStale
	}
	return nil
}

// omniErrno is the one translation of the views' errors to errno.
func omniErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno) && errno != 0:
		return errno
	case errors.Is(err, omni.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	// Corrupt files, helper timeouts and crashes, unsupported features:
	// logged where they happened.
	return syscall.EIO
}
