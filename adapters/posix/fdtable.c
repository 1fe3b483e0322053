/* fdtable.c: which fds are ours. One slot per fd number, each pointing at
 * the open file description (ofd) shared by dups. Calls on fds whose slot is
 * empty go straight to libc. */
#include "shim.h"
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

int iow_tabsz;
struct iow_ofd **iow_tab;

static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;
static struct iow_ofd *free_list;

#define IOW_TAB_MAX (1 << 20)
#define IOW_TAB_MIN (1 << 16)

void iow_fdtable_init(void)
{
	struct rlimit rl;
	long n = IOW_TAB_MIN;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max > n)
		n = (long)rl.rlim_max;
	if (n > IOW_TAB_MAX)
		n = IOW_TAB_MAX; /* fds past it are never ours: the kernel path */
	/* Anonymous memory: untouched pages cost nothing. */
	void *p = mmap(NULL, (size_t)n * sizeof(*iow_tab), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	iow_tab = p;
	__atomic_store_n(&iow_tabsz, (int)n, __ATOMIC_RELEASE);
}

/* ofds come from chunks that are never freed. */
static struct iow_ofd *ofd_alloc(void)
{
	pthread_mutex_lock(&free_mu);
	if (!free_list) {
		size_t n = 64;
		struct iow_ofd *c = mmap(NULL, n * sizeof(*c), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c == MAP_FAILED) {
			pthread_mutex_unlock(&free_mu);
			return NULL;
		}
		for (size_t i = 0; i < n; i++) {
			c[i].next_free = free_list;
			free_list = &c[i];
		}
	}
	struct iow_ofd *o = free_list;
	free_list = o->next_free;
	pthread_mutex_unlock(&free_mu);
	return o;
}

struct iow_ofd *iow_ofd_new(int flags, const struct iow_cap *cap)
{
	struct iow_ofd *o = ofd_alloc();
	if (!o)
		return NULL;
	o->flags = flags;
	o->gohandle = 0;
	o->lazy = 0;
	o->rep = NULL;
	o->next_free = NULL;
	if (cap)
		memcpy(&o->cap, cap, sizeof(*cap));
	__atomic_store_n(&o->refs, 1, __ATOMIC_RELEASE);
	return o;
}


/* ofd_unref drops a ref that no call holds (a slot's). */
static void ofd_unref(struct iow_ofd *o)
{
	if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (__atomic_exchange_n(&o->lazy, 0, __ATOMIC_ACQ_REL) == 1)
		IOW_ADD(grants_skipped, 1); /* never needed its maps: no grant, no page table */
	iow_detach_fast(o);
	pthread_mutex_lock(&free_mu);
	o->next_free = free_list;
	free_list = o;
	pthread_mutex_unlock(&free_mu);
}

void iow_ofd_put(struct iow_ofd *o)
{
	if (iow_report_files)
		iow_rep_leave(o);
	ofd_unref(o);
}

/* tryget takes a ref unless o is free (refs 0). */
static int tryget(struct iow_ofd *o)
{
	long r = __atomic_load_n(&o->refs, __ATOMIC_ACQUIRE);
	while (r > 0) {
		if (__atomic_compare_exchange_n(&o->refs, &r, r + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return 1;
	}
	return 0;
}

/* ofd_ref is iow_ofd_get without the report's bookkeeping: for a ref
 * that outlives the call (a new slot's). */
static struct iow_ofd *ofd_ref(int fd)
{
	if ((unsigned)fd >= (unsigned)iow_tabsz)
		return NULL;
	for (;;) {
		struct iow_ofd *o = __atomic_load_n(&iow_tab[fd], __ATOMIC_ACQUIRE);
		if (!o)
			return NULL;
		if (tryget(o)) {
			/* A recycled ofd now in this very slot is the right one. */
			if (__atomic_load_n(&iow_tab[fd], __ATOMIC_ACQUIRE) == o)
				return o;
			ofd_unref(o);
		}
	}
}

struct iow_ofd *iow_ofd_get(int fd)
{
	struct iow_ofd *o = ofd_ref(fd);
	if (o && iow_report_files)
		iow_rep_enter(o);
	return o;
}

void iow_slot_set(int fd, struct iow_ofd *o)
{
	if ((unsigned)fd >= (unsigned)iow_tabsz) {
		if (o)
			ofd_unref(o);
		return;
	}
	if (o && iow_report_files)
		iow_rep_attach(o, fd);
	struct iow_ofd *old = __atomic_exchange_n(&iow_tab[fd], o, __ATOMIC_ACQ_REL);
	if (old)
		ofd_unref(old);
}

void iow_slot_clear(int fd)
{
	if ((unsigned)fd < (unsigned)iow_tabsz && __atomic_load_n(&iow_tab[fd], __ATOMIC_RELAXED))
		iow_slot_set(fd, NULL);
}

void iow_slot_dup(int oldfd, int newfd)
{
	struct iow_ofd *o = ofd_ref(oldfd); /* the new slot's ref */
	if (o || iow_maybe_ours(newfd))
		iow_slot_set(newfd, o);
}

void iow_slot_clear_range(unsigned first, unsigned last)
{
	unsigned n = (unsigned)iow_tabsz;
	if (last >= n)
		last = n ? n - 1 : 0;
	for (unsigned fd = first; fd <= last && fd < n; fd++)
		iow_slot_clear((int)fd);
}

/* A fork while another thread holds free_mu must not leave it locked in
 * the child. */
void iow_fdtable_atfork_prepare(void) { pthread_mutex_lock(&free_mu); }
void iow_fdtable_atfork_parent(void) { pthread_mutex_unlock(&free_mu); }
void iow_fdtable_atfork_child(void) { pthread_mutex_unlock(&free_mu); }
