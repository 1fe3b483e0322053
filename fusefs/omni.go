package fusefs

// OMNI views: the hidden /.omni directory (see doc.go, "OMNI views").
// The view engine (datasets, generations, plans, the block cache in the
// pool) is formats/omni/view; this file wires it to the mount, and
// omni_nodes.go holds the node tree that serves it.

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/omni/view"
)

// omniDirName is the hidden directory at the root of the mount.
const omniDirName = ".omni"

// Formats reads datasets in isolation from the daemon: formats/helper's
// Pool implements it (format readers run in helper processes, never in
// the daemon's address space, which holds dirty buffers).
type Formats = view.Formats

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
	// OnLoad is view.Options.OnLoad (the search index's hook).
	OnLoad func(d *view.Dataset, g *view.Generation)
}

// OMNIStats counts what the views did; for tests and `iowarp stat`.
type OMNIStats = view.Stats

// omniFS is the views of one mount: the engine, and what the door adds
// (the registry listed in /.omni, the caller of each request).
type omniFS struct {
	*view.Engine
	m   *mount
	opt OMNIOptions
}

func newOMNI(m *mount, dir string, opt *OMNIOptions) *omniFS {
	if opt == nil {
		return nil
	}
	e := view.New(view.Options{Formats: opt.Formats, Pool: opt.Pool, Files: m.fs, MountDir: filepath.Clean(dir),
		BlockSize: opt.BlockSize, Logf: opt.Logf, RetryAfter: opt.RetryAfter, OnLoad: opt.OnLoad})
	if e == nil {
		return nil
	}
	return &omniFS{Engine: e, m: m, opt: *opt}
}

// close frees what the views hold outside the pool.
func (o *omniFS) close() { o.Engine.Close() }

// OMNIStats returns the counters of the /.omni views (zero when off).
func (s *Server) OMNIStats() OMNIStats {
	if s.omni == nil {
		return OMNIStats{}
	}
	return s.omni.Stats()
}

// OMNIEngine is the view engine of the mount's /.omni (nil when off).
func (s *Server) OMNIEngine() *view.Engine {
	if s.omni == nil {
		return nil
	}
	return s.omni.Engine
}

// asCaller is ctx carrying the FUSE caller of the request, for reads of
// data stored in other files (view.WithCaller).
func asCaller(ctx context.Context) context.Context {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return ctx
	}
	return view.WithCaller(ctx, view.Caller{Uid: c.Uid, Gid: c.Gid, Pid: c.Pid})
}

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
	if o == nil || !o.ThroughMount() {
		return false
	}
	procs, ok := o.Formats().(formatProcesses)
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
