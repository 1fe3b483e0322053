package fusefs

import (
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/fuseuring"
	"github.com/iowarp/iowarp/internal/sys"
)

// Options configure a mount.
type Options struct {
	// AllowOther lets users other than the mounter use the mount (needs
	// root or user_allow_other); permissions are checked by the kernel
	// (default_permissions) against the attributes we report.
	AllowOther bool
	// Debug logs every FUSE request and reply (through logrus, at debug
	// level).
	Debug bool
	// Passthrough hands read-only opens of files that are fully resident
	// in the RAM tier to the kernel (FUSE passthrough to the memfd): reads
	// then run at tmpfs speed without entering the daemon. While such an
	// open exists a writer's open fails ETXTBSY; see doc.go.
	Passthrough bool
	// AttrTimeout and EntryTimeout are how long the kernel may cache
	// attributes and names (0 = 1s). NegativeTimeout caches failed lookups
	// (0 = not cached, so a file created behind the kernel's back — by
	// the shim, or on the backing store — is seen at once).
	AttrTimeout, EntryTimeout, NegativeTimeout time.Duration
	// MaxReadAhead is the kernel readahead in bytes (0 = 1 MiB, the page
	// size of the pool; the kernel caps it at max_pages). Set both in
	// FUSE_INIT and in the mount's read_ahead_kb (tuneBDI).
	MaxReadAhead int
	// KeepCache keeps the kernel page cache of a file across opens; the
	// zero value decides per open from the file layer (files.Handle.CacheValid).
	KeepCache KeepCache
	// WritebackCache lets the kernel keep written pages dirty in its page
	// cache and write them back later (FUSE_WRITEBACK_CACHE), instead of
	// sending every write(2) to the daemon before it returns. The kernel
	// then owns the size and mtime of a regular file while it holds the
	// inode: changes made behind its back (another node through the
	// backing store) are not seen until it drops the inode. See doc.go.
	WritebackCache bool
	// IPCSocket is the daemon's runtime/ipc socket, handed to the shim
	// with the maps of a grant (grant.go): its misses go there (the fs
	// module's pread/pwrite, served by ShimHandle). "" = none.
	IPCSocket string
	// OMNI serves the hidden /.omni views of datasets (omni.go); nil
	// turns them off.
	OMNI *OMNIOptions
	// Metrics, if not nil, gets the latency of every request by opcode
	// (latency.go): two clock reads and three atomic adds per request.
	Metrics *RequestMetrics
	// IoUring says whether requests reach the daemon over the kernel's
	// per-CPU FUSE io_uring queues (internal/fuseuring) instead of
	// /dev/fuse reads: off (the zero value), auto (when the kernel offers
	// it, else /dev/fuse), on (required).
	IoUring fuseuring.Mode
}

// KeepCache says whether the kernel page cache of a file survives open(2).
type KeepCache int

const (
	// KeepCacheAuto keeps the cache unless the open found that another
	// node changed the file on the backing store (files.Handle.CacheValid):
	// every other write passes through this mount, hence through the
	// kernel cache. This keeps close-to-open consistency with other nodes.
	KeepCacheAuto KeepCache = iota
	KeepCacheNever
	KeepCacheAlways
)

const (
	defaultTimeout  = time.Second
	maxWrite        = 1 << 20
	defaultReadAhed = 1 << 20
)

// Server is a mounted file system. Safe for concurrent use.
type Server struct {
	srv   mounted
	dir   string
	root  *node
	omni  *omniFS // nil without Options.OMNI
	uring bool
}

// mounted is go-fuse's server (/dev/fuse) or fuseuring's (io_uring).
type mounted interface {
	Unmount() error
	Wait()
	KernelSettings() *fuse.InitIn
}

// Mount mounts fsys on dir and serves it until Unmount. The caller must be
// root: the mount is made with mount(2) directly (no fusermount), which is
// also what kernel passthrough requires.
func Mount(dir string, fsys *files.FS, opts Options) (*Server, error) {
	root, rootAttr, err := newRoot(fsys, opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: stat root: %w", dir, err)
	}
	root.m.omni = newOMNI(root.m, dir, opts.OMNI)
	fopts := fsOptions(rootAttr, opts)
	srv, uring, err := serve(dir, root, fopts, opts.IoUring, opts.Metrics)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	root.m.passthrough.Store(opts.Passthrough && srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0)
	if opts.Passthrough && !root.m.passthrough.Load() {
		logrus.Warnf("mount %s: the kernel does not offer FUSE passthrough: reads go through the daemon", dir)
	}
	if err := sys.CloexecDevFuse(); err != nil {
		logrus.Warnf("mount %s: %v", dir, err)
	}
	if err := tuneBDI(dir, readAhead(opts), opts.WritebackCache); err != nil {
		if userMount() {
			logrus.Infof("mount %s: %v (a user mount cannot tune /sys/class/bdi)", dir, err)
		} else {
			logrus.Warnf("mount %s: %v", dir, err)
		}
	}
	return &Server{srv: srv, dir: dir, root: root, omni: root.m.omni, uring: uring}, nil
}

// userMount reports whether the mount is made by a user without root:
// then go-fuse runs fusermount3 (setuid root) to mount and unmount, since
// mount(2) needs CAP_SYS_ADMIN. Root mounts directly (DirectMountStrict):
// no helper binary, and a failure is the kernel's own error.
func userMount() bool { return os.Geteuid() != 0 }

