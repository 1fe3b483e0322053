/* mmap.c: mappings of our files.
 *
 * A mapping is served from the kernel's page cache, which the fast path
 * bypasses both ways: a fast write lands in the pool behind cached pages,
 * and a store through a shared mapping reaches the daemon only when the
 * kernel writes the page back. So, per process and per file (inode of one
 * daemon):
 *
 *   - mmap drops the file's cached pages before it maps (its faults then
 *     read the pool, fast writes included);
 *   - while the process maps the file, its reads and writes of that file
 *     take the kernel path (posix.c, fast_ok): the page cache is the one
 *     copy it sees, coherent with the mapping;
 *   - munmap of a shared mapping first writes its dirty pages back
 *     (msync), so that the fast path, back on after the last mapping,
 *     reads them from the pool;
 *   - a shared map made through an open with a read-write table is
 *     counted in the file's table (fast.c, IOW_PT_OFF_MAPPERS): while the count
 *     is not 0, every shim's calls on the file take the kernel path, so
 *     other processes see the map's stores and the map sees their writes.
 *     The daemon resets the count with the writer count once no
 *     read-write map of the file is held (a process killed while mapping
 *     leaves it up until then: slower, never wrong).
 *
 * Mappings are tracked by address range in a small table; MAP_FIXED over
 * a tracked range and mremap keep it exact. A mapping the table cannot
 * hold, or an mremap it cannot follow, turns the fast path off for every
 * file of the process (iow_maps_lost): slower, never wrong.
 *
 * Maps made by a process without the shim, or through a read-only open
 * (private ones included), are not counted: a fast write reaches such a
 * map when the daemon's harvest (every 50 ms) drops the inode's cached
 * pages; a shared map through a read-only open cannot store. A process
 * without the shim storing through a shared map is seen by fast reads
 * once the kernel writes the pages back (msync, or its write-back
 * interval). */
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

DECL_REAL(mmap);
DECL_REAL(mmap64);
DECL_REAL(munmap);
DECL_REAL(mremap);

#define MAPS_MAX 256

struct iow_map {
	uintptr_t addr; /* 0 = free */
	size_t len;
	uint64_t ino;
	uint32_t dpid;
	int shared;
	int counted;         /* in the file's shared mapper count (fast.c) */
	struct iow_ofd *ofd; /* a ref, so its table stays mapped */
};

/* Entries freed under maps_mu are ended after it is released (putting an
 * ofd may unmap its table). */
struct ended {
	struct iow_ofd *ofd[MAPS_MAX];
	int counted[MAPS_MAX];
	int n;
};

static pthread_mutex_t maps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct iow_map maps[MAPS_MAX]; /* written under maps_mu */
static int maps_hi;                   /* atomic: entries past it are free */

int iow_nmaps;            /* atomic: tracked mappings (+1 for ever once lost) */
int iow_maps_lost;        /* atomic */
unsigned long iow_map_gen; /* atomic: bumped before each new mapping */

