// Package view is the OMNI view engine: datasets seen as variables,
// dimensions and attributes, resolved views (plans), the block layout of
// their bytes, the block cache in the buffer pool and the read-ahead of
// sequential readers. It depends on the pool, the file layer and a
// Formats (the format readers, run in helper processes); it knows no door:
// the FUSE nodes under /.omni (fusefs) and the CLI both drive it.
//
// A plan serves the values decoded as xarray decodes them by default
// (omni.Decoding), block by block: the helper writes a block's stored
// bytes into staging memory, the plan decodes them in place, and the pool
// caches the decoded pages; a raw plan (RawPlan, data.raw) serves the
// stored bytes. AttrPlan reads an attribute value too large for the
// schema on demand, like a 1-D variable.
//
// A Dataset of an assimilated source may show the byte range of its
// upstream OMNI job (DatasetOfRange): its model is cut (omni.Cut) and
// every read is mapped to the stored records, with pages of its own.
//
// The engine remembers every Dataset looked up (a small record: its key
// and the pages its plans took), but keeps loaded, with their schema and
// plans, only the MaxDatasets used last: the Generation of the least
// recently used one is dropped (not killed: a view opened on it reads on)
// and loaded again by a helper when the Dataset is next used. Plans take
// their pages from a counter of the Dataset, never of the Generation, so
// the pages of a dropped Generation, left in the pool for its open views
// and evicted by the pool like any, are never read as another's.
//
// Locks: Engine.mu guards sets and the LRU list (taken before a
// Dataset.mu when evicting, never the other way); Dataset.mu guards its current
// Generation; Generation.mu guards plans and in-flight fetches. Each is
// taken alone, and none is held while a helper or the file layer works
// (in Scratch mode the helper reads through the mount, and its reads
// must not need anything a waiting view request holds; elsewhere it
// reads the backing store, but a held lock would still serialise every
// reader behind the slowest helper request). Two exceptions hold a lock
// of one view's CSV over its reads: Plan.csvMu while data.csv is sized
// (one render at a time, the others wait for its size) and a
// CSVReader's mu over a read (one chunk of rows per open file); the
// helper never reads a view, so neither can wait on itself.
package view

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
)

// Formats reads datasets in isolation from the daemon: formats/helper's
// Pool implements it (format readers run in helper processes, never in
// the daemon's address space, which holds dirty buffers).
type Formats interface {
	// Open returns the schema of the Dataset at path.
	Open(ctx context.Context, path string) (*omni.Dataset, error)
	// ReadTo reads the selection h of the fixed-size variable v into dst
	// at off and returns the bytes written.
	ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error)
	// ReadAll reads a whole variable (EncodeStrings form for
	// variable-length strings).
	ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error)
}

// Options configure an Engine.
type Options struct {
	// Formats runs the format readers (required).
	Formats Formats
	// Pool caches the data read through the views, one page bucket
	// "omni:<path>" per Dataset (required).
	Pool *bufferpool.Pool
	// Files is the file layer of the mount whose files are datasets
	// (DatasetAt); nil: only files outside any mount (DatasetOf).
	Files *files.FS
	// MountDir is where Files is mounted ("" without a mount).
	MountDir string
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
	// MaxDatasets bounds the Datasets kept loaded (schema and plans);
	// the least recently used past it are dropped and loaded again on
	// use (0 = DefaultMaxDatasets).
	MaxDatasets int
	// OnLoad, if set, is called (with no lock held) each time a
	// Dataset's new Generation opened without error (not again when a
	// dropped one is loaded again, the source unchanged): the search index
	// learns of datasets and of their changes so. It must not block.
	OnLoad func(d *Dataset, g *Generation)
}

// DefaultMaxDatasets is MaxDatasets when unset: a schema with its plans
// is tens to hundreds of KiB (a crafted one up to the schema bounds), so
// 128 keep the engine in some tens of MiB.
const DefaultMaxDatasets = 128

// Stats counts what the views did; for tests and `iowarp stat`.
type Stats struct {
	Opens      uint64 // datasets (generations) opened by a helper
	BlockReads uint64 // blocks read by a helper (pool misses)
	BlockHits  uint64 // block reads served from the pool
}

// ErrStale: the Dataset changed (its size or mtime) while a view of the
// old contents was open; reopen the view.
var ErrStale = fmt.Errorf("Dataset changed since the view was opened: %w", syscall.ESTALE)

