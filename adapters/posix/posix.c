/* posix.c: the POSIX interposers. Every wrapper first checks the fd table
 * (an array load); an fd that is not ours goes straight to libc and never
 * enters Go. */
#include "shim.h"
#include "_cgo_export.h"
#include <limits.h>
#include <sys/stat.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <linux/magic.h>

#ifndef FUSE_SUPER_MAGIC
#define FUSE_SUPER_MAGIC 0x65735546
#endif

int iow_in_child;
int iow_strict;
int iow_ready;
int iow_nofast;
int iow_nofastwrite;
int iow_nofastnew;

extern struct iow_real_ent __start_iow_reals[], __stop_iow_reals[];

void iow_resolve_reals(void)
{
	int e = errno;
	for (struct iow_real_ent *p = __start_iow_reals; p < __stop_iow_reals; p++)
		if (!*p->slot)
			*p->slot = dlsym(RTLD_NEXT, p->name);
	errno = e;
}

void *iow_dlnext(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		/* Only reached for functions this libc lacks (close_range before
		 * glibc 2.34): the wrapper then reports ENOSYS. */
		errno = ENOSYS;
	}
	return p;
}

DECL_REAL(open);
DECL_REAL(open64);
DECL_REAL(openat);
DECL_REAL(openat64);
DECL_REAL(creat);
DECL_REAL(creat64);
DECL_REAL(close);
DECL_REAL(read);
DECL_REAL(write);
DECL_REAL(pread);
DECL_REAL(pread64);
DECL_REAL(pwrite);
DECL_REAL(pwrite64);
DECL_REAL(readv);
DECL_REAL(writev);
DECL_REAL(preadv);
DECL_REAL(preadv64);
DECL_REAL(pwritev);
DECL_REAL(pwritev64);
DECL_REAL(preadv2);
DECL_REAL(pwritev2);
DECL_REAL(preadv64v2);
DECL_REAL(pwritev64v2);
DECL_REAL(lseek);
DECL_REAL(lseek64);
DECL_REAL(fsync);
DECL_REAL(fdatasync);
DECL_REAL(ftruncate);
DECL_REAL(ftruncate64);
DECL_REAL(dup);
DECL_REAL(dup2);
DECL_REAL(dup3);
DECL_REAL(fcntl);
DECL_REAL(socket);
DECL_REAL(accept);
DECL_REAL(accept4);
DECL_REAL(pipe);
DECL_REAL(pipe2);
DECL_REAL_T(fcntl64, int (*)(int, int, ...));
DECL_REAL_T(close_range, int (*)(unsigned, unsigned, int));
DECL_REAL_T(closefrom, void (*)(int));
DECL_REAL_T(__open_2, int (*)(const char *, int));
DECL_REAL_T(__open64_2, int (*)(const char *, int));
DECL_REAL_T(__openat_2, int (*)(int, const char *, int));
DECL_REAL_T(__openat64_2, int (*)(int, const char *, int));

/* ---- lifecycle -------------------------------------------------------- */


static void atfork_prepare(void)
{
	iow_maps_atfork_prepare();
	iow_fdtable_atfork_prepare();
}

static void atfork_parent(void)
{
	iow_fdtable_atfork_parent();
	iow_maps_atfork_parent();
}

static void atfork_child(void)
{
	iow_in_child = 1; /* the child's Go runtime has no threads: never enter it */
	iow_fdtable_atfork_child();
	iow_maps_atfork_child();
}

void iow_go_init(void) { iowarpGoInit(); }

__attribute__((constructor)) static void iow_init(void)
{
	iow_resolve_reals();
	const char *s = getenv("IOWARP_STRICT");
	iow_strict = s && *s && strcmp(s, "0") != 0;
	s = getenv("IOWARP_IPC");
	iow_ipc_on = s && *s && strcmp(s, "0") != 0;
	iow_nofast = getenv("IOWARP_NOFAST") != NULL;
	iow_nofastwrite = getenv("IOWARP_NOFASTWRITE") != NULL;
	iow_nofastnew = getenv("IOWARP_NOFASTNEW") != NULL;
	iow_fdtable_init();
	iow_paths_init(getenv("IOWARP_PATHS"));
	iow_report_init();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	/* Bring the Go runtime up now: a fork before it is up would leave the
	 * child waiting for it forever. */
	iow_go_init();
	__atomic_store_n(&iow_ready, 1, __ATOMIC_RELEASE);
}

/* ---- open: classify the new fd ----------------------------------------- */

/* handshake asks the daemon, through the fd, for a capability. 1 = ours,
 * 0 = not ours, -1 = an iowarp fd whose handshake failed. */
