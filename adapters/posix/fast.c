/* fast.c: read and write hits served from shared memory.
 *
 * Attach. The capability names a grant at the daemon's grant socket (an
 * abstract Unix socket). The shim connects, presents the grant id, inode,
 * access mode and token; the daemon checks them against SO_PEERCRED and
 * sends the fds of the file's page table and RAM-tier segment, opened by
 * the daemon itself read-only for an O_RDONLY open and read-write for an
 * O_RDWR one (fusefs/grant.go). Both are mapped with that access.
 *
 * Reads of resident pages are seqlock reads: load seq (even), check the
 * residency bits, memcpy, load seq again; equal means a consistent image.
 *
 * Writes inside the file to resident pages: add 1 to writers, load seq
 * and the flags (sequentially consistent, after the add); seq odd (the
 * daemon holds the bucket's write lock), poisoned, past the size or a page
 * not resident: take 1 back and use the kernel. Else copy in place, set
 * the pages' dirty bits and the hint, take 1 back. The daemon makes seq
 * odd before it waits for writers to drain, so either we see odd or it
 * sees us (bufferpool/pagetable_unsafe.go has the whole argument).
 *
 * Misses with IOWARP_IPC=1: a read of pages that are not resident, or a
 * write inside the file to such pages, goes to the daemon through
 * runtime/ipc (ipc.go: the fs module's pread/pwrite on the daemon's handle
 * of this open, which stages the pages in, so the next access is a hit).
 * The grant's reply names the ipc socket. Only that enters Go, and never
 * in a forked child (the callers check iow_in_child).
 *
 * New data (bufferpool/lease.go has the protocol): a write to pages
 * past the size, or in a hole at or past the table's new_from word, takes
 * pages of the file's lease, marks them resident, copies, sets their
 * dirty bits, and raises the size (atomic max); an O_APPEND write reserves
 * its range with a CAS on the size first (iow_fast_append). The daemon
 * harvests beside us (it never makes seq odd to harvest), so a dirty bit
 * is set only after the copy it stands for. A spent lease is refilled
 * over runtime/ipc (refill) before the write gives up.
 *
 * Anything else (a write the lease cannot cover, an ipc call that failed
 * before data moved) returns -2 and the caller takes the kernel path, with
 * nothing moved. */
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>

#define MAP_MAX (16ul << 30) /* virtual span mapped per file: pages past it miss */

struct fastmap {
	char *pt;   /* page table mapping */
	char *data; /* segment mapping */
	size_t datalen;
	uint64_t ps;
	uint64_t nbits;
	int writable; /* write hits allowed (both mapped read-write) */
	int ptw;      /* the table is mapped read-write */
	int64_t ksize; /* the shared size the kernel was last made to see (iow_fast_ksync) */
	int lease_backoff; /* writes that skip asking for a lease after a refusal (atomic) */
	char ipc[IOW_GRANT_IPC_PATH_MAX]; /* the daemon's ipc socket ("" = none) */
	/* fstat cache (iow_fast_fstat): the kernel's last answer and the
	 * table's attribute generation it was asked under; st_lock guards
	 * them (a spin lock: held for a copy). */
	int st_lock, st_ok;
	uint64_t st_gen;
	struct stat st;
};

int iow_ipc_on; /* IOWARP_IPC=1: misses through runtime/ipc */

/* Go export (ipc.go). */
extern ssize_t iowarpIpcIO(char *sock, uint64_t grant, uint64_t ino, uint32_t acc, uint8_t *token,
			   void *buf, size_t n, int64_t off, int write);
extern int64_t iowarpIpcLease(char *sock, uint64_t grant, uint64_t ino, uint32_t acc, uint8_t *token, int64_t need);

#define IPC_MAX (1ul << 20) /* larger calls take the kernel path */

/* grant asks the daemon for the maps of this open; 0 and fds[2] on
 * success, and the path of its ipc socket in ipc ("" = none). */