// Engine is the state of the views of one mount (or of files outside
// any). Safe for concurrent use; see the package doc for its locks.
type Engine struct {
	opt      Options
	mountDir string
	stats    struct{ opens, blockReads, blockHits atomic.Uint64 }
	staging  stagingPool

	mu sync.Mutex
	// sets holds every Dataset looked up since mount, by key ("m:" +
	// mount-relative path, or "x:" + absolute path of a file outside the
	// mount): a record of some hundred bytes each. lru holds the loaded
	// ones (a Generation in gen), most recently used first, at most
	// MaxDatasets.
	sets map[string]*Dataset
	lru  list.List
}

// New returns the engine of opt; nil when opt lacks Formats or Pool.
func New(opt Options) *Engine {
	if opt.Formats == nil || opt.Pool == nil {
		return nil
	}
	o := &Engine{opt: opt, sets: map[string]*Dataset{}}
	if opt.MountDir != "" {
		o.mountDir = filepath.Clean(opt.MountDir)
	}
	if o.opt.BlockSize <= 0 {
		o.opt.BlockSize = 8 << 20
	}
	if o.opt.Logf == nil {
		o.opt.Logf = logrus.Warnf
	}
	if o.opt.RetryAfter <= 0 {
		o.opt.RetryAfter = 30 * time.Second
	}
	if o.opt.MaxDatasets <= 0 {
		o.opt.MaxDatasets = DefaultMaxDatasets
	}
	return o
}

// Stats returns the views' counters.
func (o *Engine) Stats() Stats {
	return Stats{Opens: o.stats.opens.Load(), BlockReads: o.stats.blockReads.Load(), BlockHits: o.stats.blockHits.Load()}
}

// Loaded is the number of Datasets loaded (at most MaxDatasets).
func (o *Engine) Loaded() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lru.Len()
}

// used marks d the most recently used loaded Dataset and drops the
// Generation of the least recently used ones past MaxDatasets. A Dataset
// being loaded keeps its place (its loader will mark it again).
func (o *Engine) used(d *Dataset) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d.elem == nil {
		d.elem = o.lru.PushFront(d)
	} else {
		o.lru.MoveToFront(d.elem)
	}
	for e := o.lru.Back(); e != nil && o.lru.Len() > o.opt.MaxDatasets; {
		prev := e.Prev()
		if v := e.Value.(*Dataset); v != d && v.drop() {
			o.lru.Remove(e)
			v.elem = nil
		}
		e = prev
	}
}

// drop forgets d's Generation unless one is being loaded; the views
// opened on it keep it alive and read on.
func (d *Dataset) drop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loading != nil {
		return false
	}
	d.gen = nil
	return true
}

// Close frees what the views hold outside the pool.
func (o *Engine) Close() { o.staging.close() }

// Formats returns the format readers the engine runs.
func (o *Engine) Formats() Formats { return o.opt.Formats }

// DatasetAt returns the Dataset of the file or store at mount-relative
// path rel.
func (o *Engine) DatasetAt(rel string) *Dataset {
	return o.lookup("m:"+rel, rel, "")
}

// DatasetOf returns the Dataset of an assimilated source: inside the
// mount (by mount point or backing path) it is addressed through the
// file layer, elsewhere directly.
func (o *Engine) DatasetOf(src string) *Dataset {
	src = filepath.Clean(src)
	if o.opt.Files == nil {
		return o.lookup("x:"+src, "", src)
	}
	for _, root := range []string{o.mountDir, o.opt.Files.Root()} {
		if r, ok := strings.CutPrefix(src, root+"/"); ok && root != "" {
			return o.DatasetAt(r)
		}
	}
	return o.lookup("x:"+src, "", src)
}

// DatasetOfRange is DatasetOf(src) cut to the byte range of an upstream
// OMNI job (omni.Cut): a Dataset of its own, whose variables on the cut
// dimension show the records kept, their reads mapped to the stored ones.
// A zero range is DatasetOf(src).
func (o *Engine) DatasetOfRange(src string, r omni.Range) *Dataset {
	d := o.DatasetOf(src)
	if r.IsZero() {
		return d
	}
	key := fmt.Sprintf("%s\x00range=%d+%d\x00%s", d.key, r.Off, r.Size, r.Filter)
	return o.lookupRange(key, d.rel, d.abs, r)
}