/* The devices (st_dev + 1) of file systems found to be FUSE, and of block
 * devices found not to be, so that an open asks fstatfs (a STATFS request
 * to the daemon, on FUSE) once per file system, not per file. A statx that
 * asks nothing of the file system (AT_STATX_DONT_SYNC: the inode's cached
 * type and the superblock's device) names the device. Only regular files
 * are looked up. A FUSE device number may be reused by a later mount (an
 * anonymous device, major 0): a stale entry costs the ioctl below, which
 * a file system that is not iowarp answers with ENOTTY. Negative entries
 * are kept only for block devices (major != 0), whose numbers do not move
 * under a mount, so a new mount is never missed. */
#define DEVS 16
static unsigned long fuse_devs[DEVS], other_devs[DEVS];

static int dev_known(const unsigned long *tab, unsigned long dev)
{
	for (int i = 0; i < DEVS; i++)
		if (__atomic_load_n(&tab[i], __ATOMIC_RELAXED) == dev)
			return 1;
	return 0;
}

static void dev_note(unsigned long *tab, unsigned long dev)
{
	for (int i = 0; i < DEVS; i++) {
		unsigned long z = 0;
		if (__atomic_load_n(&tab[i], __ATOMIC_RELAXED) == dev ||
		    __atomic_compare_exchange_n(&tab[i], &z, dev, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
	}
}

/* on_fuse: 1 if fd's file system is FUSE. errno may change. */
static int on_fuse(int fd)
{
	struct statx sx;
	unsigned long dev = 0, major = 0;
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) == 0 && S_ISREG(sx.stx_mode)) {
		major = sx.stx_dev_major;
		dev = ((unsigned long)sx.stx_dev_major << 32 | sx.stx_dev_minor) + 1;
		if (dev_known(fuse_devs, dev)) {
			IOW_ADD(statfs_cached, 1);
			return 1;
		}
		if (major && dev_known(other_devs, dev))
			return 0;
	}
	struct statfs sf;
	IOW_ADD(statfs_calls, 1);
	if (fstatfs(fd, &sf) != 0)
		return 0;
	int fuse = sf.f_type == FUSE_SUPER_MAGIC;
	if (dev && fuse)
		dev_note(fuse_devs, dev);
	else if (dev && major)
		dev_note(other_devs, dev);
	return fuse;
}

static int handshake(int fd, struct iow_cap *cap)
{
	if (!on_fuse(fd))
		return 0;
	memset(cap, 0, sizeof(*cap));
	cap->magic = IOW_CAP_MAGIC;
	cap->version = IOW_CAP_VERSION;
	cap->pid = (uint32_t)getpid();
	int saved = errno;
	if (ioctl(fd, IOW_IOC_CAP, cap) != 0) {
		int e = errno;
		errno = saved;
		if (e == ENOTTY || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP || e == EBADF || e == EISDIR)
			return 0; /* not iowarp, or a daemon without the handshake */
		return -1;
	}
	errno = saved;
	if (cap->magic != IOW_CAP_MAGIC || cap->version != IOW_CAP_VERSION)
		return -1;
	return 1;
}


/* iow_track_open records a successful open. A slot still set for this
 * number means we missed a close: it is dropped first. It returns
 * handshake's answer for the fd (0 when none was asked). */
static int iow_track_open(int fd, int flags)
{
	if ((unsigned)fd >= (unsigned)iow_tabsz)
		return 0;
	iow_slot_clear(fd);
	if (flags & (O_PATH | O_DIRECTORY))
		return 0;
	struct iow_cap cap;
	int r = handshake(fd, &cap);
	if (r == 0)
		return 0;
	if (r < 0) {
		IOW_ADD(handshake_fail, 1);
		iow_warn_once(1, "iowarp: shim handshake failed; this file takes the kernel path");
		return r;
	}
	struct iow_ofd *o = iow_ofd_new(flags & (O_ACCMODE | O_APPEND), &cap);
	if (!o)
		return r;
	IOW_ADD(opens, 1);
	/* The maps are asked for at the first call that needs them (fast.c,
	 * iow_attach_lazy): an open that does no I/O (a create, mdtest's)
	 * costs the daemon no grant and no page table. */
	if (!iow_in_child && cap.page_size && !iow_nofast)
		__atomic_store_n(&o->lazy, 1, __ATOMIC_RELEASE);
	iow_slot_set(fd, o);
	return r;
}

/* strict_check: with IOWARP_STRICT a file on the mount whose handshake
 * failed (track < 0) is an error rather than a silent kernel path. */
static int strict_check(int fd, int track)
{
	if (track < 0 && iow_strict) {
		IOW_REAL(close)(fd);
		errno = EIO;
		return -1;
	}
	return fd;
}