// serve mounts root and serves its requests over /dev/fuse or io_uring,
// with the raw file system wrapped in a timedFS when m is not nil.
func serve(dir string, root fs.InodeEmbedder, fopts *fs.Options, mode fuseuring.Mode, m *RequestMetrics) (mounted, bool, error) {
	var raw fuse.RawFileSystem = fs.NewNodeFS(root, fopts)
	if m != nil {
		raw = &timedFS{RawFileSystem: raw, m: m}
	}
	if mode == fuseuring.Auto && userMount() {
		// fuseuring mounts with mount(2) itself (root only); a user mount
		// goes through fusermount3 and /dev/fuse.
		mode = fuseuring.Off
	}
	if mode == fuseuring.Off {
		srv, err := fuse.NewServer(raw, dir, &fopts.MountOptions)
		if err != nil {
			return nil, false, err
		}
		go srv.Serve()
		if err := srv.WaitMount(); err != nil {
			return nil, false, err
		}
		return srv, false, nil
	}
	srv, fallback, err := fuseuring.Mount(dir, raw, fopts.MountOptions, mode, fuseuring.Config{})
	if err != nil {
		return nil, false, err
	}
	if fallback != nil {
		logrus.Infof("mount %s: FUSE over /dev/fuse (io_uring not used: %v)", dir, fallback)
	} else {
		logrus.Infof("mount %s: FUSE requests over io_uring", dir)
	}
	return srv, srv.Uring(), nil
}

// Uring reports whether requests reach the daemon over io_uring.
func (s *Server) Uring() bool { return s.uring }

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// readAhead is the kernel readahead the mount asks for, in bytes.
func readAhead(opts Options) int {
	if opts.MaxReadAhead == 0 {
		return defaultReadAhed
	}
	return opts.MaxReadAhead
}

// fsOptions builds go-fuse's options. Timeouts are set per reply by the
// nodes (see node.entryOut); the ones here are the bridge's fallback.
func fsOptions(rootAttr fs.StableAttr, opts Options) *fs.Options {
	attr := orDefault(opts.AttrTimeout, defaultTimeout)
	entry := orDefault(opts.EntryTimeout, defaultTimeout)
	neg := opts.NegativeTimeout
	ra := readAhead(opts)
	logger := log.New(logrus.StandardLogger().WriterLevel(logrus.DebugLevel), "", 0)
	return &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:        opts.AllowOther,
			Options:           mountFlags(opts),
			FsName:            "iowarp",
			Name:              "iowarp",
			MaxWrite:          maxWrite,
			MaxReadAhead:      ra,
			DirectMountStrict: !userMount(),
			Debug:             opts.Debug,
			Logger:            logger,
			EnableLocks:       false,
			// security.* (capabilities, SELinux labels) is not served:
			// answered ENODATA by go-fuse itself.
			IgnoreSecurityLabels: true,
			// We clear suid/sgid ourselves on write, truncate, chown
			// (see killSuidgid), so the kernel need not ask for
			// security.capability before every write.
			// Direct-I/O opens (made while a shim writes the file in
			// place, see grant.go) can still be mapped MAP_SHARED.
			ExtraCapabilities: extraCaps(opts),
			PanicHandler:      panicHandler,
		},
		// A mode of 0000 is served as it is: without this go-fuse
		// replaces it with 0644 (0755 for a directory), and with
		// allow_other another user could read a file its mode denies.
		NullPermissions: true,
		AttrTimeout:     &attr,
		EntryTimeout:    &entry,
		NegativeTimeout: &neg,
		RootStableAttr:  &rootAttr,
		Logger:          logger,
	}
}

// mountFlags are the mount's -o options. default_permissions (the kernel
// checks access against our attributes) only with AllowOther, as go-fuse's
// loopback does: without allow_other the kernel lets no process but root
// (the mounter) in at all, and root passes every check but exec of a
// file without an x bit, which the kernel still makes (fuse_permission)
// and access(2) asks us (go-fuse answers from the attributes). What it
// saves: the kernel drops a directory's attributes after every create,
// unlink, mkdir... in it, and with default_permissions the next one then
// waits on a GETATTR of the directory first: 9 requests per mdtest file
// instead of 7. A process of uid 0 that dropped CAP_DAC_OVERRIDE is the
// one caller that sees a difference (it reads what the mode denies).
func mountFlags(opts Options) []string {
	if opts.AllowOther {
		return []string{"default_permissions"}
	}
	return nil
}

// extraCaps are the capabilities asked for beyond go-fuse's defaults.
func extraCaps(opts Options) uint64 {
	caps := uint64(fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_DIRECT_IO_ALLOW_MMAP)
	if opts.WritebackCache {
		caps |= fuse.CAP_WRITEBACK_CACHE
	}
	return caps
}

// Unmount detaches the mount; it fails (EBUSY) while files are open,
// like umount(8).
func (s *Server) Unmount() error {
	err := s.srv.Unmount()
	if err == nil && s.omni != nil {
		s.omni.close()
	}
	return err
}

// Wait returns when the mount is gone (Unmount, or umount from outside).
func (s *Server) Wait() { s.srv.Wait() }

// Dir is the mount point.
func (s *Server) Dir() string { return s.dir }

// passthrough reports whether opens may be passed through to the kernel
// (Options.Passthrough, and the kernel took CAP_PASSTHROUGH).
func (s *Server) passthrough() bool { return s.root.m.passthrough.Load() }
