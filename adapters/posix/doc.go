// Command posix is libiowarp.so, the LD_PRELOAD door into iowarp (built
// with -buildmode=c-shared; `iowarp run -- CMD` preloads it).
//
// # What is ours
//
// Every interposer first looks the fd up in a table kept on the C side (an
// array indexed by fd, one atomic load): a call on an fd that is not ours
// goes straight to libc and never enters Go. An fd becomes ours when an
// open on a FUSE file system succeeds and the handshake ioctl on it
// (fusefs.IocCap) returns a capability; ENOTTY (not iowarp, or a daemon
// without the handshake) leaves it a plain fd. Every fd of ours stays a
// real kernel fd on the mount, so anything the shim does not serve (fstat,
// a forked child, the calls below that it hands to the kernel) is served
// by the kernel and stays correct.
//
// The table follows dup, dup2, dup3, fcntl(F_DUPFD, F_DUPFD_CLOEXEC),
// close, close_range, closefrom and fclose, and every call that makes an
// fd (open of another file, socket, pipe, accept) clears the slot of the
// number it returns: a reused number is never taken for ours. Dups share
// one open file description record (struct iow_ofd), as in the kernel, so
// F_SETFL(O_APPEND) on one is seen by all. exec starts a new image with an
// empty table: inherited fds are plain fds there.
//
// # Data path
//
// Hits touch shared memory only (fast.c). The capability names a grant at
// the daemon's grant socket; the shim presents it with its token and gets
// the fds of the file's page table and RAM-tier segment, opened by the
// daemon read-only for an O_RDONLY open and read-write for an O_RDWR one,
// or an O_WRONLY one whose uid may also read the file (fusefs/grant.go),
// and maps them. It does so at the fd's first call that needs the maps (a
// read, a write, fstat, mmap), not at open: an open without I/O (a create)
// costs the daemon no grant and no page table. The open's is-it-FUSE
// probe (fstatfs) is asked once per device (posix.c, on_fuse).
//
// fstat of an attached fd is served from the page table: the kernel's last
// answer for the open, kept while the table's attribute generation stays
// (the daemon raises it at every change of what stat answers other than a
// shim write), with the table's size and mtime words (every fast write
// stamps the mtime; the daemon's harvest takes it as the file's mtime).
// IOWARP_REPORT counts the fstatfs probes made and saved (statfs,
// statfs_cached), the grants made and skipped, and fstat answered by the
// kernel and by the table (fstat_kernel, fstat_cached).
//
//   - A read whose pages are all resident is a seqlock read (seq even,
//     residency bits, memcpy, seq unchanged).
//   - A write inside the file whose pages are all resident copies in place:
//     writers++ (seq_cst), then seq even, not poisoned, resident, else
//     writers-- and the kernel path; memcpy; set the pages' shared dirty
//     bits; writers--. The daemon makes seq odd before it waits for
//     writers to drain, so no page moves under a writer, and harvests the
//     dirty bits into the pool before write-back, fsync, eviction or
//     demotion (bufferpool/pagetable_unsafe.go).
//   - New data (bufferpool/lease.go): a write past the size whose pages
//     are resident, or new (their first byte at or past the size: no old
//     data to stage in, inside the segment's cover), lands in shared
//     memory too: the shim takes the new pages out of the file's lease
//     (first-tier capacity the daemon reserved, refilled in 64 MiB steps
//     by its harvester; a spent lease sends writes to the kernel until
//     the refill, nothing lost), marks them resident and dirty, copies,
//     and raises the shared size with an atomic max. The daemon adopts
//     the pages at its next write lock and folds the size in before every
//     stat, read, lseek, append, truncate, fallocate and write-back.
//     IOWARP_NOFASTNEW=1 keeps such writes on the kernel path.
//   - The kernel keeps its own copy of the size (copy_file_range,
//     sendfile, mmap faults, SEEK_END and O_APPEND use it): before those,
//     and before fstat of our fds, the shim makes it current with a forced
//     statx when the shared size moved (iow_fast_ksync). Attributes of a
//     file a shim may write are cached for 1 ns (one jiffy in practice).
//   - Vector calls (readv, writev, preadv, pwritev, preadv2/pwritev2 with
//     no flags) of at most 4 MiB take the fast path as one contiguous
//     call through a bounce buffer.
//   - Everything else takes the kernel path on the same fd, with nothing
//     moved: a miss (the daemon stages the page in; the next access hits),
//     an append (O_APPEND: atomic in the kernel; the daemon reserves its
//     range in the shared size against shims), truncate, fsync (the daemon
//     harvests pages and size first, so fsync returning 0 means the shim's
//     bytes and the size are on the backing store), close.
//   - With IOWARP_IPC=1, misses go through runtime/ipc instead of FUSE: a
//     read of pages not resident, or a write inside the file to such pages
//     (read-write maps only), becomes the fs module's pread/pwrite on the
//     daemon's handle of this open (ipc.go), named by the grant and token;
//     the daemon checks them against the connection's SO_PEERCRED and the
//     open's access mode, refuses writes that would change the size, and
//     stages the pages in. The socket comes with the grant's reply; one
//     connection per process, made on first use, never in a forked child;
//     any error before data moved takes the kernel path. The report counts
//     these bytes as ipc_read and ipc_write. Off by default: a miss stages
//     a 1 MiB page in (~0.5 ms here), so the ~30 us saved over FUSE is
//     within the noise (scripts/bench-shim.sh).
//
// The kernel's page cache of the shim's own fd (opened before any map
// was granted, so cached) does not see fast-path writes, and a shared map
// stores into that cache, not the pool. So every kernel call that reads
// it sees what the fast path wrote, and the reverse (mmap.c):
//
//   - kernel reads (a miss, vector calls, sendfile and splice from our
//     file, copy_file_range) first drop the cached range, widened to
//     whole pages (fadvise keeps partial ones); copy_file_range within the
//     mount is served by the daemon from the pool (fusefs);
//   - mmap of our file drops the file's cached pages first; while the
//     process maps the file, its calls on it take the kernel path, and
//     munmap of a shared map writes its dirty pages back (msync) before
//     the fast path comes back;
//   - a fast write made while another thread maps the file drops its
//     range again (iow_map_gen);
//   - a shared map through a read-write open is counted in the file's
//     page table: while any shim maps the file so, every shim's calls on
//     it take the kernel path (other processes see the map's stores).
//
// Both doors work on one copy of the data. While a shim holds a read-write
// map of a file, every other open of it bypasses the kernel page cache
// (FOPEN_DIRECT_IO), so a plain cat sees shim writes at once; the shim's
// own fd was opened before that, so its kernel-path reads first drop the
// cached range (posix_fadvise DONTNEED). The kernel file offset is the
// truth: read(2) and write(2) on the fast path read it and move it with
// lseek (so two threads racing on one fd's offset are not atomic with
// each other, as they are in the kernel). IOWARP_NOFAST=1 turns hits
// off, IOWARP_NOFASTWRITE=1 write hits only.
// # STDIO
//
// fopen, fopen64, fdopen and freopen on our files return fopencookie
// streams whose callbacks are the interposers above (glibc's own streams
// call its internal read/write, which no interposer sees); fileno on them
// answers the fd. Streams on other files are glibc's, unchanged.
//
// # _FORTIFY_SOURCE, errno, signals
//
// Programs built with -O2 -D_FORTIFY_SOURCE call __read_chk, __pread_chk
// and __pread64_chk, which glibc serves with its internal read: they are
// interposed (size check, __chk_fail on overflow, then the normal path).
// Every real libc function is resolved with dlsym in the constructor
// (DECL_REAL registers it), never on first use from a call that may run
// in a signal handler. A successful open leaves errno as it was.
//
// # Fork, exec, threads
//
// The constructor makes one Go call, so that the Go runtime is up before
// the program can fork. A pthread_atfork child handler sets a flag: a
// forked child never enters Go and uses only the kernel path on the same
// fds. The table is lock-free for lookups; records are never returned to
// malloc, so a lookup racing with close touches a free or recycled record,
// never unmapped memory.
//
// # MPI-IO, paths, report
//
// MPI_File_open, _close, _sync and _set_size are wrapped (found with dlsym,
// inert without libmpi): ompio and ROMIO do their I/O with libc calls that
// the interposers see. IOWARP_PATHS="/from=/to:..." rewrites path
// arguments of the open, stat, access, mkdir, unlink, rename and opendir
// families. IOWARP_REPORT=1 (or a file to append to) prints one line per
// process at exit: calls on our fds and the bytes each path carried; to a
// file, also one line per file with its calls, bytes by path, time in
// calls and access sizes (report.c; adapters/posix/report reads them for
// `iowarp report`).
// IOWARP_STRICT=1 turns a failed handshake on an iowarp fd into EIO.
package main