#define NEEDS_MODE(f) (((f) & O_CREAT) || (((f) & O_TMPFILE) == O_TMPFILE))
#define GET_MODE(flags, mode)            \
	do {                             \
		if (NEEDS_MODE(flags)) { \
			va_list ap;      \
			va_start(ap, flags); \
			mode = (mode_t)va_arg(ap, int); \
			va_end(ap);      \
		}                        \
	} while (0)

/* A successful open leaves errno as it was: the handshake's failed
 * probes (fstatfs, ioctl, the grant socket) are not the program's. */
#define OPEN_BODY(call)                                                   \
	char pbuf[4096];                                                  \
	path = iow_redirect(path, pbuf, sizeof pbuf);                     \
	int fd = call;                                                    \
	if (fd >= 0) {                                                    \
		int saved_errno = errno;                                  \
		fd = strict_check(fd, iow_track_open(fd, flags));         \
		if (fd >= 0)                                              \
			errno = saved_errno;                              \
	}                                                                 \
	return fd

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	OPEN_BODY(IOW_REAL(open)(path, flags, mode));
}

int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	OPEN_BODY(IOW_REAL(open64)(path, flags, mode));
}

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	OPEN_BODY(IOW_REAL(openat)(dirfd, path, flags, mode));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	GET_MODE(flags, mode);
	OPEN_BODY(IOW_REAL(openat64)(dirfd, path, flags, mode));
}

int __open_2(const char *path, int flags) { OPEN_BODY(IOW_REAL(__open_2)(path, flags)); }
int __open64_2(const char *path, int flags) { OPEN_BODY(IOW_REAL(__open64_2)(path, flags)); }
int __openat_2(int dirfd, const char *path, int flags) { OPEN_BODY(IOW_REAL(__openat_2)(dirfd, path, flags)); }
int __openat64_2(int dirfd, const char *path, int flags) { OPEN_BODY(IOW_REAL(__openat64_2)(dirfd, path, flags)); }

int creat(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	OPEN_BODY(IOW_REAL(creat)(path, mode));
}

int creat64(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	OPEN_BODY(IOW_REAL(creat64)(path, mode));
}

/* iow_open_flags is open(2) for the stdio layer. */
int iow_open_flags(const char *path, int flags, mode_t mode)
{
	OPEN_BODY(IOW_REAL(open)(path, flags, mode));
}

/* ---- close and the fd table -------------------------------------------- */

/* close takes the fd out of the table before the kernel can hand the
 * number out again. */
int iow_close(int fd)
{
	iow_slot_clear(fd);
	return IOW_REAL(close)(fd);
}

int close(int fd)
{
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return iow_close(fd);
}

int dup(int fd)
{
	int nfd = IOW_REAL(dup)(fd);
	if (nfd >= 0)
		iow_slot_dup(fd, nfd);
	return nfd;
}

int dup2(int oldfd, int newfd)
{
	int r = IOW_REAL(dup2)(oldfd, newfd);
	if (r >= 0 && oldfd != newfd)
		iow_slot_dup(oldfd, newfd);
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	int r = IOW_REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0)
		iow_slot_dup(oldfd, newfd);
	return r;
}

static int fcntl_after(int fd, int cmd, long arg, int r)
{
	if (r < 0)
		return r;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		iow_slot_dup(fd, r);
		break;
	case F_SETFL: {
		struct iow_ofd *o = iow_ofd_get(fd);
		if (o) {
			int fl = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
			fl = (fl & ~O_APPEND) | ((int)arg & O_APPEND);
			__atomic_store_n(&o->flags, fl, __ATOMIC_RELAXED);
			iow_ofd_put(o);
		}
		break;
	}
	}
	return r;
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	return fcntl_after(fd, cmd, arg, IOW_REAL(fcntl)(fd, cmd, arg));
}

int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	if (!iow_real_fcntl64 && !iow_ready)
		iow_real_fcntl64 = iow_dlnext("fcntl64");
	if (!iow_real_fcntl64)
		return fcntl_after(fd, cmd, arg, IOW_REAL(fcntl)(fd, cmd, arg));
	return fcntl_after(fd, cmd, arg, iow_real_fcntl64(fd, cmd, arg));
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

int close_range(unsigned first, unsigned last, int flags)
{
	int r;
	if (!iow_real_close_range && !iow_ready)
		iow_real_close_range = iow_dlnext("close_range");
	if (iow_real_close_range)
		r = iow_real_close_range(first, last, flags);
	else
		r = (int)syscall(SYS_close_range, first, last, flags);
	if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
		iow_slot_clear_range(first, last);
	return r;
}

void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	iow_slot_clear_range((unsigned)lowfd, ~0u);
	if (!iow_real_closefrom && !iow_ready)
		iow_real_closefrom = iow_dlnext("closefrom");
	if (iow_real_closefrom)
		iow_real_closefrom(lowfd);
	else
		syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0);
}

