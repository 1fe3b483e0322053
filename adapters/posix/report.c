/* report.c: IOWARP_REPORT=1 prints one line per process at exit (to
 * stderr; IOWARP_REPORT=/path appends it to that file) with the calls
 * intercepted on our fds and the bytes each path carried.
 *
 * With a file, each file the process opened on the mount gets a line too
 * (iowarp-report-file): opens, calls, bytes by path (fast, kernel, ipc),
 * time spent in calls on it (read, write, other), and a histogram of
 * access sizes per direction (Darshan's bins). `iowarp report` sums them.
 *
 * A file's record is found at open (iow_rep_attach, from the fd table:
 * the path is /proc/self/fd/N's link) and hangs off the ofd. A call on
 * one of our ofds runs from iow_ofd_get to iow_ofd_put: that is a
 * section of the calling thread, timed with CLOCK_MONOTONIC, and the
 * counters added during it go to the file's record; the bytes it moved
 * are one access in the histogram. Counters added outside a section
 * (a vector call's kernel half, close, lseek) go to the thread's last
 * file. Records are never freed (files past MAX_FILES share the last
 * one, "(other files)"). A forked child starts with empty records, so a
 * file's lines sum the I/O of each process once. */
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct iow_counters iow_cnt;
int iow_report_files;

static const char *report_to;
static int report_fd = -1; /* IOWARP_REPORT=1: a dup of stderr (programs close 2 before exit) */
static int warned[8];

/* ---- per-file records ---------------------------------------------------- */

#define MAX_FILES 1024
#define REC_PATH 1024
#define NBINS 10 /* 0-100, 100-1K, 1K-10K, 10K-100K, 100K-1M, 1M-4M, 4M-10M, 10M-100M, 100M-1G, 1G+ */

enum { T_READ, T_WRITE, T_META };

struct iow_frec {
	struct iow_counters c;
	unsigned long ns[3];          /* time in calls: read, write, other */
	unsigned long rbins[NBINS], wbins[NBINS];
	unsigned long max_read, max_write; /* largest access */
	char path[REC_PATH];
};

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static struct iow_frec *recs; /* MAX_FILES + 1, anonymous memory */
static int nrecs;             /* guarded by rec_mu; the last slot is "(other files)" */

/* The calling thread's current section. */
static __thread struct {
	struct iow_ofd *o;    /* the ofd of the outermost call */
	struct iow_ofd *last; /* the last ofd a call was on */
	int depth;
	unsigned long t0, rbytes, wbytes;
} cur;

static unsigned long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_sec * 1000000000ul + (unsigned long)ts.tv_nsec;
}

static void rec_atfork_child(void)
{
	pthread_mutex_init(&rec_mu, NULL);
	if (recs) {
		for (int i = 0; i <= MAX_FILES; i++) {
			char keep[REC_PATH];
			memcpy(keep, recs[i].path, REC_PATH);
			memset(&recs[i], 0, sizeof recs[i]);
			memcpy(recs[i].path, keep, REC_PATH);
		}
	}
	cur.o = NULL;
	cur.depth = 0;
}
static void rec_atfork_prepare(void) { pthread_mutex_lock(&rec_mu); }
static void rec_atfork_parent(void) { pthread_mutex_unlock(&rec_mu); }

/* rec_find returns the record of path, creating it; the last record when
 * the table is full. Called with rec_mu held. */
static struct iow_frec *rec_find(const char *path)
{
	for (int i = 0; i < nrecs; i++)
		if (strcmp(recs[i].path, path) == 0)
			return &recs[i];
	if (nrecs == MAX_FILES)
		return &recs[MAX_FILES];
	struct iow_frec *r = &recs[nrecs++];
	snprintf(r->path, REC_PATH, "%s", path);
	return r;
}

void iow_rep_attach(struct iow_ofd *o, int fd)
{
	if (__atomic_load_n(&o->rep, __ATOMIC_ACQUIRE) || !recs)
		return; /* a dup: the description has its record */
	char link[64], path[REC_PATH];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	int e = errno;
	ssize_t n = readlink(link, path, sizeof path - 1);
	errno = e;
	if (n <= 0)
		return;
	path[n] = 0;
	for (char *p = path; *p; p++)
		if (*p == '\n')
			*p = '?'; /* a line per record */
	pthread_mutex_lock(&rec_mu);
	struct iow_frec *r = rec_find(path);
	pthread_mutex_unlock(&rec_mu);
	__atomic_fetch_add(&r->c.opens, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&o->rep, r, __ATOMIC_RELEASE);
}

