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
// real kernel fd on the mount, so anything the shim does not serve (mmap,
// sendfile, copy_file_range, fstat, a forked child) is served by the
// kernel and stays correct.
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
// A read whose pages are all resident in the file's first tier is served
// from shared memory (fast.c): the capability names the daemon's fds of
// the bucket's page table and segment, which the shim reopens read-only
// through /proc/<daemon>/fd/<n> and maps; a seqlock on the page table
// (odd while the daemon holds the bucket's write lock) makes the copy
// consistent. A miss goes to the kernel on the same fd (the daemon stages
// the page in; the next read hits), so both doors read one copy of the
// data and are coherent by construction. IOWARP_NOFAST=1 turns hits off.
// Not yet on the fast path: writes (they go through the kernel to the same
// pool pages), and misses through runtime/ipc instead of FUSE.
// The kernel file offset is the truth: read(2) on the fast path reads it
// and moves it with lseek. Writes, vector calls, truncate and fsync go to
// the kernel: fsync returning 0 means the data is on the backing store.
//
// # STDIO
//
// fopen, fopen64, fdopen and freopen on our files return fopencookie
// streams whose callbacks are the interposers above (glibc's own streams
// call its internal read/write, which no interposer sees); fileno on them
// answers the fd. Streams on other files are glibc's, unchanged.
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
// process at exit: calls on our fds and the bytes each path carried.
// IOWARP_STRICT=1 turns a failed handshake on an iowarp fd into EIO.
package main