/* Calls that make fds we never track: a number they return cannot be ours
 * any more (we missed its close, for example a raw syscall). */
#define FRESH(fd) do { if ((fd) >= 0 && iow_maybe_ours(fd)) iow_slot_clear(fd); } while (0)

int socket(int domain, int type, int protocol)
{
	int fd = IOW_REAL(socket)(domain, type, protocol);
	FRESH(fd);
	return fd;
}

int accept(int s, struct sockaddr *addr, socklen_t *len)
{
	int fd = IOW_REAL(accept)(s, addr, len);
	FRESH(fd);
	return fd;
}

int accept4(int s, struct sockaddr *addr, socklen_t *len, int flags)
{
	int fd = IOW_REAL(accept4)(s, addr, len, flags);
	FRESH(fd);
	return fd;
}

int pipe(int p[2])
{
	int r = IOW_REAL(pipe)(p);
	if (r == 0) {
		FRESH(p[0]);
		FRESH(p[1]);
	}
	return r;
}

int pipe2(int p[2], int flags)
{
	int r = IOW_REAL(pipe2)(p, flags);
	if (r == 0) {
		FRESH(p[0]);
		FRESH(p[1]);
	}
	return r;
}

/* ---- data calls --------------------------------------------------------- */

/* The fast path (fast.c) returns -2 when it cannot serve the call: the
 * kernel path then does, with nothing moved. */

/* While the process maps the file (mmap.c), its calls take the kernel
 * path: the page cache is then the one copy it sees. */
static inline int fast_ok(struct iow_ofd *o)
{
	if (iow_in_child)
		return 0;
	iow_fast_ensure(o);
	return o->gohandle && !iow_mapped(o);
}

/* fast_write is iow_fast_pwrite; a mapping of the file made meanwhile by
 * another thread may have been made before the write landed, after its
 * cache drop: drop the written range again. */
static ssize_t fast_write(struct iow_ofd *o, int fd, const void *buf, size_t n, off_t off)
{
	unsigned long gen = iow_map_gen_load();
	ssize_t r = iow_fast_pwrite(o, buf, n, off);
	if (r > 0 && iow_map_gen_load() != gen)
		iow_drop_cache(fd, off, (size_t)r);
	return r;
}

/* kdrop: before a kernel read of an fd whose file a shim may write in
 * place, drop what the kernel cached of the range (this fd was opened
 * before the daemon turned caching off for the inode): the read then
 * reaches the daemon, which serves the pool's current bytes. */
static void kdrop(struct iow_ofd *o, int fd, off_t off, size_t n)
{
	if (o)
		iow_fast_ksync(o, fd);
	if (o && iow_fast_shared_writers(o))
		iow_drop_cache(fd, off, n);
}

/* iow_drop_cache drops the kernel's cached pages of [off, off+n) (n = 0:
 * to EOF). fadvise keeps the partial pages at either end of its range, so
 * the range is widened to whole pages; errno is kept. */
void iow_drop_cache(int fd, off_t off, size_t n)
{
	int e = errno;
	off_t a = off & ~(off_t)4095;
	off_t len = n ? (off_t)((off + (off_t)n + 4095) & ~(off_t)4095) - a : 0;
	posix_fadvise(fd, a, len, POSIX_FADV_DONTNEED);
	errno = e;
}

void iow_ksync_fd(int fd)
{
	if (!iow_maybe_ours(fd))
		return;
	struct iow_ofd *o = iow_ofd_get(fd);
	if (o) {
		iow_fast_ksync(o, fd);
		iow_ofd_put(o);
	}
}

/* fstat of our fds: shims raise the size in shared memory, and the
 * kernel's cached attributes may be younger than its timeout (one jiffy)
 * while they lag. An attached fd is answered from the page table while
 * the file's attributes did not change otherwise than by shim writes
 * (fast.c, iow_fast_fstat); else it is asked afresh (a forced statx: a
 * GETATTR the daemon answers with what shims wrote folded in), and its
 * answer kept for the next fstat. Either way the kernel is first made to
 * see the size shims raised, when it moved (iow_fast_ksync): other
 * processes' stat is answered from the kernel's copy (tail -f, stat of a
 * file a shim extends, TestExtendTailF). */
DECL_REAL(fstat);
DECL_REAL(fstat64);
DECL_REAL_T(__fxstat, int (*)(int, int, struct stat *));
DECL_REAL_T(__fxstat64, int (*)(int, int, struct stat64 *));

_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "struct stat64 is struct stat (LP64)");

/* fresh_stat is fstat asked of the daemon afresh (a forced statx: the
 * kernel's cached attributes may predate a change the table's generation
 * already shows); 0, or -1 with errno kept (the caller asks fstat). */