func (o *Engine) lookup(key, rel, abs string) *Dataset {
	return o.lookupRange(key, rel, abs, omni.Range{})
}

func (o *Engine) lookupRange(key, rel, abs string, r omni.Range) *Dataset {
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.sets[key]
	if d == nil {
		d = &Dataset{o: o, key: key, rel: rel, abs: abs, rng: r}
		o.sets[key] = d
	}
	return d
}

// Dataset is one file or store seen as OMNI views. Its Generation is
// replaced when the source's size, mtime or inode changes.
type Dataset struct {
	o   *Engine
	key string
	rel string     // mount-relative path; "" for a file outside the mount
	abs string     // absolute path when rel == ""
	rng omni.Range // the job's byte range its views show (zero: all)
	// nextPage is the first page of the bucket no plan of any
	// Generation took yet.
	nextPage atomic.Int64
	// elem is d's place in Engine.lru (nil: not loaded); guarded by
	// Engine.mu.
	elem *list.Element

	mu sync.Mutex
	// gen is the current Generation (nil before the first use); loading
	// is closed when the Generation being loaded is in gen.
	gen     *Generation
	loading chan struct{}
	// lastOK is the stamp of the last Generation that opened.
	lastOK stamp
}

// stamp is what must not change for a Generation to stay valid.
type stamp struct {
	ino, size int64
	mtime     unix.Timespec
	mode      uint32
}

func stampOf(st *unix.Stat_t) stamp {
	return stamp{ino: int64(st.Ino), size: st.Size, mtime: st.Mtim, mode: st.Mode}
}

func (d *Dataset) Name() string {
	if d.rel != "" {
		return d.rel
	}
	return d.abs
}

func (d *Dataset) Lstat() (unix.Stat_t, error) {
	if d.rel != "" {
		return d.o.opt.Files.Lstat(d.rel)
	}
	var st unix.Stat_t
	err := unix.Stat(d.abs, &st)
	return st, err
}