void iow_rep_enter(struct iow_ofd *o)
{
	if (cur.depth++ > 0)
		return; /* a call inside a call (a signal handler): the outer one counts */
	cur.o = cur.last = o;
	cur.rbytes = cur.wbytes = 0;
	cur.t0 = now_ns();
}

static int bin_of(unsigned long n)
{
	static const unsigned long top[NBINS - 1] = {100, 1000, 10000, 100000, 1000000, 4000000,
						     10000000, 100000000, 1000000000};
	int b = 0;
	while (b < NBINS - 1 && n >= top[b])
		b++;
	return b;
}

#define ADD(f, v) __atomic_fetch_add(&(f), (unsigned long)(v), __ATOMIC_RELAXED)

static void note_max(unsigned long *m, unsigned long v)
{
	unsigned long old = __atomic_load_n(m, __ATOMIC_RELAXED);
	while (v > old && !__atomic_compare_exchange_n(m, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
	}
}

/* rec_access records one access of rbytes read and wbytes written. */
static void rec_access(struct iow_frec *r, unsigned long rbytes, unsigned long wbytes)
{
	if (rbytes) {
		ADD(r->rbins[bin_of(rbytes)], 1);
		note_max(&r->max_read, rbytes);
	}
	if (wbytes) {
		ADD(r->wbins[bin_of(wbytes)], 1);
		note_max(&r->max_write, wbytes);
	}
}

void iow_rep_leave(struct iow_ofd *o)
{
	(void)o;
	if (cur.depth == 0 || --cur.depth > 0)
		return; /* a ref no call took (munmap's), or a nested call */
	struct iow_frec *r = __atomic_load_n(&cur.o->rep, __ATOMIC_ACQUIRE);
	cur.o = NULL;
	if (!r)
		return;
	unsigned long dt = now_ns() - cur.t0;
	ADD(r->ns[cur.rbytes ? T_READ : cur.wbytes ? T_WRITE : T_META], dt);
	rec_access(r, cur.rbytes, cur.wbytes);
}

#define FIELD(f) offsetof(struct iow_counters, f)

void iow_rep_add(size_t field, unsigned long v)
{
	struct iow_ofd *o = cur.depth ? cur.o : cur.last;
	struct iow_frec *r = o ? __atomic_load_n(&o->rep, __ATOMIC_ACQUIRE) : NULL;
	if (!r)
		return;
	ADD(*(unsigned long *)((char *)&r->c + field), v);
	int rd = field >= FIELD(fast_read) && field <= FIELD(ipc_read);
	int wr = field >= FIELD(fast_write) && field <= FIELD(ipc_write);
	if (!rd && !wr)
		return;
	if (!cur.depth) {
		rec_access(r, rd ? v : 0, wr ? v : 0); /* outside a call: an access of its own */
		return;
	}
	if (rd)
		cur.rbytes += v;
	else
		cur.wbytes += v;
}

/* ---- process line and set-up --------------------------------------------- */

void iow_report_init(void)
{
	const char *r = getenv("IOWARP_REPORT");
	if (r && *r && strcmp(r, "0") != 0)
		report_to = r;
	if (report_to && strcmp(report_to, "1") == 0)
		report_fd = fcntl(2, F_DUPFD_CLOEXEC, 900);
	if (report_to && strcmp(report_to, "1") != 0) {
		void *p = mmap(NULL, (MAX_FILES + 1) * sizeof(struct iow_frec), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED) {
			recs = p;
			strcpy(recs[MAX_FILES].path, "(other files)");
			pthread_atfork(rec_atfork_prepare, rec_atfork_parent, rec_atfork_child);
			__atomic_store_n(&iow_report_files, 1, __ATOMIC_RELEASE);
		}
	}
}

void iow_warn_once(int which, const char *msg)
{
	if (which < 0 || which >= 8 || __atomic_exchange_n(&warned[which], 1, __ATOMIC_RELAXED))
		return;
	int e = errno;
	size_t n = strlen(msg);
	if (write(2, msg, n) < 0 || write(2, "\n", 1) < 0) {
	}
	errno = e;
}

#define LD(f) __atomic_load_n(&iow_cnt.f, __ATOMIC_RELAXED)
#define RL(f) __atomic_load_n(&r->f, __ATOMIC_RELAXED)

static int bins(char *out, size_t n, const unsigned long *b)
{
	int w = 0;
	for (int i = 0; i < NBINS && (size_t)w < n; i++)
		w += snprintf(out + w, n - (size_t)w, "%s%lu", i ? "," : "", __atomic_load_n(&b[i], __ATOMIC_RELAXED));
	return w;
}

/* file_line formats r's line into out (size n); 0 if r saw nothing. */
static int file_line(char *out, size_t n, const struct iow_frec *r)
{
	if (!RL(c.opens) && !RL(c.calls))
		return 0;
	char rb[256], wb[256];
	bins(rb, sizeof rb, r->rbins);
	bins(wb, sizeof wb, r->wbins);
	int w = snprintf(out, n,
			 "iowarp-report-file pid=%d opens=%lu calls=%lu fast_read=%lu fast_write=%lu "
			 "kernel_read=%lu kernel_write=%lu ipc_read=%lu ipc_write=%lu fast_hits=%lu fast_misses=%lu "
			 "read_ns=%lu write_ns=%lu meta_ns=%lu max_read=%lu max_write=%lu read_sizes=%s write_sizes=%s path=%s\n",
			 (int)getpid(), RL(c.opens), RL(c.calls), RL(c.fast_read), RL(c.fast_write), RL(c.kernel_read),
			 RL(c.kernel_write), RL(c.ipc_read), RL(c.ipc_write), RL(c.fast_hits), RL(c.fast_misses),
			 RL(ns[T_READ]), RL(ns[T_WRITE]), RL(ns[T_META]), RL(max_read), RL(max_write), rb, wb, r->path);
	return w > 0 && (size_t)w < n ? w : 0;
}

static void put_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

/* write_files appends the file lines, as few writes as fit in buf (each
 * ends at a line: O_APPEND keeps them whole among other processes'). */
static void write_files(int fd)
{
	static char buf[64 << 10];
	size_t used = 0;
	pthread_mutex_lock(&rec_mu);
	int n = nrecs;
	pthread_mutex_unlock(&rec_mu);
	for (int i = 0; i <= MAX_FILES; i++) {
		if (i >= n && i < MAX_FILES)
			continue;
		char line[REC_PATH + 1024];
		int w = file_line(line, sizeof line, &recs[i]);
		if (w == 0)
			continue;
		if (used + (size_t)w > sizeof buf) {
			put_all(fd, buf, used);
			used = 0;
		}
		memcpy(buf + used, line, (size_t)w);
		used += (size_t)w;
	}
	put_all(fd, buf, used);
}

__attribute__((destructor)) static void iow_report(void)
{
	if (!report_to)
		return;
	int e = errno;
	char line[768];
	int n = snprintf(line, sizeof line,
			 "iowarp-report pid=%d exe=%s child=%d opens=%lu calls=%lu "
			 "fast_read=%lu fast_write=%lu kernel_read=%lu kernel_write=%lu "
			 "ipc_read=%lu ipc_write=%lu ipc_lease=%lu "
			 "fast_hits=%lu fast_misses=%lu stdio=%lu mpi=%lu handshake_fail=%lu "
			 "statfs=%lu statfs_cached=%lu grants=%lu grants_skipped=%lu fstat_kernel=%lu fstat_cached=%lu\n",
			 (int)getpid(), program_invocation_short_name, iow_in_child, LD(opens), LD(calls),
			 LD(fast_read), LD(fast_write), LD(kernel_read), LD(kernel_write), LD(ipc_read), LD(ipc_write), LD(ipc_lease),
			 LD(fast_hits), LD(fast_misses), LD(stdio_streams), LD(mpi_calls), LD(handshake_fail),
			 LD(statfs_calls), LD(statfs_cached), LD(grants), LD(grants_skipped), LD(fstat_kernel), LD(fstat_cached));
	if (n <= 0)
		return;
	int fd = report_fd;
	if (strcmp(report_to, "1") != 0)
		fd = open(report_to, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		/* The file lines first: a reader that sees the process line
		 * has the whole process. */
		if (recs)
			write_files(fd);
		if (write(fd, line, (size_t)n) < 0) {
		}
		close(fd);
	}
	errno = e;
}