static int fresh_stat(int fd, struct stat *st)
{
	int e = errno;
	struct statx sx;
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &sx) != 0 ||
	    (sx.stx_mask & STATX_BASIC_STATS) != STATX_BASIC_STATS) {
		errno = e;
		return -1;
	}
	memset(st, 0, sizeof *st);
	st->st_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	st->st_ino = sx.stx_ino;
	st->st_mode = sx.stx_mode;
	st->st_nlink = sx.stx_nlink;
	st->st_uid = sx.stx_uid;
	st->st_gid = sx.stx_gid;
	st->st_rdev = makedev(sx.stx_rdev_major, sx.stx_rdev_minor);
	st->st_size = (off_t)sx.stx_size;
	st->st_blksize = sx.stx_blksize;
	st->st_blocks = (blkcnt_t)sx.stx_blocks;
	st->st_atim = (struct timespec){sx.stx_atime.tv_sec, sx.stx_atime.tv_nsec};
	st->st_mtim = (struct timespec){sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec};
	st->st_ctim = (struct timespec){sx.stx_ctime.tv_sec, sx.stx_ctime.tv_nsec};
	return 0;
}

/* CALL is the real call's expression, on st. */
#define FSTAT_BODY(CALL)                                                         \
	if (!iow_maybe_ours(fd))                                                 \
		return CALL;                                                     \
	struct iow_ofd *o = iow_ofd_get(fd);                                     \
	if (!o)                                                                  \
		return CALL;                                                     \
	uint64_t gen = 0;                                                        \
	iow_fast_ksync(o, fd); /* the kernel's size, for every process */        \
	int r = iow_fast_fstat(o, (struct stat *)st, &gen);                      \
	if (r == -3) {                                                           \
		r = CALL;                                                        \
	} else if (r != 0) {                                                     \
		IOW_ADD(fstat_kernel, 1);                                        \
		r = fresh_stat(fd, (struct stat *)st);                           \
		if (r != 0)                                                      \
			r = CALL;                                                \
		if (r == 0)                                                      \
			iow_fast_fstat_fill(o, gen, (const struct stat *)st);    \
	}                                                                        \
	iow_ofd_put(o);                                                          \
	return r

int fstat(int fd, struct stat *st) { FSTAT_BODY(IOW_REAL(fstat)(fd, st)); }

int fstat64(int fd, struct stat64 *st) { FSTAT_BODY(IOW_REAL(fstat64)(fd, st)); }

int __fxstat(int v, int fd, struct stat *st) { FSTAT_BODY(IOW_REAL(__fxstat)(v, fd, st)); }

int __fxstat64(int v, int fd, struct stat64 *st) { FSTAT_BODY(IOW_REAL(__fxstat64)(v, fd, st)); }

static void kdrop_fd(int fd, off_t off, size_t n)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (o) {
		kdrop(o, fd, off, n);
		iow_ofd_put(o);
	}
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;
	for (int i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

static ssize_t kread(ssize_t r)
{
	if (r > 0)
		IOW_ADD(kernel_read, r);
	return r;
}

static ssize_t kwrite(ssize_t r)
{
	if (r > 0)
		IOW_ADD(kernel_write, r);
	return r;
}

ssize_t iow_read(int fd, void *buf, size_t n)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (!o)
		return IOW_REAL(read)(fd, buf, n);
	IOW_ADD(calls, 1);
	ssize_t r = -2;
	if (fast_ok(o) && (o->flags & O_ACCMODE) != O_WRONLY) {
		/* read(2) on the fast path: the kernel offset is the truth. */
		off_t pos = IOW_REAL(lseek)(fd, 0, SEEK_CUR);
		if (pos >= 0) {
			r = iow_fast_pread(o, buf, n, pos);
			if (r > 0)
				IOW_REAL(lseek)(fd, pos + r, SEEK_SET);
		}
	}
	if (r == -2) {
		kdrop(o, fd, 0, 0); /* the offset may move under us: the whole file */
		r = kread(IOW_REAL(read)(fd, buf, n));
	}
	iow_ofd_put(o);
	return r;
}

ssize_t read(int fd, void *buf, size_t n)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(read)(fd, buf, n);
	return iow_read(fd, buf, n);
}

/* fast_append is an O_APPEND write on the fast path (iow_fast_append:
 * reserved by a CAS on the shared size, against every other shim and the
 * FUSE door); *at is where it ended. */
static ssize_t fast_append(struct iow_ofd *o, int fd, const void *buf, size_t n, off_t *at)
{
	unsigned long gen = iow_map_gen_load();
	ssize_t r = iow_fast_append(o, buf, n, at);
	if (r > 0 && iow_map_gen_load() != gen)
		iow_drop_cache(fd, *at - r, (size_t)r);
	return r;
}

