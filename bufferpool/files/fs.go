package files

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/internal/hist"
)

// DefaultPageSize is the page (blob) size of a file.
const DefaultPageSize = 1 << 20

// fileKey identifies a backing inode.
type fileKey struct{ dev, ino uint64 }

// FS is POSIX file semantics on the buffer pool. Safe for concurrent use.
type FS struct {
	pool     *bufferpool.Pool
	opts     Options
	ps       int64
	rootPath string
	rootFd   int
	isRoot   bool // the daemon runs as root: chown new entries to the caller
	scratch  bool

	pages sync.Pool // *[]byte of ps bytes

	limiter  *rateLimiter
	flusher  *flusher
	prefetch *prefetcher
	store    backingStore // the write-back's access to backing files

	closed  atomic.Bool
	nextID  atomic.Uint64
	noXattr atomic.Bool // the backing store takes no user xattrs (checksum.go)

	// space is signalled (Broadcast) whenever write-back cleans pages, so
	// writers waiting for pool space retry.
	spaceMu      sync.Mutex
	space        *sync.Cond
	spaceWaiters atomic.Int64 // writers waiting for space: write back everything now

	mu      sync.Mutex
	files   map[fileKey]*file // live files by backing inode
	idle    idleList          // files nobody holds, coldest first
	maxIdle int

	remote    Remote        // a cluster's shared namespace (remote.go); nil: none
	remoteSem chan struct{} // bounds the remote read-ahead in flight

	stats counters
	snaps snapshots     // snapshot.go
	hist  *historyStore // access histories of the learned prefetch (history.go)
	// stageLatency is added to every read of the backing file for a
	// stage-in: benchmarks emulate a parallel file system's request
	// latency with it. Set before the first Open.
	stageLatency time.Duration
	// replayed is what New wrote back from a killed daemon's file tier
	// (nil: nothing to replay).
	replayed *bufferpool.ReplayReport
}

type counters struct {
	flushed, staged, flushErrors     atomic.Uint64
	hits, misses, bytesRead, written atomic.Uint64
	openFiles                        atomic.Int64
	dirSyncs                         atomic.Uint64
	prefetched, prefetchHits         atomic.Uint64
	prefetchWasted, prefetchedBytes  atomic.Uint64
	// Latency of each write of the write-back to the backing store, and
	// of each read of a stage-in from it (demand or read-ahead).
	flushLat, stageLat         hist.Histogram
	passthroughOpens           atomic.Uint64
	stagedDirect, stagedBehind atomic.Uint64
	readAround                 atomic.Uint64
	// Checksums (checksum.go): pages staged in from the backing file that
	// did not match the write-back's record; pages of slower tiers that
	// did not match the pool's and were staged in again; records too
	// large for the backing store's xattrs.
	backingCorrupt, repaired, tierCorrupt, sumsNotStored atomic.Uint64
	sumsChecked                                          atomic.Uint64 // stage-ins checked against a record
	// Learned prefetch (learned.go).
	learnedPages, learnedHits, learnedHot         atomic.Uint64
	historiesLoaded, historiesSaved, historiesBad atomic.Uint64
}