static int grant(const struct iow_cap *c, uint32_t acc, int fds[2], char ipc[IOW_GRANT_IPC_PATH_MAX])
{
	size_t eplen = strnlen(c->endpoint, sizeof c->endpoint);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (!c->grant || eplen < 2 || c->endpoint[0] != '@' || eplen > sizeof a.sun_path)
		return -1;
	memcpy(a.sun_path + 1, c->endpoint + 1, eplen - 1); /* abstract: leading NUL */
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + eplen);
	int s = (int)syscall(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int ret = -1;
	struct iow_grant_req req = {.magic = IOW_GRANT_MAGIC, .version = IOW_GRANT_VERSION,
				    .grant = c->grant, .ino = c->ino, .accmode = acc};
	memcpy(req.token, c->token, sizeof req.token);
	if (syscall(SYS_connect, s, &a, alen) != 0 || syscall(SYS_sendto, s, &req, sizeof req, MSG_NOSIGNAL, NULL, 0) != (long)sizeof req)
		goto out;
	int32_t status = -1;
	unsigned char rbuf[IOW_GRANT_REPLY_SIZE + IOW_GRANT_IPC_PATH_MAX] = {0};
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {rbuf, sizeof rbuf};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	long n = syscall(SYS_recvmsg, s, &mh, MSG_CMSG_CLOEXEC);
	memcpy(&status, rbuf + IOW_GRANT_REPLY_OFF_STATUS, sizeof status);
	ipc[0] = 0;
	if (n > IOW_GRANT_REPLY_SIZE && rbuf[n - 1] == 0) /* NUL-terminated, fits: n <= sizeof rbuf */
		memcpy(ipc, rbuf + IOW_GRANT_REPLY_SIZE, (size_t)(n - IOW_GRANT_REPLY_SIZE));
	struct cmsghdr *cm = n >= 4 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[2] = {-1, -1};
		memcpy(got, CMSG_DATA(cm), (nfd < 2 ? nfd : 2) * sizeof(int));
		if (status == 0 && nfd == 2) {
			fds[0] = got[0], fds[1] = got[1];
			ret = 0;
		} else {
			for (size_t i = 0; i < nfd && i < 2; i++)
				syscall(SYS_close, got[i]);
		}
	}
out:
	syscall(SYS_close, s);
	return ret;
}

/* The segment maps are the library's own: raw calls, past the mmap
 * interposers (mmap.c). */
static void *raw_mmap(size_t len, int prot, int flags, int fd)
{
	return (void *)syscall(SYS_mmap, NULL, len, prot, flags, fd, 0);
}

static void raw_munmap(void *p, size_t len) { syscall(SYS_munmap, p, len); }

void iow_attach_fast(struct iow_ofd *o)
{
	const struct iow_cap *c = &o->cap;
	uint32_t acc = (uint32_t)(o->flags & O_ACCMODE);
	if (c->page_size == 0 || iow_nofast)
		return; /* an O_WRONLY open is granted a read-write map where its uid may read the file */
	int fds[2];
	char ipc[IOW_GRANT_IPC_PATH_MAX];
	if (grant(c, acc, fds, ipc) != 0)
		return;
	int w = acc != O_RDONLY;
	int prot = PROT_READ | (w ? PROT_WRITE : 0);
	void *pt = raw_mmap(IOW_PT_SIZE, prot, MAP_SHARED, fds[0]);
	syscall(SYS_close, fds[0]);
	if (pt == MAP_FAILED) {
		syscall(SYS_close, fds[1]);
		return;
	}
	const struct iow_pt_header *h = pt;
	uint64_t ps = h->page_size, nbits = h->nbits;
	if (h->magic != IOW_PT_MAGIC || h->version != IOW_PT_VERSION || ps != c->page_size || nbits > IOW_PT_MAX_PAGES) {
		raw_munmap(pt, IOW_PT_SIZE);
		syscall(SYS_close, fds[1]);
		return;
	}
	size_t len = nbits * ps < MAP_MAX ? nbits * ps : MAP_MAX;
	void *data = raw_mmap(len, prot, MAP_SHARED | MAP_NORESERVE, fds[1]);
	syscall(SYS_close, fds[1]);
	struct fastmap *m = malloc(sizeof(*m));
	if (data == MAP_FAILED || !m) {
		if (data != MAP_FAILED)
			raw_munmap(data, len);
		raw_munmap(pt, IOW_PT_SIZE);
		free(m);
		return;
	}
	*m = (struct fastmap){.pt = pt, .data = data, .datalen = len, .ps = ps, .nbits = nbits,
			      .writable = w && !iow_nofastwrite, .ptw = w, .ksize = -1};
	memcpy(m->ipc, ipc, sizeof m->ipc);
	o->gohandle = (uintptr_t)m;
}