ssize_t iow_write(int fd, const void *buf, size_t n)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (!o)
		return IOW_REAL(write)(fd, buf, n);
	IOW_ADD(calls, 1);
	ssize_t r = -2;
	int fl = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
	if (fast_ok(o) && (fl & O_ACCMODE) != O_RDONLY && (fl & O_APPEND)) {
		/* An append lands at the shared size, and the fd's offset
		 * follows it, as the kernel's does. */
		off_t end;
		r = fast_append(o, fd, buf, n, &end);
		if (r > 0)
			IOW_REAL(lseek)(fd, end, SEEK_SET);
	} else if (fast_ok(o) && (fl & O_ACCMODE) != O_RDONLY) {
		/* write(2) on the fast path: the kernel offset is the truth. */
		off_t pos = IOW_REAL(lseek)(fd, 0, SEEK_CUR);
		if (pos >= 0) {
			r = fast_write(o, fd, buf, n, pos);
			if (r > 0)
				IOW_REAL(lseek)(fd, pos + r, SEEK_SET);
		}
	}
	if (r == -2) {
		iow_fast_ksync(o, fd); /* an O_APPEND write lands at the kernel's size */
		r = kwrite(IOW_REAL(write)(fd, buf, n));
	}
	iow_ofd_put(o);
	return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(write)(fd, buf, n);
	return iow_write(fd, buf, n);
}

static ssize_t do_pread(int fd, void *buf, size_t n, off_t off)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (!o)
		return IOW_REAL(pread64)(fd, buf, n, off);
	IOW_ADD(calls, 1);
	ssize_t r = -2;
	if (fast_ok(o) && (o->flags & O_ACCMODE) != O_WRONLY && off >= 0)
		r = iow_fast_pread(o, buf, n, off);
	if (r == -2) {
		kdrop(o, fd, off, n);
		r = kread(IOW_REAL(pread64)(fd, buf, n, off));
	}
	iow_ofd_put(o);
	return r;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(pread)(fd, buf, n, off);
	return do_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(pread64)(fd, buf, n, off);
	return do_pread(fd, buf, n, off);
}

static ssize_t do_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (!o)
		return IOW_REAL(pwrite64)(fd, buf, n, off);
	IOW_ADD(calls, 1);
	ssize_t r = -2;
	/* On Linux pwrite on an O_APPEND fd appends (a known deviation
	 * from POSIX), and leaves the fd's offset alone. */
	int fl = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
	off_t end;
	if (fast_ok(o) && (fl & O_ACCMODE) != O_RDONLY && (fl & O_APPEND))
		r = fast_append(o, fd, buf, n, &end);
	else if (fast_ok(o) && (fl & O_ACCMODE) != O_RDONLY)
		r = fast_write(o, fd, buf, n, off);
	if (r == -2)
		r = kwrite(IOW_REAL(pwrite64)(fd, buf, n, off));
	iow_ofd_put(o);
	return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(pwrite)(fd, buf, n, off);
	return do_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(pwrite64)(fd, buf, n, off);
	return do_pwrite(fd, buf, n, off);
}

/* Vector calls take the fast path as one contiguous call (one atomic
 * action, as the kernel's is): the iovecs are gathered into, or
 * scattered from, a bounce buffer. Calls the fast path does not serve
 * (larger than IOV_FAST_MAX, O_APPEND, flags of preadv2/pwritev2) go to
 * the kernel whole, so that their atomicity (one file position update, one
 * O_APPEND write) is the kernel's. */
#define IOV_FAST_MAX (4ul << 20)

static ssize_t iov_call(ssize_t r, int wr)
{
	IOW_ADD(calls, 1);
	return wr ? kwrite(r) : kread(r);
}

static int iov_fast_ok(const struct iow_ofd *o, const struct iovec *iov, int cnt, int wr, size_t *n)
{
	int fl = __atomic_load_n(&o->flags, __ATOMIC_RELAXED);
	if (cnt <= 0 || cnt > IOV_MAX)
		return 0;
	if (wr ? ((fl & O_ACCMODE) == O_RDONLY || (fl & O_APPEND)) : (fl & O_ACCMODE) == O_WRONLY)
		return 0;
	size_t t = 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > IOV_FAST_MAX - t)
			return 0;
		t += iov[i].iov_len;
	}
	*n = t;
	return t > 0;
}

/* iov_io moves n bytes between the iovecs and the file at pos on the fast
 * path; -2 when it did not. */
