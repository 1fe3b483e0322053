/* shim.h: the C side of libiowarp.so. See doc.go for the design. */
#ifndef IOWARP_SHIM_H
#define IOWARP_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "abi.h"

/* Everything declared here is internal to the library; only the
 * interposers (declared by the system headers) are exported. */
#pragma GCC visibility push(hidden)

/* The capability the daemon returns for an fd on the mount (struct
 * iow_cap), the grant request and the page table: abi.h, generated from
 * internal/abi (fusefs/shim.go, fusefs/grant.go and
 * bufferpool/pagetable_unsafe.go use the same constants). */

/* An open file description of ours: shared by every fd dup'ed from it.
 * refs counts the fd table slots holding it plus calls in flight; memory
 * is never returned to malloc (type-stable), so a racing lookup that loses
 * to close touches a free or recycled ofd, never unmapped memory. */
struct iow_ofd {
	long refs;          /* atomic; 0 = free */
	int flags;          /* O_ACCMODE | O_APPEND of the description */
	struct iow_cap cap;
	uintptr_t gohandle; /* Go-side attachment (fast path); 0 = none */
	int lazy;           /* atomic: 1 = attach at the first call that needs the maps, 2 = attaching */
	struct iow_frec *rep; /* report.c: the file's IOWARP_REPORT record; NULL = none */
	struct iow_ofd *next_free;
};

/* fdtable.c */
extern int iow_tabsz;
extern struct iow_ofd **iow_tab;
void iow_fdtable_init(void);
struct iow_ofd *iow_ofd_new(int flags, const struct iow_cap *cap);
struct iow_ofd *iow_ofd_get(int fd); /* acquire a ref, NULL if not ours */
void iow_ofd_put(struct iow_ofd *o);
void iow_slot_set(int fd, struct iow_ofd *o); /* o already ref'd for the slot; old dropped */
void iow_slot_clear(int fd);
void iow_slot_dup(int oldfd, int newfd);
void iow_slot_clear_range(unsigned first, unsigned last);

static inline int iow_maybe_ours(int fd)
{
	return (unsigned)fd < (unsigned)iow_tabsz && __atomic_load_n(&iow_tab[fd], __ATOMIC_ACQUIRE) != NULL;
}

/* fast.c */
void iow_attach_fast(struct iow_ofd *o);
void iow_attach_lazy(struct iow_ofd *o); /* the deferred attach of an open (o->lazy) */
static inline void iow_fast_ensure(struct iow_ofd *o)
{
	if (__builtin_expect(__atomic_load_n(&o->lazy, __ATOMIC_ACQUIRE) != 0, 0))
		iow_attach_lazy(o);
}
int iow_fast_fstat(struct iow_ofd *o, struct stat *st, uint64_t *gen); /* 0 = served from the table, -2 = ask the kernel and fill, -3 = no maps */
void iow_fast_fstat_fill(struct iow_ofd *o, uint64_t gen, const struct stat *st); /* the kernel's answer, asked under gen */
void iow_detach_fast(struct iow_ofd *o); /* plain C state: a forked child may unmap its copy too */
ssize_t iow_fast_pread(struct iow_ofd *o, void *buf, size_t n, off_t off);
ssize_t iow_fast_pwrite(struct iow_ofd *o, const void *buf, size_t n, off_t off);
ssize_t iow_fast_append(struct iow_ofd *o, const void *buf, size_t n, off_t *at); /* O_APPEND: at the shared size */
int iow_fast_shared_writers(struct iow_ofd *o); /* a shim may write the file in place */
void iow_fast_ksync(struct iow_ofd *o, int fd); /* the kernel sees the shared size */
int iow_fast_map_begin(struct iow_ofd *o);      /* a shared map of the file: 1 if counted */
void iow_fast_map_end(struct iow_ofd *o);       /* its end (when counted) */
void iow_fdtable_atfork_prepare(void);
void iow_fdtable_atfork_parent(void);
void iow_fdtable_atfork_child(void);

/* mmap.c: mappings of our files; while one exists the file takes the
 * kernel path in this process. */
extern int iow_nmaps;
extern unsigned long iow_map_gen;
int iow_mapped_slow(const struct iow_ofd *o);
static inline int iow_mapped(const struct iow_ofd *o)
{
	return __atomic_load_n(&iow_nmaps, __ATOMIC_ACQUIRE) && iow_mapped_slow(o);
}
static inline unsigned long iow_map_gen_load(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&iow_map_gen, __ATOMIC_SEQ_CST);
}
void iow_maps_atfork_prepare(void);
void iow_maps_atfork_parent(void);
void iow_maps_atfork_child(void);