static void maps_lose(void)
{
	if (!__atomic_exchange_n(&iow_maps_lost, 1, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&iow_nmaps, 1, __ATOMIC_SEQ_CST);
}

/* iow_mapped_slow scans the table without the lock (a signal handler may
 * call read while its thread holds it): entries are published by their
 * addr, stored last. A scan racing with mmap or munmap of the same file
 * in another thread may miss it, as an unordered call may. */
int iow_mapped_slow(const struct iow_ofd *o)
{
	if (__atomic_load_n(&iow_maps_lost, __ATOMIC_ACQUIRE))
		return 1;
	int hi = __atomic_load_n(&maps_hi, __ATOMIC_ACQUIRE);
	for (int i = 0; i < hi; i++) {
		struct iow_map *m = &maps[i];
		if (__atomic_load_n(&m->addr, __ATOMIC_ACQUIRE) && __atomic_load_n(&m->ino, __ATOMIC_RELAXED) == o->cap.ino &&
		    __atomic_load_n(&m->dpid, __ATOMIC_RELAXED) == o->cap.daemon_pid)
			return 1;
	}
	return 0;
}

/* slot_newLocked returns a free entry (maps_mu held), or NULL. */
static struct iow_map *slot_newLocked(void)
{
	for (int i = 0; i < MAPS_MAX; i++) {
		if (!maps[i].addr) {
			if (i >= maps_hi)
				__atomic_store_n(&maps_hi, i + 1, __ATOMIC_RELEASE);
			return &maps[i];
		}
	}
	return NULL;
}

/* publishLocked fills a free entry; its addr goes last (iow_mapped_slow). */
static void publishLocked(struct iow_map *m, uintptr_t addr, size_t len, struct iow_ofd *o, int shared, int counted)
{
	m->len = len, m->shared = shared, m->counted = counted, m->ofd = o;
	__atomic_store_n(&m->ino, o->cap.ino, __ATOMIC_RELAXED);
	__atomic_store_n(&m->dpid, o->cap.daemon_pid, __ATOMIC_RELAXED);
	__atomic_store_n(&m->addr, addr, __ATOMIC_RELEASE);
}

/* track records [addr, addr+len) as a mapping of o's file; the entry
 * takes the caller's ref on o. */
static void track(struct iow_ofd *o, void *addr, size_t len, int shared, int counted)
{
	pthread_mutex_lock(&maps_mu);
	struct iow_map *m = slot_newLocked();
	if (m) {
		publishLocked(m, (uintptr_t)addr, len, o, shared, counted);
		__atomic_fetch_add(&iow_nmaps, 1, __ATOMIC_SEQ_CST);
	}
	pthread_mutex_unlock(&maps_mu);
	if (!m) {
		maps_lose(); /* its count, if any, stays: other shims keep the kernel path */
		iow_ofd_put(o);
	}
}

static void freeLocked(struct iow_map *m, struct ended *end)
{
	__atomic_store_n(&m->addr, 0, __ATOMIC_RELEASE);
	__atomic_fetch_sub(&iow_nmaps, 1, __ATOMIC_SEQ_CST);
	end->ofd[end->n] = m->ofd, end->counted[end->n] = m->counted, end->n++;
	m->ofd = NULL;
}

static void end_all(struct ended *end)
{
	for (int i = 0; i < end->n; i++) {
		if (end->counted[i])
			iow_fast_map_end(end->ofd[i]);
		iow_ofd_put(end->ofd[i]);
	}
}

/* cutLocked removes [a, e) from m, writing its dirty pages back first. */
static void cutLocked(struct iow_map *m, uintptr_t a, uintptr_t e, struct ended *end)
{
	uintptr_t ma = m->addr, me = m->addr + m->len;
	uintptr_t lo = a > ma ? a : ma, hi = e < me ? e : me;
	if (lo >= hi)
		return;
	if (m->shared)
		msync((void *)lo, hi - lo, MS_SYNC);
	if (lo == ma && hi == me) {
		freeLocked(m, end);
	} else if (lo == ma) {
		m->len = me - hi;
		__atomic_store_n(&m->addr, hi, __ATOMIC_RELEASE);
	} else if (hi == me) {
		m->len = lo - ma;
	} else {
		struct iow_map *t = slot_newLocked();
		if (!t) {
			maps_lose();
			m->len = lo - ma;
			return;
		}
		__atomic_fetch_add(&m->ofd->refs, 1, __ATOMIC_ACQ_REL);
		publishLocked(t, hi, me - hi, m->ofd, m->shared, m->counted && iow_fast_map_begin(m->ofd));
		m->len = lo - ma;
		__atomic_fetch_add(&iow_nmaps, 1, __ATOMIC_SEQ_CST);
	}
}

/* forget drops [addr, addr+len) from the table before it is unmapped or
 * mapped over. */
static void forget(void *addr, size_t len)
{
	if (!__atomic_load_n(&iow_nmaps, __ATOMIC_ACQUIRE))
		return;
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a = (uintptr_t)addr, e = a + ((len + (size_t)pg - 1) & ~((size_t)pg - 1));
	struct ended end;
	end.n = 0;
	pthread_mutex_lock(&maps_mu);
	for (int i = 0; i < maps_hi; i++)
		if (maps[i].addr)
			cutLocked(&maps[i], a, e, &end);
	pthread_mutex_unlock(&maps_mu);
	end_all(&end);
}

static void *map_file(void *(*real)(void *, size_t, int, int, int, off_t), void *addr, size_t len, int prot,
		      int flags, int fd, off_t off)
{
	if (flags & MAP_FIXED)
		forget(addr, len);
	struct iow_ofd *o = (flags & MAP_ANONYMOUS) ? NULL : iow_ofd_get(fd);
	if (!o)
		return real(addr, len, prot, flags, fd, off);
	IOW_ADD(calls, 1);
	int shared = (flags & MAP_TYPE) == MAP_SHARED || (flags & MAP_TYPE) == MAP_SHARED_VALIDATE;
	/* Other shims that may write the file take the kernel path from now
	 * on (a shared map's stores reach only the page cache). */
	int counted = shared && iow_fast_map_begin(o);
	/* A fast write racing with us either sees the new generation (and
	 * drops its range itself) or landed before the drop below. */
	__atomic_fetch_add(&iow_map_gen, 1, __ATOMIC_SEQ_CST);
	iow_fast_ksync(o, fd); /* faults past the kernel's size are SIGBUS */
	iow_drop_cache(fd, 0, 0);
	void *p = real(addr, len, prot, flags, fd, off);
	int e = errno;
	if (p != MAP_FAILED) {
		if (iow_report_files)
			iow_rep_leave(o); /* the call ends; its ref lives on in the map */
		track(o, p, len, shared, counted); /* takes our ref */
	} else {
		if (counted)
			iow_fast_map_end(o);
		iow_ofd_put(o);
	}
	errno = e;
	return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return map_file(IOW_REAL(mmap), addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return map_file(IOW_REAL(mmap64), addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
	forget(addr, len);
	return IOW_REAL(munmap)(addr, len);
}

/* mremap of a tracked mapping: the entry follows it when it is the whole
 * mapping; anything else is not followed (iow_maps_lost). */
void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	if (!__atomic_load_n(&iow_nmaps, __ATOMIC_ACQUIRE))
		return IOW_REAL(mremap)(old, oldlen, newlen, flags, want);
	pthread_mutex_lock(&maps_mu);
	void *p = IOW_REAL(mremap)(old, oldlen, newlen, flags, want);
	if (p != MAP_FAILED) {
		uintptr_t a = (uintptr_t)old, e = a + oldlen;
		for (int i = 0; i < maps_hi; i++) {
			struct iow_map *m = &maps[i];
			if (!m->addr || m->addr >= e || m->addr + m->len <= a)
				continue;
			if (m->addr == a && m->len == oldlen) {
				m->len = newlen;
				__atomic_store_n(&m->addr, (uintptr_t)p, __ATOMIC_RELEASE);
			}
			else
				maps_lose();
		}
	}
	pthread_mutex_unlock(&maps_mu);
	return p;
}

/* A fork while another thread holds maps_mu must not leave it locked in
 * the child. */
void iow_maps_atfork_prepare(void) { pthread_mutex_lock(&maps_mu); }
void iow_maps_atfork_parent(void) { pthread_mutex_unlock(&maps_mu); }
void iow_maps_atfork_child(void) { pthread_mutex_unlock(&maps_mu); }