static ssize_t iov_io(struct iow_ofd *o, int fd, const struct iovec *iov, int cnt, size_t n, off_t pos, int wr)
{
	char *b = cnt == 1 ? (char *)iov[0].iov_base : malloc(n);
	if (!b)
		return -2;
	ssize_t r;
	if (wr) {
		for (int i = 0, k = 0; cnt > 1 && i < cnt; k += (int)iov[i].iov_len, i++)
			memcpy(b + k, iov[i].iov_base, iov[i].iov_len);
		r = fast_write(o, fd, b, n, pos);
	} else {
		r = iow_fast_pread(o, b, n, pos);
		size_t left = r > 0 ? (size_t)r : 0;
		for (int i = 0, k = 0; cnt > 1 && i < cnt && left > 0; i++) {
			size_t c = iov[i].iov_len < left ? iov[i].iov_len : left;
			memcpy(iov[i].iov_base, b + k, c);
			k += (int)c, left -= c;
		}
	}
	if (cnt != 1)
		free(b);
	return r;
}

/* iov_fast serves a vector call at off (cur: at the fd's offset, which it
 * then moves) on the fast path; -2 when it did not, with nothing moved. */
static ssize_t iov_fast(int fd, const struct iovec *iov, int cnt, off_t off, int cur, int wr)
{
	struct iow_ofd *o = iow_ofd_get(fd);
	if (!o)
		return -2;
	ssize_t r = -2;
	size_t n;
	if (fast_ok(o) && iov_fast_ok(o, iov, cnt, wr, &n)) {
		off_t pos = cur ? IOW_REAL(lseek)(fd, 0, SEEK_CUR) : off;
		if (pos >= 0)
			r = iov_io(o, fd, iov, cnt, n, pos, wr);
		if (r > 0 && cur)
			IOW_REAL(lseek)(fd, pos + r, SEEK_SET);
	}
	if (r != -2)
		IOW_ADD(calls, 1);
	iow_ofd_put(o);
	return r;
}

/* iov_k runs a vector call the fast path did not serve on the kernel. */
#define IOV_K(wr, kdrop_args, call)                                 \
	do {                                                        \
		if (iow_maybe_ours(fd)) {                           \
			ssize_t fr = iov_fast_args;                 \
			if (fr != -2)                               \
				return fr;                          \
			kdrop_fd kdrop_args;                        \
		}                                                   \
		ssize_t r = call;                                   \
		return iow_maybe_ours(fd) ? iov_call(r, wr) : r;    \
	} while (0)

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
#define iov_fast_args iov_fast(fd, iov, cnt, 0, 1, 0)
	IOV_K(0, (fd, 0, 0), IOW_REAL(readv)(fd, iov, cnt));
#undef iov_fast_args
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
#define iov_fast_args iov_fast(fd, iov, cnt, 0, 1, 1)
	IOV_K(1, (fd, 0, 0), IOW_REAL(writev)(fd, iov, cnt)); /* (O_APPEND: at the kernel's size) */
#undef iov_fast_args
}

#define iov_fast_args (off >= 0 ? iov_fast(fd, iov, cnt, off, 0, 0) : -2)
ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	IOV_K(0, (fd, off, iov_len(iov, cnt)), IOW_REAL(preadv)(fd, iov, cnt, off));
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	IOV_K(0, (fd, off, iov_len(iov, cnt)), IOW_REAL(preadv64)(fd, iov, cnt, off));
}
#undef iov_fast_args

#define iov_fast_args (off >= 0 ? iov_fast(fd, iov, cnt, off, 0, 1) : -2)
ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	IOV_K(1, (fd, off, 0), IOW_REAL(pwritev)(fd, iov, cnt, off));
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	IOV_K(1, (fd, off, 0), IOW_REAL(pwritev64)(fd, iov, cnt, off));
}
#undef iov_fast_args

/* preadv2/pwritev2: off -1 is the fd's offset; any flag (RWF_APPEND,
 * RWF_DSYNC, RWF_NOWAIT, ...) takes the kernel path. */
#define iov_fast_args (flags == 0 && off >= -1 ? iov_fast(fd, iov, cnt, off, off == -1, 0) : -2)
ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	IOV_K(0, (fd, off < 0 ? 0 : off, off < 0 ? 0 : iov_len(iov, cnt)), IOW_REAL(preadv2)(fd, iov, cnt, off, flags));
}

ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
	IOV_K(0, (fd, off < 0 ? 0 : off, off < 0 ? 0 : iov_len(iov, cnt)), IOW_REAL(preadv64v2)(fd, iov, cnt, off, flags));
}
#undef iov_fast_args

#define iov_fast_args (flags == 0 && off >= -1 ? iov_fast(fd, iov, cnt, off, off == -1, 1) : -2)
ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	IOV_K(1, (fd, off < 0 ? 0 : off, 0), IOW_REAL(pwritev2)(fd, iov, cnt, off, flags));
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
	IOV_K(1, (fd, off < 0 ? 0 : off, 0), IOW_REAL(pwritev64v2)(fd, iov, cnt, off, flags));
}
#undef iov_fast_args