/* posix.c */
ssize_t iow_read(int fd, void *buf, size_t n);
ssize_t iow_write(int fd, const void *buf, size_t n);
off_t iow_lseek(int fd, off_t off, int whence);
int iow_close(int fd);
int iow_open_flags(const char *path, int flags, mode_t mode);
void iow_drop_cache(int fd, off_t off, size_t n);
void iow_ksync_fd(int fd); /* before fstat of an fd of ours: the kernel sees the shared size */

/* stdio.c */
FILE *iow_cookie_fopen(int fd, const char *mode);
int iow_cookie_fd(FILE *fp); /* the fd behind one of our FILEs, or -1 */
int iow_mode_flags(const char *mode, int *ok);

/* paths.c */
void iow_paths_init(const char *spec);
const char *iow_redirect(const char *path, char *buf, size_t bufsz);
extern int iow_paths_active;

/* report.c */
struct iow_counters {
	unsigned long calls, opens, handshake_fail, stdio_streams, mpi_calls;
	unsigned long fast_hits, fast_misses;
	/* bytes, reads then writes (report.c relies on the order) */
	unsigned long fast_read, kernel_read, ipc_read;
	unsigned long fast_write, kernel_write, ipc_write; /* ipc: misses carried by runtime/ipc */
	unsigned long ipc_lease; /* lease refills granted over runtime/ipc */
	/* metadata: the calls the shim made to the daemon, and those it saved */
	unsigned long statfs_calls, statfs_cached; /* open's is-it-FUSE probe: fstatfs, or a known device */
	unsigned long grants, grants_skipped;      /* maps asked for (at the first I/O), opens closed without */
	unsigned long fstat_kernel, fstat_cached;  /* fstat of our fds: asked the kernel, or served from the table */
};
extern struct iow_counters iow_cnt;
/* iow_report_files: IOWARP_REPORT names a file, which gets a line per
 * file too: counters are also added to the record of the file of the
 * thread's current call (iow_rep_add), and each call on one of our ofds
 * (iow_ofd_get to iow_ofd_put) is timed. */
extern int iow_report_files;
void iow_rep_add(size_t field, unsigned long v);
void iow_rep_enter(struct iow_ofd *o);  /* iow_ofd_get found o */
void iow_rep_leave(struct iow_ofd *o);  /* iow_ofd_put of o */
void iow_rep_attach(struct iow_ofd *o, int fd); /* o was put in fd's slot */
#define IOW_ADD(field, v)                                                                     \
	do {                                                                                  \
		__atomic_fetch_add(&iow_cnt.field, (unsigned long)(v), __ATOMIC_RELAXED);     \
		if (__builtin_expect(iow_report_files, 0))                                    \
			iow_rep_add(offsetof(struct iow_counters, field), (unsigned long)(v)); \
	} while (0)
void iow_report_init(void);
void iow_warn_once(int which, const char *msg);

/* common state */
extern int iow_in_child;  /* set in a forked child: never enter Go */
extern int iow_strict;    /* IOWARP_STRICT=1 */
extern int iow_ready;     /* constructor done */
extern int iow_ipc_on;    /* IOWARP_IPC=1: misses through runtime/ipc (fast.c) */
extern int iow_nofast;    /* IOWARP_NOFAST set: no fast path */
extern int iow_nofastwrite; /* IOWARP_NOFASTWRITE set: no write hits */
extern int iow_nofastnew;   /* IOWARP_NOFASTNEW set: no new data (extending writes) on the fast path */

/* Go exports wrapped (main.go). */
void iow_go_init(void);

/* The real libc functions, resolved with dlsym(RTLD_NEXT) by the
 * constructor (iow_resolve_reals): dlsym is not async-signal-safe, and a
 * signal handler may call read or write. DECL_REAL declares the pointer
 * and registers it in the iow_reals section, which the constructor walks.
 * A call made before our constructor ran (another library's constructor)
 * resolves its function on the spot. */
struct iow_real_ent {
	const char *name;
	void **slot;
};
#define DECL_REAL_T(name, type)                                                          \
	static __typeof__(type) iow_real_##name;                                                   \
	static struct iow_real_ent iow_ent_##name                                        \
		__attribute__((used, section("iow_reals"), aligned(sizeof(void *)))) = { \
			#name, (void **)&iow_real_##name}
#define DECL_REAL(name) DECL_REAL_T(name, __typeof__(name) *)
#define IOW_REAL(name) \
	(*({ if (__builtin_expect(!iow_real_##name, 0)) iow_real_##name = iow_dlnext(#name); iow_real_##name; }))
void *iow_dlnext(const char *name);
void iow_resolve_reals(void);

#pragma GCC visibility pop
#endif
