/* fast.c: read hits served from shared memory. The capability names the
 * daemon's fds of the file's page table and RAM-tier segment; both are
 * reopened read-only through /proc/<daemon>/fd/<n> (the kernel allows that
 * to the daemon's user and root only) and mapped. A read whose pages are
 * all resident is a seqlock read: load seq (even), check the residency
 * bits, memcpy, load seq again; equal means the bytes are a consistent
 * image. Anything else (a miss, a page being changed, a page past the
 * mapping) returns -2 and the caller takes the kernel path, where the
 * daemon stages the page in; the next read of it is a hit. Layout: see
 * bufferpool/pagetable_unsafe.go. Nothing here enters Go. */
#include "shim.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define PT_MAGIC 0x50574f49u
#define PT_VERSION 1u
#define PT_HEADER 64
#define PT_MAX_PAGES (1ul << 20)
#define PT_SIZE (PT_HEADER + PT_MAX_PAGES / 8)
#define MAP_MAX (16ul << 30) /* virtual span mapped per file: pages past it miss */

struct fastmap {
	const char *pt;   /* page table mapping */
	const char *data; /* segment mapping */
	size_t datalen;
	uint64_t ps;
	uint64_t nbits;
};

static int open_daemon_fd(uint32_t pid, int32_t fd)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/%u/fd/%d", pid, fd);
	return (int)syscall(SYS_openat, AT_FDCWD, p, O_RDONLY | O_CLOEXEC, 0);
}

int iow_attach_fast(int fd, struct iow_ofd *o)
{
	(void)fd;
	const struct iow_cap *c = &o->cap;
	if (c->data_fd < 0 || c->table_fd < 0 || c->page_size == 0 || (o->flags & O_ACCMODE) == O_WRONLY)
		return 0;
	if (getenv("IOWARP_NOFAST"))
		return 0;
	int tfd = open_daemon_fd(c->daemon_pid, c->table_fd);
	if (tfd < 0)
		return 0;
	void *pt = mmap(NULL, PT_SIZE, PROT_READ, MAP_SHARED, tfd, 0);
	syscall(SYS_close, tfd);
	if (pt == MAP_FAILED)
		return 0;
	const uint32_t *h = pt;
	uint64_t ps = ((const uint64_t *)pt)[3], nbits = ((const uint64_t *)pt)[4];
	if (h[0] != PT_MAGIC || h[1] != PT_VERSION || ps != c->page_size || nbits > PT_MAX_PAGES) {
		munmap(pt, PT_SIZE);
		return 0;
	}
	int dfd = open_daemon_fd(c->daemon_pid, c->data_fd);
	if (dfd < 0) {
		munmap(pt, PT_SIZE);
		return 0;
	}
	size_t len = nbits * ps < MAP_MAX ? nbits * ps : MAP_MAX;
	void *data = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_NORESERVE, dfd, 0);
	syscall(SYS_close, dfd);
	struct fastmap *m = malloc(sizeof(*m));
	if (data == MAP_FAILED || !m) {
		if (data != MAP_FAILED)
			munmap(data, len);
		munmap(pt, PT_SIZE);
		free(m);
		return 0;
	}
	*m = (struct fastmap){pt, data, len, ps, nbits};
	o->gohandle = (uintptr_t)m;
	return 1;
}

void iow_detach_fast(struct iow_ofd *o)
{
	struct fastmap *m = (struct fastmap *)o->gohandle;
	o->gohandle = 0;
	if (!m)
		return;
	munmap((void *)m->data, m->datalen);
	munmap((void *)m->pt, PT_SIZE);
	free(m);
}

static inline uint64_t ld_seq(const struct fastmap *m)
{
	return __atomic_load_n((const uint64_t *)(m->pt + 8), __ATOMIC_ACQUIRE);
}

static inline int resident(const struct fastmap *m, uint64_t first, uint64_t last)
{
	const uint64_t *bits = (const uint64_t *)(m->pt + PT_HEADER);
	if (last >= m->nbits || (last + 1) * m->ps > m->datalen)
		return 0;
	for (uint64_t i = first; i <= last; i++)
		if (!(__atomic_load_n(&bits[i / 64], __ATOMIC_RELAXED) & (1ull << (i % 64))))
			return 0;
	return 1;
}

ssize_t iow_fast_pread(struct iow_ofd *o, void *buf, size_t n, off_t off)
{
	const struct fastmap *m = (const struct fastmap *)o->gohandle;
	if (!m)
		return -2;
	for (int attempt = 0; attempt < 4; attempt++) {
		uint64_t s1 = ld_seq(m);
		if (s1 & 1) {
			__builtin_ia32_pause();
			continue;
		}
		int64_t size = __atomic_load_n((const int64_t *)(m->pt + 16), __ATOMIC_ACQUIRE);
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
	return -2;
}

ssize_t iow_fast_pwrite(struct iow_ofd *o, const void *buf, size_t n, off_t off)
{
	(void)o; (void)buf; (void)n; (void)off;
	return -2; /* writes take the kernel path (see doc.go) */
}