// current returns the Generation for the source as it is now, loading a
// new one (in a helper) when it changed. A failed open is remembered for
// its Generation: a malformed file costs one helper request, not one per
// lookup, until the file changes or RetryAfter passed.
func (d *Dataset) Current() (*Generation, error) {
	st, err := d.Lstat()
	if err != nil {
		return nil, err
	}
	s := stampOf(&st)
	d.mu.Lock()
	for {
		if g := d.gen; g != nil && g.st == s && (g.err == nil || time.Now().Before(g.retryAt)) {
			d.mu.Unlock()
			d.o.used(d)
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
	// A Generation loaded again after a drop, the source unchanged, is
	// no news to OnLoad.
	news := g.err == nil && g.st != d.lastOK
	if g.err == nil {
		d.lastOK = g.st
	}
	d.mu.Unlock()
	close(ch)
	d.o.used(d)
	if news && d.o.opt.OnLoad != nil {
		d.o.opt.OnLoad(d, g)
	}
	return g, g.err
}

// load opens a new Generation. No lock is held: the helper may take the
// whole deadline.
func (d *Dataset) load(st *unix.Stat_t, old *Generation) *Generation {
	o := d.o
	g := &Generation{d: d, st: stampOf(st), stat: *st, plans: map[string]*Plan{}, fetching: map[int64]*fetch{}}
	bucket := "omni:" + d.Name()
	if !d.rng.IsZero() { // its own pages: other records than the whole file's
		bucket = "omni:" + d.key
	}
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
		g.cut, g.err = g.ds.ApplyRange(d.rng)
	}
	if g.err == nil {
		g.bucket, g.err = o.opt.Pool.Bucket(bucket, bufferpool.BucketOptions{PageSize: PageSize})
	}
	if g.err != nil {
		g.err = fmt.Errorf("open %s: %w", d.Name(), g.err)
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
func (d *Dataset) prepare(st *unix.Stat_t) (string, error) {
	if d.rel == "" {
		return d.abs, nil
	}
	fsys := d.o.opt.Files
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR, unix.S_IFREG:
	default:
		return "", fmt.Errorf("not a file or directory store: %w", omni.ErrNotSupported)
	}
	if d.o.ThroughMount() {
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
func (d *Dataset) root() string {
	switch {
	case d.rel == "":
		return filepath.Dir(d.abs)
	case d.o.ThroughMount():
		return d.o.mountDir
	}
	return d.o.opt.Files.Root()
}

// confined is the context of the helper requests that read d's own
// bytes (its schema and the data stored in it), which every user the
// kernel lets see the view may read (the views mirror the source's
// owner and mode; the mount uses default_permissions): they run as the
// daemon, confined to root, and are shared.
func (d *Dataset) confined() context.Context {
	return helper.WithAs(context.Background(), helper.As{Root: d.root()})
}

// asCaller is the context of a helper request made for the FUSE caller
// of ctx: data stored in other files (external storage, virtual
// datasets) is read with the caller's credentials, never shared.
func (d *Dataset) asCaller(ctx context.Context) (context.Context, error) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return nil, fmt.Errorf("no caller for a read of data in other files: %w", syscall.EACCES)
	}
	return helper.WithAs(ctx, helper.As{Set: true, Uid: c.Uid, Gid: c.Gid, Groups: groupsOf(c.Pid), Root: d.root()}), nil
}

// Caller is who asks for a read: data stored in other files (external
// storage, virtual datasets) is read with the caller's credentials.
type Caller struct {
	Uid, Gid uint32
	Pid      uint32 // the calling thread: its supplementary groups apply
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for the reads made with it. A read
// of data in other files without a caller fails with EACCES.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// ThroughMount reports whether helpers read the mount's files through
// the mount (Scratch mode: no backing copy) rather than the backing
// store.
func (o *Engine) ThroughMount() bool {
	return o.opt.Files != nil && o.opt.Files.Mode() == files.Scratch
}

// logf logs a view failure: one line per failed open or block read of a
// Generation (failures are remembered until the source changes). The
// helper pool of the daemon does not log its own crashes and timeouts:
// the error carries the helper's last words.
func (o *Engine) logf(err error) {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, context.Canceled) {
		return
	}
	o.opt.Logf("omni: %v", err)
}

// Generation is one state of a Dataset's source: its schema, the path
// the helpers read and the pool bucket holding the blocks read so far.
// It is immutable once loaded, except for plans and fetches.
type Generation struct {
	d       *Dataset
	st      stamp
	stat    unix.Stat_t
	path    string
	ds      *omni.Dataset
	cut     *omni.Cut // the job's byte range applied to ds (nil: none)
	err     error
	retryAt time.Time   // when a failed open (err) is tried again
	dead    atomic.Bool // superseded: its bucket is gone
	bucket  *bufferpool.Bucket

	mu sync.Mutex
	// plans are the resolved views by group and view name; fetching are
	// the blocks being read, by their first page.
	plans    map[string]*Plan
	fetching map[int64]*fetch
	memBytes int64 // held by cached plans' mem (string views)
}

// Fresh fails with ESTALE once the source changed after g was loaded.
func (g *Generation) Fresh() error {
	if g.dead.Load() {
		return ErrStale
	}
	st, err := g.d.Lstat()
	if err != nil {
		return err
	}
	if stampOf(&st) != g.st {
		return ErrStale
	}
	return nil
}

// Key names the dataset uniquely within its engine ("m:" + mount-relative
// path, or "x:" + absolute path).
func (d *Dataset) Key() string { return d.key }

// Model is the generation's OMNI model (nil when its open failed).
func (g *Generation) Model() *omni.Dataset { return g.ds }

// Stat is the source's stat when the generation was loaded.
func (g *Generation) Stat() *unix.Stat_t { return &g.stat }

// Cut is the job's byte range the generation's model was cut to (nil
// when the Dataset shows the whole source).
func (g *Generation) Cut() *omni.Cut { return g.cut }

// readTo reads the selection slab of v, as the model shows it, into dst:
// through the cut to the stored variable.
func (g *Generation) readTo(ctx context.Context, v *omni.Variable, slab omni.Hyperslab, dst *os.File) (int64, error) {
	sv, sh := g.cut.Stored(v, slab)
	return g.d.o.opt.Formats.ReadTo(ctx, g.path, sv, sh, dst, 0)
}

// readAll reads the whole of v as the model shows it.
func (g *Generation) readAll(ctx context.Context, v *omni.Variable) ([]byte, error) {
	return g.cut.ReadAll(v, func(sv *omni.Variable) ([]byte, error) {
		return g.d.o.opt.Formats.ReadAll(ctx, g.path, sv)
	})
}
