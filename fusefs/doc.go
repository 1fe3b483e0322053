// Package fusefs is the FUSE door of iowarp: a go-fuse node tree that
// serves the namespace and data of a bufferpool/files.FS. It holds no file
// semantics of its own; every operation becomes one call of the file layer
// by path (relative to the root) or on the open files.Handle.
//
// # Identity
//
// Every kind of inode is one node type. A node's StableAttr.Ino is the
// backing inode number, so hard links share one Inode and stat(2) shows
// the backing numbers. A table (mount.inodes) maps an inode number to its
// live node: a lookup of a second name of a linked file finds it, and a
// node whose name was removed (an unlinked file still open) is never
// handed out again, even when the backing store reuses its inode number:
// the new file gets a fresh generation, hence a fresh FUSE node ID and
// kernel inode. Nodes are forgettable: while the kernel references a node
// (lookup count, open files, cwd) go-fuse keeps it; after FORGET it is
// dropped from the tree and the table, and a later lookup builds a new one
// with the same inode number. Memory is therefore bounded by what the
// kernel caches, not by every name ever listed (readdirplus of a
// million-file directory would otherwise pin a million nodes).
//
// # What the kernel caches, and for how long
//
//   - Names and attributes: EntryTimeout and AttrTimeout (1 s by default).
//     Every write, truncate, chmod... passes through us and the kernel
//     updates or invalidates its copy of the attributes after each (after
//     a WRITE it extends i_size itself and invalidates the rest), so on
//     this node the only staleness is a change made behind the kernel's
//     back (the shim, another node through the backing store), for at most
//     the timeout. Failed lookups are not cached (NegativeTimeout 0) so a
//     file created by the shim is visible at once.
//   - File data: the page cache, written through by default (every
//     write(2) reaches the file layer before it returns; see Writeback
//     cache below). It is
//     dropped at every open(2) (close-to-open consistency with other
//     nodes writing the backing store) except in Scratch mode, where the
//     namespace is private and FOPEN_KEEP_CACHE is set; the kernel also
//     drops it when it sees mtime or size change (CAP_AUTO_INVAL_DATA).
//     O_DIRECT opens bypass it (FOPEN_DIRECT_IO); the pool is then the
//     only cache. Readahead is Options.MaxReadAhead (1 MiB, a pool page),
//     set in the mount's read_ahead_kb too (tuneBDI): the kernel caps
//     FUSE_INIT's value at 128 KiB.
//   - Writeback cache (Options.WritebackCache, off by default): write(2)
//     fills the page cache and returns; the kernel sends the dirty pages
//     later (under memory pressure, at the latest on close — FLUSH — and
//     fsync, both of which write them back before the request reaches us,
//     so close and fsync keep their meaning). The kernel then owns the
//     size and mtime of a regular file: it ignores ours while it holds the
//     inode and sends its mtime back in a SETATTR (also after the last
//     close of an unlinked file: answered from the node's last attributes,
//     setattrGone). A size or mtime changed behind its back (another node
//     through the backing store) is not seen until the inode leaves its
//     cache, which is why the option is off by default. Dirty pages of one
//     open go back through any writable handle of the inode, so handles
//     are opened without O_APPEND (the kernel places appends at its own
//     size) and write-only opens as read-write where the caller may read
//     the file (the kernel may fill a partly written page through them);
//     a write-only open of a file it may not read stays write-only and
//     gets FOPEN_DIRECT_IO. Opens by a process with the shim loaded
//     (shimLoaded: libiowarp in its maps) get FOPEN_DIRECT_IO too: the
//     shim attaches after the open's cache mode is fixed, and pages held
//     dirty in the kernel would land later over what it wrote to the pool.
//     An open by another process made before a shim attached keeps the
//     cache: its dirty pages are written back when the shim maps the file
//     (the invalidation launders them) and then at close, fsync or the
//     next harvest invalidation, so between those its writes to a range a
//     shim also writes may land after the shim's. Every fusefs test but
//     TestCopyFileRange (which writes behind the kernel from a process
//     without the shim, the one case shimLoaded cannot see) passes with the
//     writeback cache on.
//   - Passthrough (Options.Passthrough, off by default): a read-only open
//     of a file whose pages all lie in the RAM tier, made while nothing
//     else has the inode open, is served by the kernel straight from the
//     tier's memfd (FUSE passthrough, admit): reads never reach the daemon
//     (measured: fio 4 KiB random reads at 0.8-1.2x tmpfs latency instead
//     of 15-19x). The kernel keeps an inode in one I/O mode: while such an
//     open exists every other open must be passed through to the same
//     file, so later readers join it and a writer is refused ETXTBSY
//     while the readers are open (answering it direct I/O fails EIO in
//     the kernel; passing it through would send its writes into the memfd
//     behind the pool's dirty tracking and capacity accounting); since
//     the kernel sends RELEASE after close(2) returns, a writer first
//     waits up to ptReleaseWait for readers already closed, and no open
//     is passed through within ptSettle (5 ms) of a release of the
//     inode (measured: one answered sooner was at times failed EIO by
//     the kernel, whose I/O mode seems to follow our RELEASE reply). Until
//     the release the file's pages are pinned in the RAM tier and the
//     memfd is kept at the file's size (its length is the EOF the kernel
//     reads to; truncates follow it); the shim is not granted maps of
//     such an open (ENOTTY: its reads are at tmpfs speed already). Known
//     hole: a map (mmap) of a passed-through open outlives the release
//     (it maps the memfd itself), so a program that reads through a map
//     after closing the fd may see zeros where the pool has since moved
//     pages to a lower tier. Both are why the option is off by default.
//   - Locks: flock and fcntl locks are kept by the kernel (EnableLocks is
//     off), so they are node-local, as on a local file system.
//
// # Coherence with the shim
//
// The shim reads and writes resident pages of the RAM tier through shared
// memory without telling the kernel (grant.go hands out the maps). At the
// handshake the inode's cached pages are dropped (NotifyContent). While
// any open holds a read-write map, every other open of the inode gets
// FOPEN_DIRECT_IO (CAP_DIRECT_IO_ALLOW_MMAP keeps MAP_SHARED working), so
// a plain cat sees every byte a shim wrote, at once; when the last such
// open is released the cache is dropped again. Opens made before the
// first read-write map keep their cache mode: the file layer's periodic
// harvest of shim writes drops the inode's cache when it finds some, and
// sets the mtime (CAP_AUTO_INVAL_DATA), so their staleness is bounded.
// Sizes only change through the kernel path, so stat is always right.
//
// # Permissions, ownership, suid
//
// With AllowOther the mount uses default_permissions (without it only root
// may enter, and root passes the checks; see mountFlags): the kernel checks
// access against the attributes we return, exactly as the backing store has them: a mode of
// 0000 stays 0000 (go-fuse's NullPermissions; without it go-fuse serves
// 0644/0755 and, with allow_other, another user reads what its mode
// denies). The shim's grant adds nothing to that: it is bound to an open
// the kernel already checked and to that open's access mode. New files, directories, symlinks and nodes are
// created with the caller's uid/gid (files.Cred). CAP_HANDLE_KILLPRIV_V2
// is negotiated: the kernel then sets SB_NOSEC and asks for
// security.capability once per inode (then marks it S_NOSEC) instead of
// before every write — measured: 1 GETXATTR for 20 writes, 20 without it
// (TestNoGetxattrPerWrite). In exchange clearing suid/sgid is our job
// (killSuidgid, the VFS rules): on chown of a regular file always, on
// truncate when the kernel flags the caller unprivileged
// (FATTR_KILL_SUIDGID), and on write by a non-root caller (a write request
// does not carry the kernel's flag to go-fuse's node API, so uid 0 stands
// for CAP_FSETID). A write looks at the mode only while the node's last
// attributes had a set-ID bit.
// security.* xattrs are answered ENODATA by go-fuse (IgnoreSecurityLabels);
// user.* xattrs are served by the file layer.
//
// # Transport
//
// Requests reach the daemon over /dev/fuse reads (go-fuse's server) or,
// with Options.IoUring, over the kernel's per-CPU FUSE io_uring queues
// (internal/fuseuring), answered by the same go-fuse code: the nodes cannot
// tell. Over io_uring a request is answered by a thread pinned to the CPU
// that made it; INIT, FORGET and notifications still use /dev/fuse.
//
// # Errors
//
// toErrno is the only translation from the file layer's errors to errno.
// A panic in a handler is recovered by go-fuse, logged through
// panicHandler and answered EIO. Calls into the file layer take no
// context: an interrupted request (FUSE_INTERRUPT) runs to completion.
//
// # Lock order
//
// go-fuse's locks (the tree, the node table) are outermost: they are never
// held when go-fuse calls a node method. Within fusefs: mount.inoMu, then
// go-fuse's locks (Inode.Parent, NewInode); dirHandle.mu and node.openMu
// are taken alone.
// Locks of the file layer are taken inside its calls only.
//
// # Snapshots (/.snapshots)
//
// The root also serves ".snapshots" (snapshots.go; found by lookup, never
// listed, a real entry of that name in the backing root shadowed): one
// directory per snapshot of the file layer (files.FS.CreateSnapshot),
// holding the tree as it was at create, with each entry's mode, owner and
// times of then, which the kernel checks (default_permissions). Reads go
// to files.SnapReader; every write of any kind is EROFS.
//
// # OMNI views (/.omni)
//
// With Options.OMNI the root serves a hidden directory ".omni" (found by
// lookup, never listed, like .zfs; a real entry of that name in the
// backing root is shadowed). It lists the assimilated datasets of the
// registry, and /.omni/<path>/ opens any HDF5, NetCDF, Zarr, CSV, JSON
// lines or Parquet file of the mount lazily. Groups are directories; a
// variable is a directory of data (raw, C order), data.npy (NumPy 1.0,
// exact size, any offset), data.csv (direct I/O, never held whole: its
// exact size is learnt by rendering it once, by runs of rows, at the
// first stat, and a read renders the rows it covers: view.CSVReader; a view of more than 64 MiB of raw data has no
// data.csv: not listed, EFBIG by name), shape and dims (JSON arrays), dtype, attrs/<name> (also
// user.* xattrs; groups have them too); schema.json at the top. Names
// such as temperature[0:2,10:20,:] and temperature@time=2024-01:2024-06
// are views, looked up but not listed. Everything is read-only (EROFS).
// View directories carry the source's owner and no permission it lacks (a
// source directory's read and search bits; a dataset file's read bits,
// with search where readable), so the kernel applies the source's
// permissions.
//
// The engine behind these nodes (datasets, generations, plans, blocks,
// the cache in the pool) is formats/omni/view; this package adds the
// nodes, the caller of each request (view.WithCaller) and the errno
// translation (omniErrno). `iowarp query` drives the same engine.
//
// Data: formats run in helper processes (Formats, formats/helper), never
// here. A view is cut into blocks that follow the variable's chunks (one
// helper request each, decoded straight into a shared-memory staging
// buffer) and kept as clean pages of the page bucket "omni:<path>" in the
// pool: a second read is served from the pool without a helper, and the
// pool may evict them like any clean page. A reader moving forward keeps
// the helpers busy on the next two blocks. Staging memory is zeroed
// before each helper request, and a block the helper did not fill to
// its length fails (EIO).
//
// Who reads: helpers are confined to the dataset's root (the backing
// store; the mount in Scratch mode; the source's directory for an
// assimilated file outside the mount; formats/helper.As.Root). The
// source's own bytes (schema, data stored in it) are read by helpers of
// the daemon's identity and shared, since the kernel lets only users
// who may read the source see its views. Variables whose data lives in
// other files (HDF5 external storage, virtual datasets: Variable.External)
// are read by a helper running as the FUSE caller (uid, gid, groups),
// uncached and unshared, and their sources must lie inside the root;
// elsewhere the read is EACCES or EIO. Coordinate filters and string
// variables of such data are not served. Attribute values over 1 MiB
// are left out of the schema the daemon holds (omni.CapAttrs); their
// attrs/<name> says so.
//
// Coherence: each dataset has a generation keyed by the source's inode,
// size, mtime and mode (files.FS.Lstat, which sees unflushed writes).
// Every lookup, readdir and open compares them; a change loads a new
// generation and drops the old bucket. Before a helper opens a file, its
// dirty pages are written back (files.Handle.Fsync; a directory store:
// FS.Sync) and the helper reads the backing file directly, never through
// the mount, so a helper never waits on this daemon. Scratch mode keeps no
// backing copy: there the helper reads through the mount itself (mount
// point + path), which serves the current bytes. The view request then
// waits on a helper that waits on this server; that is safe because the
// view request holds no lock while it waits (below), go-fuse serves
// requests concurrently, and the helpers' opens are answered with
// FOPEN_DIRECT_IO (recognised by their pids, Formats' Runs) so their
// reads are synchronous requests, never queued behind the view reads in
// the kernel's background queue (MaxBackground). The helper deadline
// remains the last resort. Helpers keep files open between requests
// (without HDF5 file locks): stop them before Unmount, or it is busy.
// A data file opened
// before a change fails its reads with ESTALE. A Zarr store's generation
// follows the store directory only (a rewritten chunk file is not seen).
//
// Failures: a failed open or block read is logged once (one line, with
// the helper's last words when it crashed or timed out), remembered for
// the generation for OMNIOptions.RetryAfter (no second helper request
// until then, or until the source changes) and answered EIO (EACCES for
// a permission error); a panic while a block is read is an EIO of that
// block. No lock is held while a helper works. view.Engine.mu,
// view.Dataset.mu and view.Generation.mu are each taken alone, inside
// nothing.
//
// fsyncdir fsyncs the directory in the backing store (files.FS.Fsyncdir):
// the namespace is applied there synchronously, so this makes its entries
// durable against a crash of the backing host.
package fusefs