off_t iow_lseek(int fd, off_t off, int whence)
{
	struct iow_ofd *o = whence == SEEK_SET || whence == SEEK_CUR ? NULL : iow_ofd_get(fd);
	if (o) {
		iow_fast_ksync(o, fd); /* SEEK_END, SEEK_DATA, SEEK_HOLE: the kernel's size */
		iow_ofd_put(o);
	}
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return IOW_REAL(lseek64)(fd, off, whence);
}

off_t lseek(int fd, off_t off, int whence)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(lseek)(fd, off, whence);
	return iow_lseek(fd, off, whence);
}

off64_t lseek64(int fd, off64_t off, int whence)
{
	if (!iow_maybe_ours(fd))
		return IOW_REAL(lseek64)(fd, off, whence);
	return iow_lseek(fd, off, whence);
}

/* fsync is the durability point through the kernel door: the daemon's
 * fsync harvests what shims wrote in shared memory (dirty bits, new
 * pages, the shared size) and writes every dirty page of the file and its
 * size back, whichever door wrote them, before it answers: one FUSE
 * request, next to which an ipc round trip would save ~20 us of a call
 * that waits for the backing store. close needs nothing from the daemon
 * beyond the kernel's FLUSH (which queues the write-back). */
int fsync(int fd)
{
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return IOW_REAL(fsync)(fd);
}

int fdatasync(int fd)
{
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return IOW_REAL(fdatasync)(fd);
}

int ftruncate(int fd, off_t len)
{
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return IOW_REAL(ftruncate)(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	if (iow_maybe_ours(fd))
		IOW_ADD(calls, 1);
	return IOW_REAL(ftruncate64)(fd, len);
}

/* ---- _FORTIFY_SOURCE ---------------------------------------------------- */

/* gcc -O2 -D_FORTIFY_SOURCE turns read and pread calls whose buffer size
 * it knows into these; glibc's versions call its internal __read, past
 * every interposer. Ours check the size as glibc does, then take the
 * normal path. (The STDIO _chk functions work on the FILE, and our FILEs
 * call the interposers.) */
extern void __chk_fail(void) __attribute__((noreturn));

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread(fd, buf, n, off);
}

ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return pread64(fd, buf, n, off);
}

/* ---- kernel copies ------------------------------------------------------ */

/* copy_file_range, sendfile and splice move data inside the kernel, which
 * reads our files through its page cache (the daemon serves
 * copy_file_range within the mount itself, from the pool). Before one
 * reads a file of ours, its cached range is dropped as before any kernel
 * read, so fast-path writes are seen. */
DECL_REAL(copy_file_range);
DECL_REAL(sendfile);
DECL_REAL(sendfile64);
DECL_REAL(splice);

static void kcopy_in(int fd, const off64_t *off, size_t n)
{
	if (off)
		kdrop_fd(fd, *off, n);
	else
		kdrop_fd(fd, 0, 0); /* from the file offset: the whole file */
}

static ssize_t kcopy_count(int in, int out, ssize_t r)
{
	if (iow_maybe_ours(in))
		kread(r);
	if (iow_maybe_ours(out))
		kwrite(r);
	return r;
}

ssize_t copy_file_range(int in, off64_t *offin, int out, off64_t *offout, size_t n, unsigned flags)
{
	if (!iow_maybe_ours(in) && !iow_maybe_ours(out))
		return IOW_REAL(copy_file_range)(in, offin, out, offout, n, flags);
	IOW_ADD(calls, 1);
	kcopy_in(in, offin, n);
	return kcopy_count(in, out, IOW_REAL(copy_file_range)(in, offin, out, offout, n, flags));
}

ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
	if (!iow_maybe_ours(in) && !iow_maybe_ours(out))
		return IOW_REAL(sendfile)(out, in, off, n);
	IOW_ADD(calls, 1);
	kcopy_in(in, (const off64_t *)off, n);
	return kcopy_count(in, out, IOW_REAL(sendfile)(out, in, off, n));
}

ssize_t sendfile64(int out, int in, off64_t *off, size_t n)
{
	if (!iow_maybe_ours(in) && !iow_maybe_ours(out))
		return IOW_REAL(sendfile64)(out, in, off, n);
	IOW_ADD(calls, 1);
	kcopy_in(in, off, n);
	return kcopy_count(in, out, IOW_REAL(sendfile64)(out, in, off, n));
}

ssize_t splice(int in, off64_t *offin, int out, off64_t *offout, size_t n, unsigned flags)
{
	if (!iow_maybe_ours(in) && !iow_maybe_ours(out))
		return IOW_REAL(splice)(in, offin, out, offout, n, flags);
	IOW_ADD(calls, 1);
	kcopy_in(in, offin, n);
	return kcopy_count(in, out, IOW_REAL(splice)(in, offin, out, offout, n, flags));
}
