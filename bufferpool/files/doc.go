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
// Write-back writes the dirty byte ranges of a page, not the page: the
// pool remembers up to four ranges per page (bufferpool.PageSnapshot),
// merged where they overlap or touch, the closest two merged past that.
// A stream of small writes then writes each byte to the backing store
// once (writethrough included), and a page written only in part over a
// hole (a new page, a write far past EOF) leaves the rest a hole on the
// backing file; the gap up to a write past EOF is extended by ftruncate,
// a hole too. Shim fast-path writes set only a page's dirty bit: the
// harvest makes such a page dirty as a whole (up to the size). The
// ranges are cleared with the dirty bit, so a failed write-back keeps
// them for the next attempt. Fallocate punches (or zeroes) the backing
// file first and then the pool's pages, taking those bytes out of the
// ranges: the write-back never writes zeros over a hole it punched.
//
// A page is clean (evictable) only once the backing store has it: the
// background write-back writes a file's dirty pages, its size and mtime,
// fdatasyncs the backing file, and only then marks the pages clean.
//
// # Checksums
//
// The write-back records the crc32c of each page it writes whole in the
// backing file's xattr user.iowarp.crc32c, with the size and mtime it
// left; a whole-page stage-in checks the page against it while size and
// mtime are unchanged (EIO on a mismatch, one log line per page). Pages
// the pool holds on slower tiers carry the pool's own checksums; a clean
// one that fails is dropped and staged in again. checksum.go has the
// rules and why an xattr.
//
// # A failing backing store
//
// A write-back that fails (ENOSPC, EDQUOT, EROFS, EIO; at write or only at
// fsync time) leaves every page of that attempt dirty in the pool. That is
// why pages are marked clean after the sync and not after the write: after
// a failed fsync Linux marks its own page-cache pages clean and the data
// may be gone, and NFS or Lustre report ENOSPC and EDQUOT at fsync or
// close only; the pool keeps the only good copy. The flusher retries the
// file after a back-off (100 ms, doubling, at most 5 s), however much is
// written to it meanwhile.
//
// Fsync, fdatasync and Sync (syncfs) attempt the write-back themselves and
// return its error, wrapping the errno the store gave (the doors translate
// it), on every call while the store fails, and 0 once a write-back
// succeeded, which means the data are on the store. This is not Linux's
// errseq behaviour (an error reported once to each open file, the data
// dropped): here nothing is dropped, so no error is owed once the data
// made it, and an application that retries a failed fsync is right to.
// Writethrough writes are the exception: they return once on the backing
// file, unsynced, and are clean at once, as the application's own write(2)
// to the store would be; an fsync failure of the backing file then
// surfaces once, as Linux reports it.
//
// Each file logs one line when its write-back starts failing with a cause
// (rate-limited to one a minute per file and cause) and one when it works
// again, never one per retry. Stats lists the failing files with cause,
// last error and dirty bytes. A pool full of data the store does not take
// makes writes wait NoSpaceWait, then fail with ErrNoSpace; dirty pages
// are never evicted. Close retries for Options.DrainTimeout, then returns
// an error naming the files left dirty (and logs each): their data are not
// on the backing store and go with the pool.
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
// With a cluster's shared namespace (Remote, remote.go) a file owned by
// another node is read from that node before it is written back, still
// close-to-open: the view an open takes replaces the comparison above.
//
// # Stage-in, stage-out, evict
//
// StageIn, StageOut and Evict (stage.go) are what a job script asks for
// around its run. StageIn reads pages from the backing file as the
// read-ahead does and installs them clean only where absent, so a racing
// write wins; it never evicts to make room and stops once no tier has
// room. StageOut is a write-back and fsync of the files named (all live
// files by default), optionally followed by EvictClean. Evict drops clean
// pages only: a dirty page is never dropped.
//
// # Learned prefetch
//
// Each file's reads in a session (first open to last close) are kept as
// an access history on the first file tier (history.go), valid for the
// backing file's size and mtime; the next session stages its pages in in
// that order, a read-ahead window ahead of the reader, and installs the
// pages read more than once on the fastest tier (learned.go). Like the
// read-ahead it never evicts to make room.
//
// # Locks
//
// Lock order: file.backingMu → file.mu → FS.mu → (pool locks). FS.mu guards
// only the file table. file.mu (an RWMutex) keeps the size stable: reads
// and in-place writes hold it shared, appends, truncation and
// fallocate hold it exclusively. Nothing waits for pool space while
// holding file.mu. file.stateMu is a leaf; noteWriteBack takes
// flusher.mu after releasing it. file.learn.mu (learned.go) is taken
// holding nothing of the file or the pool, and takes pfState.mu and the
// bucket's read lock inside.
//
// A stage-in reads the backing file holding no lock of the pool (a demand
// read holds file.mu shared, the read-ahead nothing) and installs the page
// under the bucket lock only if it is still absent and file.backingGen did
// not move: everything that changes the backing file or drops pages
// (write-back, truncate, fallocate, revalidation, retire, drop) takes
// backingMu through lockBacking, which makes backingGen odd until
// unlockBacking. While it is odd a demand stage-in takes the bucket's fill
// path (the backing read under the bucket lock) and the read-ahead skips
// the page. A demand read that finds the page being read ahead waits for
// it holding file.mu shared; that wait cannot close a cycle, because the
// read-ahead takes no lock while it reads, and a pinned read
// (Handle.ReadPinned holds the bucket's read lock until the reply is
// sent) feeds the read-ahead before it pins.
package files