/* iow_attach_lazy attaches an open at the first call that needs its maps
 * (posix.c, iow_track_open, defers it): one thread asks for the grant,
 * others of the same open wait for it (microseconds). A forked child
 * never attaches (its token names the parent). */
void iow_attach_lazy(struct iow_ofd *o)
{
	if (iow_in_child)
		return;
	int one = 1;
	if (__atomic_compare_exchange_n(&o->lazy, &one, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		IOW_ADD(grants, 1);
		iow_attach_fast(o);
		__atomic_store_n(&o->lazy, 0, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&o->lazy, __ATOMIC_ACQUIRE) == 2)
		syscall(SYS_sched_yield);
}

void iow_detach_fast(struct iow_ofd *o)
{
	struct fastmap *m = (struct fastmap *)o->gohandle;
	o->gohandle = 0;
	if (!m)
		return;
	raw_munmap(m->data, m->datalen);
	raw_munmap(m->pt, IOW_PT_SIZE);
	free(m);
}

/* iow_fast_ksync makes the kernel see the file's size before a call goes
 * down the kernel path: shims raise the size in shared memory (extending
 * writes), and the kernel answers copy_file_range, sendfile, mmap faults,
 * lseek(SEEK_END) and O_APPEND from its own copy of it. A forced statx
 * asks the daemon, whose answer folds the shared size in; only when the
 * size changed since this fd last did it. The kernel drops an answer that
 * crossed an invalidation of the inode (the daemon sends them after
 * harvests), so the inode's own size is read back (AT_STATX_DONT_SYNC)
 * and the ask repeated a few times until it took. errno is kept. */
void iow_fast_ksync(struct iow_ofd *o, int fd)
{
	iow_fast_ensure(o);
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m)
		return;
	int64_t size = __atomic_load_n((const int64_t *)(m->pt + IOW_PT_OFF_SIZE), __ATOMIC_ACQUIRE);
	if (size == __atomic_load_n(&m->ksize, __ATOMIC_RELAXED))
		return;
	int e = errno;
	struct statx stx;
	for (int i = 0; i < 16; i++) {
		if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_SIZE, &stx) != 0)
			break;
		if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_SIZE, &stx) != 0)
			break;
		if ((int64_t)stx.stx_size >= size) {
			__atomic_store_n(&m->ksize, size, __ATOMIC_RELAXED);
			break;
		}
	}
	errno = e;
}

static int lock_wait(int attempt, int64_t *deadline);

static inline uint64_t ld_seq(const struct fastmap *m)
{
	return __atomic_load_n((const uint64_t *)(m->pt + IOW_PT_OFF_SEQ), __ATOMIC_ACQUIRE);
}

static inline int resident(const struct fastmap *m, uint64_t first, uint64_t last)
{
	const uint64_t *bits = (const uint64_t *)(m->pt + IOW_PT_OFF_RESIDENT);
	if (last >= m->nbits || (last + 1) * m->ps > m->datalen)
		return 0;
	for (uint64_t i = first; i <= last; i++)
		if (!(__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) & (1ull << (i % 64))))
			return 0;
	return 1;
}

/* mappers is the file's count of shared maps made by shims that may
 * write: while it is not 0, every shim's calls on the file take the
 * kernel path, whose page cache holds the maps' stores (mmap.c). */
static inline int64_t *mappers(const struct fastmap *m) { return (int64_t *)(m->pt + IOW_PT_OFF_MAPPERS); }

