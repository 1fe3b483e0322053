// Package files gives POSIX file semantics on the buffer pool: the layer
// both doors (FUSE and the LD_PRELOAD shim) call, so they are coherent by
// construction.
//
// # Model
//
// The namespace (directories, names, symlinks, hard links, modes, owners,
// times, user.* xattrs) lives in a directory: the backing directory (the
// parallel file system) in writeback and writethrough modes, a private
// scratch directory in scratch mode. Namespace operations are applied to it
// at once, in order, each through a directory fd and one name (resolve.go):
// the parent is opened with openat2 (RESOLVE_BENEATH, no symlinks; one
// openat per component with O_NOFOLLOW where openat2 is missing), so no
// path is bounded by PATH_MAX (only a component is, by NAME_MAX) and a
// directory replaced by a symlink on the backing store never leads out of
// it. Fsyncdir fsyncs the backing directory: a name created or renamed
// before it is then durable. A regular file's data lives in the pool: the file is a
// bucket (named "file:<id>", not by path, so renames and hard links keep
// it), page i of the file is page blob i. A read miss stages the page in
// from the backing file; writes dirty pages in the pool.
//
// Data reaches the backing store through an fd on the backing inode held by
// the file object, never by path, so a rename or unlink racing with the
// write-back cannot send data to the wrong name. Truncation is applied to
// the backing file at once, serialized with the write-back of that file
// (backingMu), so shrink-then-grow sequences never resurrect old bytes.
//
// # Durability
//
//   - writeback: a write returns once the pool holds it; dirty pages drain in
//     the background (close starts the drain of the file). Fsync, fdatasync
//     and Sync (syncfs) return only when every dirty page of the file (all
//     files) is written to the backing file, its size and mtime are set, and
//     the backing fd is fsynced: after fsync returns 0 the data survives
//     kill -9 of the daemon. Close waits only with Options.FlushOnClose.
//   - writethrough: a write returns once its pages are on the backing file
//     (written, not fsynced; fsync adds the fsync).
//   - scratch: data is never written back; the private namespace is removed
//     at Close.
//
// After kill -9, dirty pages that were on a journaled file tier are written
// back by the next FS on the same pool directories before it serves
// (replay.go); what was only in RAM is lost.
//
// A write-back error leaves the pages dirty in the pool (nothing is lost),
// is retried, and is reported by the next fsync of that file.
//
// # Full pool
//
// The pool evicts clean pages itself. When every page is dirty a write
// waits for the flushers to clean some (up to Options.NoSpaceWait) and then
// fails with ErrNoSpace (ENOSPC at the doors). Scratch mode fails at once.
//
// # Caching and other nodes
//
// Close-to-open consistency with other nodes through the backing store: an
// open of a file with no open handles and no dirty pages compares the
// backing file's size and mtime with what this node last saw and drops
// its cached pages if they differ.
//
// # Locks
//
// Lock order: file.backingMu → file.mu → FS.mu → (pool locks). FS.mu guards
// only the file table. file.mu (an RWMutex) keeps the size stable: reads
// and in-place writes hold it shared, appends, truncation and
// fallocate hold it exclusively. Nothing waits for pool space while
// holding file.mu.
package files