// New opens the namespace and starts the write-back workers.
func New(pool *bufferpool.Pool, opts Options) (*FS, error) {
	if opts.Mode == "" {
		opts.Mode = Writeback
	}
	switch opts.Mode {
	case Writeback, Writethrough, Scratch:
	default:
		return nil, fmt.Errorf("files: unknown mode %q (want writeback, writethrough or scratch)", opts.Mode)
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.PageSize < 4096 || opts.PageSize%4096 != 0 {
		return nil, fmt.Errorf("files: page size %d is not a positive multiple of 4096", opts.PageSize)
	}
	if opts.Flushers <= 0 {
		opts.Flushers = 4
	}
	if opts.NoSpaceWait == 0 {
		opts.NoSpaceWait = 30 * time.Second
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Readahead == 0 {
		opts.Readahead = DefaultReadahead
	}
	if err := checkCompressRules(opts.Compress); err != nil {
		return nil, err
	}
	root, err := namespaceDir(&opts)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("files: open namespace %s: %w", root, err)
	}
	if opts.Mode != Scratch {
		if err := unix.Faccessat(fd, ".", unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("files: backing directory %s is not writable: %w", root, err)
		}
	}
	fs := &FS{
		pool:     pool,
		opts:     opts,
		ps:       opts.PageSize,
		rootPath: root,
		rootFd:   fd,
		isRoot:   os.Geteuid() == 0,
		scratch:  opts.Mode == Scratch,
		files:    make(map[fileKey]*file),
		limiter:  newRateLimiter(opts.BackingBandwidth),
		store:    osStore{},
		maxIdle:  opts.MaxIdleFiles,
	}
	if fs.maxIdle <= 0 {
		fs.maxIdle = DefaultMaxIdleFiles
	}
	fs.hist = newHistoryStore(opts, root)
	fs.space = sync.NewCond(&fs.spaceMu)
	fs.pages.New = func() any { b := alignedPage(fs.ps); return &b }
	if !fs.scratch {
		fs.replayed = fs.replay()
	}
	fs.flusher = newFlusher(fs, opts.Flushers)
	fs.prefetch = newPrefetcher(fs, opts.Readahead)
	return fs, nil
}

// namespaceDir returns the directory holding the namespace, creating the
// private scratch directory in Scratch mode.
func namespaceDir(opts *Options) (string, error) {
	if opts.Mode == Scratch {
		parent := opts.ScratchDir
		if parent == "" {
			parent = os.TempDir()
		}
		if err := os.MkdirAll(parent, 0o700); err != nil {
			return "", fmt.Errorf("files: scratch dir: %w", err)
		}
		d, err := os.MkdirTemp(parent, "iowarp-scratch-")
		if err != nil {
			return "", fmt.Errorf("files: scratch dir: %w", err)
		}
		return d, os.Chmod(d, 0o755)
	}
	if opts.Backing == "" {
		return "", errors.New("files: a backing directory is required in " + string(opts.Mode) + " mode")
	}
	abs, err := filepath.Abs(opts.Backing)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("files: backing directory: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("files: backing %s is not a directory", abs)
	}
	return abs, nil
}

// Mode returns the write-back mode.
func (fs *FS) Mode() Mode { return fs.opts.Mode }

// Root returns the directory holding the namespace.
func (fs *FS) Root() string { return fs.rootPath }

// Close drains every dirty page (except in Scratch mode), stops workers,
// closes backing fds. It does not close the pool. While the backing store
// fails, the drain is retried for Options.DrainTimeout; then Close gives
// up, logs every file left dirty and returns an error naming them: their
// data are not on the backing store.
func (fs *FS) Close() error {
	if fs.closed.Swap(true) {
		return nil
	}
	var err error
	if !fs.scratch {
		err = fs.drain()
	}
	fs.flusher.stop()
	fs.prefetch.close()
	fs.closeSnapshots()
	fs.mu.Lock()
	all := fs.files
	fs.files = map[fileKey]*file{}
	fs.mu.Unlock()
	for _, f := range all {
		if fs.learning() {
			f.keepHistory() // still open: what it read so far
		}
		f.drop()
	}
	fs.spaceMu.Lock()
	fs.space.Broadcast()
	fs.spaceMu.Unlock()
	unix.Close(fs.rootFd)
	if fs.scratch {
		if rerr := os.RemoveAll(fs.rootPath); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// Sync is syncfs: returns when every file's data and size are on the
// backing store (no-op in Scratch mode).
func (fs *FS) Sync() error {
	if fs.scratch {
		return nil
	}
	return fs.syncAll(syncFull)
}

// WriteBackAll writes every file's dirty pages back and fdatasyncs them,
// without syncing files that are clean: what a reader of the backing
// directory itself needs (a format helper following HDF5 external
// storage into files the views know nothing of).
func (fs *FS) WriteBackAll() error {
	if fs.scratch {
		return nil
	}
	return fs.syncAll(syncData)
}

func (fs *FS) syncAll(mode syncMode) error {
	var first error
	for _, f := range fs.liveFiles() {
		if err := f.writeBack(mode); err != nil {
			if first == nil {
				first = fmt.Errorf("write-back of %s: %w", f.displayName(), err)
			}
			continue
		}
		fs.retireIfOver(f)
	}
	return first
}

func (fs *FS) liveFiles() []*file {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Collect(maps.Values(fs.files))
}

// Stats is a snapshot for `iowarp stat`.
func (fs *FS) Stats() Stats {
	ps := fs.pool.Stats()
	live := fs.liveFiles()
	failing, nfailing, stuck := failures(live)
	return Stats{
		LongestWriteBack: longestWriteBack(live),
		FailingFiles:     failing,
		FailingCount:     nfailing,
		StuckDirtyBytes:  stuck,
		Pool:             ps,
		Mode:             fs.opts.Mode,
		OpenFiles:        fs.stats.openFiles.Load(),
		DirtyBytes:       ps.DirtyBytes,
		FlushedBytes:     fs.stats.flushed.Load(),
		StagedBytes:      fs.stats.staged.Load(),
		StagedDirect:     fs.stats.stagedDirect.Load(),
		ReadAround:       fs.stats.readAround.Load(),
		StagedBehind:     fs.stats.stagedBehind.Load(),

		BackingChecksumErrors: fs.stats.backingCorrupt.Load(),
		TierChecksumErrors:    fs.stats.tierCorrupt.Load(),
		Repaired:              fs.stats.repaired.Load(),
		ChecksumsNotStored:    fs.stats.sumsNotStored.Load(),
		ChecksumsVerified:     fs.stats.sumsChecked.Load(),

		FlushErrors:      fs.stats.flushErrors.Load(),
		FlushBacklog:     fs.flusher.backlog(),
		ReadHits:         fs.stats.hits.Load(),
		ReadMisses:       fs.stats.misses.Load(),
		BytesRead:        fs.stats.bytesRead.Load(),
		BytesWritten:     fs.stats.written.Load(),
		DirSyncs:         fs.stats.dirSyncs.Load(),
		PrefetchedPages:  fs.stats.prefetched.Load(),
		PrefetchedBytes:  fs.stats.prefetchedBytes.Load(),
		PrefetchHits:     fs.stats.prefetchHits.Load(),
		PrefetchWasted:   fs.stats.prefetchWasted.Load(),
		Replay:           fs.replayed,
		PassthroughOpens: fs.stats.passthroughOpens.Load(),
		Learned:          fs.learnedStats(),
	}
}

// Statfs reports pool capacity as blocks (Bsize = 4096) and namespace
// inode counts.
func (fs *FS) Statfs() (unix.Statfs_t, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fs.rootFd, &st); err != nil {
		return st, err
	}
	var capacity, used int64
	for _, t := range fs.pool.Stats().Tiers {
		capacity += t.Capacity
		used += t.Used
	}
	const bs = 4096
	out := unix.Statfs_t{
		Bsize:   bs,
		Frsize:  bs,
		Blocks:  uint64(capacity / bs),
		Bfree:   uint64((capacity - used) / bs),
		Bavail:  uint64((capacity - used) / bs),
		Files:   st.Files,
		Ffree:   st.Ffree,
		Namelen: 255,
	}
	return out, nil
}

func (fs *FS) getPage() *[]byte  { return fs.pages.Get().(*[]byte) }
func (fs *FS) putPage(b *[]byte) { fs.pages.Put(b) }

// signalSpace wakes writers waiting for pool space.
func (fs *FS) signalSpace() {
	fs.spaceMu.Lock()
	fs.space.Broadcast()
	fs.spaceMu.Unlock()
}

// waitSpace waits until write-back cleaned something or d elapsed.
func (fs *FS) waitSpace(d time.Duration) {
	t := time.AfterFunc(d, fs.signalSpace)
	defer t.Stop()
	fs.spaceMu.Lock()
	fs.space.Wait()
	fs.spaceMu.Unlock()
}

// underPressure reports whether dirty data passed a quarter of the pool's
// capacity (or writers wait for space): the background write-back then
// drains files even while they are being written.
func (fs *FS) underPressure() bool {
	if fs.spaceWaiters.Load() > 0 {
		return true
	}
	st := fs.pool.Stats()
	var capacity int64
	for _, t := range st.Tiers {
		capacity += t.Capacity
	}
	return st.DirtyBytes*4 > capacity
}

// lookupFile returns the live file object of a backing inode, or nil.
func (fs *FS) lookupFile(k fileKey) *file {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.files[k]
}

// forget removes f from the table (its inode was unlinked or replaced).
func (fs *FS) forget(f *file) {
	fs.mu.Lock()
	if fs.files[f.key] == f {
		delete(fs.files, f.key)
	}
	fs.idle.remove(f)
	fs.mu.Unlock()
}

// drain writes every dirty page back and syncs it, retrying with the
// back-off while the backing store fails, for Options.DrainTimeout.
func (fs *FS) drain() error {
	deadline := time.Now().Add(fs.opts.DrainTimeout)
	for wait := retryMin; ; wait = min(2*wait, retryMax) {
		err := fs.syncAll(syncData)
		if err == nil || time.Now().Add(wait).After(deadline) {
			return fs.leftDirty(err)
		}
		time.Sleep(wait)
	}
}

// leftDirty logs each file whose data are not on the backing store after
// the last drain attempt failed with err, and returns an error naming
// them; nil if err is.
func (fs *FS) leftDirty(err error) error {
	if err == nil {
		return nil
	}
	list, n, stuck := fs.failures()
	if n == 0 {
		return fmt.Errorf("files: drain to %s: %w", fs.rootPath, err)
	}
	names := make([]string, 0, len(list))
	for _, ff := range list {
		fs.log().WithField("file", ff.Path).WithField("cause", ff.Errno).Errorf(
			"left dirty: %s: %d bytes not on the backing store, failing since %s (%d attempts): %s",
			ff.Path, ff.DirtyBytes, ff.Since.Format(time.RFC3339), ff.Attempts, ff.Error)
		names = append(names, ff.Path+" ("+ff.Errno+")")
	}
	if len(names) > 8 {
		names = append(names[:8], fmt.Sprintf("and %d more", n-8))
	}
	return fmt.Errorf("files: %d files (%d bytes) not written back to %s after retrying for %v: %s: %w",
		n, stuck, fs.rootPath, fs.opts.DrainTimeout, strings.Join(names, ", "), err)
}