static inline int mapped_elsewhere(const struct fastmap *m)
{
	return __atomic_load_n(mappers(m), __ATOMIC_SEQ_CST) != 0;
}

int iow_fast_map_begin(struct iow_ofd *o)
{
	iow_fast_ensure(o);
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m || !m->ptw || iow_in_child)
		return 0;
	__atomic_fetch_add(mappers(m), 1, __ATOMIC_SEQ_CST);
	return 1;
}

void iow_fast_map_end(struct iow_ofd *o)
{
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m || iow_in_child)
		return;
	int64_t v = __atomic_load_n(mappers(m), __ATOMIC_RELAXED);
	while (v > 0 && !__atomic_compare_exchange_n(mappers(m), &v, v - 1, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
}

int iow_fast_shared_writers(struct iow_ofd *o)
{
	iow_fast_ensure(o);
	const struct fastmap *m = (const struct fastmap *)o->gohandle;
	return m && (__atomic_load_n((const uint32_t *)(m->pt + IOW_PT_OFF_FLAGS), __ATOMIC_RELAXED) & IOW_PTF_WRITABLE);
}

/* ipc_io sends a miss to the daemon; -2 when it did not (nothing moved). */
static ssize_t ipc_io(struct iow_ofd *o, const struct fastmap *m, void *buf, size_t n, off_t off, int wr)
{
	if (!iow_ipc_on || !m->ipc[0] || n == 0 || n > IPC_MAX || off < 0 || iow_in_child)
		return -2;
	ssize_t r = iowarpIpcIO((char *)m->ipc, o->cap.grant, o->cap.ino, o->cap.accmode, o->cap.token, buf, n, off, wr);
	if (r > 0) {
		if (wr)
			IOW_ADD(ipc_write, r);
		else
			IOW_ADD(ipc_read, r);
	}
	return r;
}

ssize_t iow_fast_pread(struct iow_ofd *o, void *buf, size_t n, off_t off)
{
	iow_fast_ensure(o);
	const struct fastmap *m = (const struct fastmap *)o->gohandle;
	if (!m)
		return -2;
	if (mapped_elsewhere(m)) {
		IOW_ADD(fast_misses, 1);
		return -2;
	}
	int64_t deadline = 0;
	for (int attempt = 0, torn = 0; torn < 4; attempt++) {
		uint64_t s1 = ld_seq(m);
		if (s1 & 1) {
			/* The daemon's exclusive lock: wait for it, bounded, as
			 * writers do (enter). */
			if (!lock_wait(attempt, &deadline))
				break;
			continue;
		}
		torn++;
		int64_t size = __atomic_load_n((const int64_t *)(m->pt + IOW_PT_OFF_SIZE), __ATOMIC_ACQUIRE);
		size_t r = 0;
		if (off < size && n > 0) {
			uint64_t end = (uint64_t)off + n;
			if (end > (uint64_t)size)
				end = (uint64_t)size;
			if (!resident(m, (uint64_t)off / m->ps, (end - 1) / m->ps))
				break;
			r = end - (uint64_t)off;
			memcpy(buf, m->data + off, r);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (ld_seq(m) == s1) {
			IOW_ADD(fast_hits, 1);
			IOW_ADD(fast_read, r);
			return (ssize_t)r;
		}
	}
	IOW_ADD(fast_misses, 1);
	return ipc_io(o, m, buf, n, off, 0);
}

/* room says whether the write [first, last] may land in shared memory:
 * every page resident, or one this writer may create: no old data to
 * stage in (its first byte at or past the size, or a hole: at or past the
 * daemon's new-from word, below which lies every byte the table does not
 * show, so that the ranks of a shared file each create their own part),
 * inside the segment's cover and the map. It returns the pages to create,
 * or -1. */
static int64_t room(const struct fastmap *m, uint64_t first, uint64_t last, int64_t size)
{
	const uint64_t *bits = (const uint64_t *)(m->pt + IOW_PT_OFF_RESIDENT);
	uint64_t cover = __atomic_load_n((const uint64_t *)(m->pt + IOW_PT_OFF_COVER), __ATOMIC_ACQUIRE);
	int64_t nf = __atomic_load_n((const int64_t *)(m->pt + IOW_PT_OFF_NEW_FROM), __ATOMIC_ACQUIRE);
	uint64_t newfrom = nf < 0 ? UINT64_MAX : (uint64_t)nf;
	if (last >= m->nbits || (last + 1) * m->ps > m->datalen)
		return -1;
	int64_t k = 0;
	for (uint64_t i = first; i <= last; i++) {
		if (__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) & (1ull << (i % 64)))
			continue;
		if ((i * m->ps < (uint64_t)size && i * m->ps < newfrom) || (i + 1) * m->ps > cover)
			return -1;
		k++;
	}
	return k;
}

/* take_lease takes k pages of the file's lease; 0 when it holds fewer. */
static int take_lease(const struct fastmap *m, int64_t k)
{
	int64_t *lease = (int64_t *)(m->pt + IOW_PT_OFF_LEASE);
	int64_t v = __atomic_load_n(lease, __ATOMIC_RELAXED);
	while (v >= k)
		if (__atomic_compare_exchange_n(lease, &v, v - k, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* create marks the pages of [first, last] that are not resident resident
 * (the daemon adopts them at its next harvest: bufferpool/lease.go); a
 * page another writer created meanwhile gives its lease page back. */
static void create(const struct fastmap *m, uint64_t first, uint64_t last)
{
	uint64_t *bits = (uint64_t *)(m->pt + IOW_PT_OFF_RESIDENT);
	for (uint64_t i = first; i <= last; i++) {
		uint64_t bit = 1ull << (i % 64);
		if (__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) & bit)
			continue;
		if (__atomic_fetch_or(&bits[i / 64], bit, __ATOMIC_SEQ_CST) & bit)
			__atomic_fetch_add((int64_t *)(m->pt + IOW_PT_OFF_LEASE), 1, __ATOMIC_RELAXED);
	}
}

/* grow raises the shared size to end (atomic max). */
static void grow(const struct fastmap *m, uint64_t end)
{
	int64_t *size = (int64_t *)(m->pt + IOW_PT_OFF_SIZE);
	int64_t v = __atomic_load_n(size, __ATOMIC_RELAXED);
	while (v < (int64_t)end && !__atomic_compare_exchange_n(size, &v, (int64_t)end, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
}

/* LOCK_WAIT_NS bounds how long a call waits for the daemon's exclusive
 * lock of the file's bucket (seq odd) before it takes the kernel path.
 * The kernel path needs the same lock (a FUSE request is served by the
 * same daemon, under the same bucket lock), so waiting for it is never
 * slower; it only has to stay bounded for a daemon that is stopped. On
 * loaded cores the daemon's thread that holds the lock (a write-back's,
 * a journal sync's, another rank's grant: microseconds of work) can be
 * off the CPU for milliseconds: a rank of IOR's shared file that gave up
 * after a few spins sent 1 to 6 of its 8 MiB to the kernel so. */
#define LOCK_WAIT_NS 100000000l

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* lock_wait waits a little for seq to turn even (attempt counts the
 * waits, *deadline is set at the first); 0 once the bound passed. */
static int lock_wait(int attempt, int64_t *deadline)
{
	if (attempt < 8) {
		for (int i = 0; i < 256; i++)
			__builtin_ia32_pause();
		return 1;
	}
	int64_t now = mono_ns();
	if (*deadline == 0)
		*deadline = now + LOCK_WAIT_NS;
	if (now >= *deadline)
		return 0;
	if (attempt < 64) {
		syscall(SYS_sched_yield);
	} else {
		struct timespec d = {0, 50000}; /* 50 µs: the daemon's thread needs the CPU */
		nanosleep(&d, NULL);
	}
	return 1;
}

/* enter adds this writer to the table's writers and returns seq (odd: the
 * daemon holds the lock past LOCK_WAIT_NS, and the writer must leave at
 * once). */
static uint64_t enter(const struct fastmap *m)
{
	int64_t *writers = (int64_t *)(m->pt + IOW_PT_OFF_WRITERS);
	uint64_t s;
	int64_t deadline = 0;
	for (int attempt = 0;; attempt++) {
		__atomic_fetch_add(writers, 1, __ATOMIC_SEQ_CST);
		s = __atomic_load_n((uint64_t *)(m->pt + IOW_PT_OFF_SEQ), __ATOMIC_SEQ_CST);
		if (!(s & 1))
			return s;
		/* The daemon holds the bucket's lock exclusively (it moves a
		 * page: a FUSE-door write, a stage-in, an eviction; harvests and
		 * lease refills never do this) and waits for the writers inside
		 * to leave: step out so that it can go on, and come back. A
		 * poisoned table is refused at once (refused). */
		if ((__atomic_load_n((uint32_t *)(m->pt + IOW_PT_OFF_FLAGS), __ATOMIC_RELAXED) & IOW_PTF_POISONED) ||
		    !lock_wait(attempt, &deadline))
			return s;
		__atomic_fetch_sub(writers, 1, __ATOMIC_RELEASE);
	}
}

static void leave(const struct fastmap *m)
{
	__atomic_fetch_sub((int64_t *)(m->pt + IOW_PT_OFF_WRITERS), 1, __ATOMIC_RELEASE);
}

/* stamp raises the table's mtime word to now (an atomic max): a write's
 * mtime, which fstat of every shim serves (iow_fast_fstat) and the daemon
 * takes for the pages it harvests (bufferpool/files, shimChanged). */
static void stamp(const struct fastmap *m)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return;
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	int64_t *w = (int64_t *)(m->pt + IOW_PT_OFF_MTIME);
	int64_t v = __atomic_load_n(w, __ATOMIC_RELAXED);
	while (v < now && !__atomic_compare_exchange_n(w, &v, now, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/* place copies n bytes at off into pages [first, last], creating the k
 * new ones first, then sets their dirty bits and the hint: the daemon's
 * harvest runs while we copy (it swaps dirty words for 0), so a bit it
 * takes must stand for a copy that is complete (bufferpool/
 * pagetable_unsafe.go, harvestLocked). Inside enter/leave. */
static void place(const struct fastmap *m, const void *buf, size_t n, uint64_t off, uint64_t first, uint64_t last, int64_t k)
{
	uint64_t hint = IOW_PT_HINT_DIRTY;
	if (k > 0) {
		create(m, first, last);
		hint |= IOW_PT_HINT_NEW;
	}
	memcpy(m->data + off, buf, n);
	uint64_t *dirty = (uint64_t *)(m->pt + IOW_PT_OFF_DIRTY);
	for (uint64_t i = first; i <= last; i++)
		__atomic_fetch_or(&dirty[i / 64], 1ull << (i % 64), __ATOMIC_RELEASE);
	__atomic_fetch_or((uint64_t *)(m->pt + IOW_PT_OFF_HINT), hint, __ATOMIC_RELEASE);
	stamp(m);
}

/* refused: the daemon's lock, poison or a shared map of the file. */
static int refused(const struct fastmap *m, uint64_t s)
{
	uint32_t fl = __atomic_load_n((uint32_t *)(m->pt + IOW_PT_OFF_FLAGS), __ATOMIC_SEQ_CST);
	return (s & 1) || (fl & IOW_PTF_POISONED) || mapped_elsewhere(m);
}

/* LEASE_BACKOFF is how many new-page writes skip asking the daemon for a
 * lease after it could not give one (the RAM tier is full): each ask is a
 * round trip; the harvester refills leases on its own meanwhile. */
#define LEASE_BACKOFF 64

/* refill asks the daemon over runtime/ipc for a lease of at least k pages
 * (fs.MLease: it tops the lease up by a large step, so a burst pays one
 * round trip per step); 1 when the lease now holds them. Called outside
 * enter/leave: the daemon never waits for us, nor we for its locks. */
static int refill(struct iow_ofd *o, struct fastmap *m, int64_t k)
{
	if (!m->ipc[0] || iow_in_child)
		return 0;
	int b = __atomic_load_n(&m->lease_backoff, __ATOMIC_RELAXED);
	if (b > 0) {
		__atomic_store_n(&m->lease_backoff, b - 1, __ATOMIC_RELAXED);
		return 0;
	}
	int64_t got = iowarpIpcLease(m->ipc, o->cap.grant, o->cap.ino, o->cap.accmode, o->cap.token, k);
	if (got >= k) {
		IOW_ADD(ipc_lease, 1);
		return 1;
	}
	__atomic_store_n(&m->lease_backoff, LEASE_BACKOFF, __ATOMIC_RELAXED);
	return 0;
}

ssize_t iow_fast_pwrite(struct iow_ofd *o, const void *buf, size_t n, off_t off)
{
	iow_fast_ensure(o);
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m || !m->writable || n == 0 || off < 0 || (uint64_t)off + n < (uint64_t)off)
		return -2;
	uint64_t end = (uint64_t)off + n;
	uint64_t first = (uint64_t)off / m->ps, last = (end - 1) / m->ps;
	uint64_t s;
	int no;
	int64_t size, k;
	for (int asked = 0;; asked++) {
		s = enter(m);
		no = refused(m, s);
		size = __atomic_load_n((int64_t *)(m->pt + IOW_PT_OFF_SIZE), __ATOMIC_SEQ_CST);
		k = -1;
		if (!no && size >= 0)
			k = end > (uint64_t)size && iow_nofastnew ? -1 : room(m, first, last, size);
		if (k <= 0 || take_lease(m, k))
			break;
		/* The lease is spent: ask the daemon for more (once), else the
		 * kernel path, with nothing moved. */
		leave(m);
		if (asked || !refill(o, m, k)) {
			IOW_ADD(fast_misses, 1);
			return -2;
		}
	}
	if (k < 0) {
		leave(m);
		IOW_ADD(fast_misses, 1);
		if (no || size < 0 || end > (uint64_t)size)
			return -2; /* extending writes the shim cannot place stay on the kernel path */
		return ipc_io(o, m, (void *)buf, n, off, 1);
	}
	place(m, buf, n, (uint64_t)off, first, last, k);
	if (end > (uint64_t)size)
		grow(m, end);
	leave(m);
	IOW_ADD(fast_hits, 1);
	IOW_ADD(fast_write, n);
	return (ssize_t)n;
}

/* APPEND_TRIES bounds the CAS races one append may lose to other
 * appenders before it takes the kernel path. */
#define APPEND_TRIES 1024

/* iow_fast_append appends n bytes at the file's end in shared memory: it
 * reserves [size, size+n) with a CAS on the shared size, so appends of
 * every shim of the node and of the FUSE door (bufferpool/files,
 * claimAppend: the same CAS, ClaimSharedSize) land one after the other,
 * none overlapped. The pages must be resident or new (past the size), as
 * for any fast write; the reservation and the copy happen inside
 * enter/leave, so no truncation or eviction comes between. The copy lands
 * after the size is raised: a reader racing it may see the range as zeros
 * for as long as the copy takes (the FUSE door's appends too). *at is the
 * end of the append (the fd's new offset). -2 when nothing moved. */
ssize_t iow_fast_append(struct iow_ofd *o, const void *buf, size_t n, off_t *at)
{
	iow_fast_ensure(o);
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m || !m->writable || n == 0 || iow_nofastnew)
		return -2;
	int64_t *sz = (int64_t *)(m->pt + IOW_PT_OFF_SIZE);
	for (int tries = 0, asked = 0; tries < APPEND_TRIES; tries++) {
		uint64_t s = enter(m);
		int64_t size = __atomic_load_n(sz, __ATOMIC_SEQ_CST);
		if (refused(m, s) || size < 0 || (uint64_t)size + n < (uint64_t)size) {
			leave(m);
			break;
		}
		uint64_t end = (uint64_t)size + n;
		uint64_t first = (uint64_t)size / m->ps, last = (end - 1) / m->ps;
		int64_t k = room(m, first, last, size);
		if (k < 0) {
			leave(m);
			break;
		}
		if (k > 0 && !take_lease(m, k)) {
			leave(m);
			if (asked++ || !refill(o, m, k))
				break;
			continue;
		}
		if (!__atomic_compare_exchange_n(sz, &size, (int64_t)end, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			/* Another appender (or an extending write) moved the end:
			 * give the pages back and try at the new end. */
			if (k > 0)
				__atomic_fetch_add((int64_t *)(m->pt + IOW_PT_OFF_LEASE), k, __ATOMIC_RELAXED);
			leave(m);
			continue;
		}
		place(m, buf, n, end - n, first, last, k);
		leave(m);
		*at = (off_t)end;
		IOW_ADD(fast_hits, 1);
		IOW_ADD(fast_write, n);
		return (ssize_t)n;
	}
	IOW_ADD(fast_misses, 1);
	return -2;
}

/* fstat of an attached fd, served from the page table: the kernel's last
 * answer for this open (iow_fast_fstat_fill), kept while the table's
 * attribute generation stays (the daemon raises it at every change of
 * what stat answers other than a shim's write: mode, owner, links, times,
 * its own writes and truncations, a write-back to the backing file:
 * bufferpool/files), with the size and mtime that shims keep current in
 * the table: the size word, and the mtime word every fast write stamps
 * (stamp); ctime and blocks follow them as the daemon's own answer does
 * (bufferpool/files, overlay). 0 when served; -2 to ask the kernel and
 * fill the cache under *gen; -3 when the fd has no maps (no cache). */
static void st_lock(struct fastmap *m)
{
	while (__atomic_exchange_n(&m->st_lock, 1, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
}

static void st_unlock(struct fastmap *m) { __atomic_store_n(&m->st_lock, 0, __ATOMIC_RELEASE); }

int iow_fast_fstat(struct iow_ofd *o, struct stat *st, uint64_t *gen)
{
	if (iow_in_child)
		return -3;
	iow_fast_ensure(o);
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m)
		return -3;
	uint64_t g = __atomic_load_n((const uint64_t *)(m->pt + IOW_PT_OFF_ATTR_GEN), __ATOMIC_ACQUIRE);
	*gen = g;
	st_lock(m);
	int ok = m->st_ok && m->st_gen == g;
	if (ok)
		*st = m->st;
	st_unlock(m);
	int64_t size = __atomic_load_n((const int64_t *)(m->pt + IOW_PT_OFF_SIZE), __ATOMIC_ACQUIRE);
	if (!ok || size < 0 || mapped_elsewhere(m))
		return -2;
	int64_t mt = __atomic_load_n((const int64_t *)(m->pt + IOW_PT_OFF_MTIME), __ATOMIC_ACQUIRE);
	/* A generation raised meanwhile: the answer may be older than it. */
	if (__atomic_load_n((const uint64_t *)(m->pt + IOW_PT_OFF_ATTR_GEN), __ATOMIC_ACQUIRE) != g)
		return -2;
	st->st_size = size;
	int64_t blocks = (size + 4095) / 4096 * 8;
	if (blocks > (int64_t)st->st_blocks)
		st->st_blocks = blocks;
	int64_t cur = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	if (mt > cur) {
		st->st_mtim.tv_sec = mt / 1000000000;
		st->st_mtim.tv_nsec = mt % 1000000000;
		int64_t c = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
		if (c < mt)
			st->st_ctim = st->st_mtim;
	}
	IOW_ADD(fstat_cached, 1);
	return 0;
}

/* iow_fast_fstat_fill keeps the kernel's answer st, asked after *gen was
 * read (so a change after it raised the generation past gen). */
void iow_fast_fstat_fill(struct iow_ofd *o, uint64_t gen, const struct stat *st)
{
	struct fastmap *m = (struct fastmap *)o->gohandle;
	if (!m || iow_in_child)
		return;
	st_lock(m);
	m->st = *st;
	m->st_gen = gen;
	m->st_ok = 1;
	st_unlock(m);
}
