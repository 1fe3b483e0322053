/* stdio.c: FILE streams on our files are fopencookie streams whose
 * callbacks are the shim's read/write/lseek/close, so glibc's buffering,
 * fgets, fprintf, fscanf, fseek, ftell and fclose work unchanged (glibc's
 * own FILEs call its internal read/write, which no interposer sees). */
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

DECL_REAL(fopen);
DECL_REAL(fopen64);
DECL_REAL(freopen);
DECL_REAL(freopen64);
DECL_REAL(fdopen);
DECL_REAL(fclose);
DECL_REAL(fileno);
DECL_REAL(fileno_unlocked);

struct cookie {
	int fd;
	FILE *fp;
	struct cookie *next;
};

/* cookies lists our streams (for fileno and freopen); ncookies lets
 * fileno skip the lock when there are none. */
static pthread_mutex_t ck_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cookie *cookies;
static int ncookies;

static ssize_t ck_read(void *c, char *buf, size_t n)
{
	return iow_read(((struct cookie *)c)->fd, buf, n);
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	ssize_t r = iow_write(((struct cookie *)c)->fd, buf, n);
	return r < 0 ? 0 : r; /* fopencookie: 0 is the error return */
}

static int ck_seek(void *c, off64_t *pos, int whence)
{
	off_t r = iow_lseek(((struct cookie *)c)->fd, *pos, whence);
	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static void ck_unlink(struct cookie *ck)
{
	pthread_mutex_lock(&ck_mu);
	for (struct cookie **p = &cookies; *p; p = &(*p)->next) {
		if (*p == ck) {
			*p = ck->next;
			ncookies--;
			break;
		}
	}
	pthread_mutex_unlock(&ck_mu);
}

static int ck_close(void *c)
{
	struct cookie *ck = c;
	int r = iow_close(ck->fd);
	ck_unlink(ck);
	free(ck);
	return r;
}

static struct cookie *ck_find(FILE *fp)
{
	struct cookie *ck;
	pthread_mutex_lock(&ck_mu);
	for (ck = cookies; ck && ck->fp != fp; ck = ck->next)
		;
	pthread_mutex_unlock(&ck_mu);
	return ck;
}

int iow_cookie_fd(FILE *fp)
{
	if (!__atomic_load_n(&ncookies, __ATOMIC_RELAXED))
		return -1;
	struct cookie *ck = ck_find(fp);
	return ck ? ck->fd : -1;
}

FILE *iow_cookie_fopen(int fd, const char *mode)
{
	struct cookie *ck = calloc(1, sizeof(*ck));
	if (!ck)
		return NULL;
	ck->fd = fd;
	cookie_io_functions_t io = {ck_read, ck_write, ck_seek, ck_close};
	FILE *fp = fopencookie(ck, mode, io);
	if (!fp) {
		free(ck);
		return NULL;
	}
	ck->fp = fp;
	pthread_mutex_lock(&ck_mu);
	ck->next = cookies;
	cookies = ck;
	ncookies++;
	pthread_mutex_unlock(&ck_mu);
	IOW_ADD(stdio_streams, 1);
	return fp;
}

/* iow_mode_flags turns an fopen mode into open flags; *ok = 0 for modes
 * we leave to glibc (",ccs=" encodings). */
int iow_mode_flags(const char *mode, int *ok)
{
	int flags;
	*ok = 1;
	switch (mode[0]) {
	case 'r': flags = O_RDONLY; break;
	case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
	default: *ok = 0; return 0;
	}
	for (const char *p = mode + 1; *p && *p != ','; p++) {
		switch (*p) {
		case '+': flags = (flags & ~O_ACCMODE) | O_RDWR; break;
		case 'x': flags |= O_EXCL; break;
		case 'e': flags |= O_CLOEXEC; break;
		}
	}
	if (strchr(mode, ','))
		*ok = 0;
	return flags;
}

/* open_stream opens path and returns our stream if the file is ours, a
 * glibc stream on the same fd otherwise. */
static FILE *open_stream(const char *path, const char *mode, FILE *(*realfn)(const char *, const char *))
{
	int ok;
	int flags = iow_mode_flags(mode, &ok);
	if (!ok || !iow_tabsz) {
		char pbuf[4096];
		return realfn(iow_redirect(path, pbuf, sizeof pbuf), mode);
	}
	int fd = iow_open_flags(path, flags, 0666);
	if (fd < 0)
		return NULL;
	FILE *fp = iow_maybe_ours(fd) ? iow_cookie_fopen(fd, mode) : IOW_REAL(fdopen)(fd, mode);
	if (!fp) {
		int e = errno;
		iow_close(fd);
		errno = e;
	}
	return fp;
}

FILE *fopen(const char *path, const char *mode)
{
	return open_stream(path, mode, IOW_REAL(fopen));
}

FILE *fopen64(const char *path, const char *mode)
{
	return open_stream(path, mode, IOW_REAL(fopen64));
}

FILE *fdopen(int fd, const char *mode)
{
	if (iow_maybe_ours(fd))
		return iow_cookie_fopen(fd, mode);
	return IOW_REAL(fdopen)(fd, mode);
}

static FILE *reopen(const char *path, const char *mode, FILE *fp, FILE *(*realfn)(const char *, const char *, FILE *))
{
	struct cookie *ck = iow_cookie_fd(fp) >= 0 ? ck_find(fp) : NULL;
	if (!ck) {
		char pbuf[4096];
		FILE *r = realfn(path ? iow_redirect(path, pbuf, sizeof pbuf) : NULL, mode, fp);
		if (r) {
			/* glibc opened a new fd internally: never ours. */
			int fd = IOW_REAL(fileno)(r);
			if (fd >= 0)
				iow_slot_clear(fd);
		}
		return r;
	}
	/* Our stream: reopen the file underneath and keep the FILE. */
	fflush(fp);
	if (!path)
		return fp; /* mode change of the same file: the open stays */
	int ok;
	int flags = iow_mode_flags(mode, &ok);
	int fd = iow_open_flags(path, flags, 0666);
	if (fd < 0) {
		fclose(fp); /* freopen closes the stream on failure */
		return NULL;
	}
	iow_close(ck->fd);
	ck->fd = fd;
	clearerr(fp);
	fseeko(fp, 0, SEEK_CUR); /* drop the read buffer */
	return fp;
}

FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	return reopen(path, mode, fp, IOW_REAL(freopen));
}

FILE *freopen64(const char *path, const char *mode, FILE *fp)
{
	return reopen(path, mode, fp, IOW_REAL(freopen64));
}

/* fclose of a glibc stream closes its fd inside glibc: forget it. */
int fclose(FILE *fp)
{
	if (iow_cookie_fd(fp) >= 0)
		return IOW_REAL(fclose)(fp); /* ck_close does the bookkeeping */
	int fd = fp ? IOW_REAL(fileno)(fp) : -1;
	if (fd >= 0)
		iow_slot_clear(fd);
	return IOW_REAL(fclose)(fp);
}

int fileno(FILE *fp)
{
	int fd = iow_cookie_fd(fp);
	return fd >= 0 ? fd : IOW_REAL(fileno)(fp);
}

int fileno_unlocked(FILE *fp)
{
	int fd = iow_cookie_fd(fp);
	return fd >= 0 ? fd : IOW_REAL(fileno_unlocked)(fp);
}
