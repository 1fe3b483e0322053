/* paths.c: IOWARP_PATHS="/lustre/proj=/iowarp/proj:/old=/new" rewrites
 * path arguments under a source prefix (at a component boundary) to the
 * same path under its target, for the open, stat, access, mkdir, unlink,
 * rename and opendir families. Relative paths are left alone. */
#include "shim.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define MAX_MAPS 16

struct pmap {
	char *from, *to;
	size_t flen, tlen;
};

static struct pmap maps[MAX_MAPS];
static int nmaps;
int iow_paths_active;

static void trim_slash(char *s, size_t *n)
{
	while (*n > 1 && s[*n - 1] == '/')
		s[--*n] = 0;
}

void iow_paths_init(const char *spec)
{
	if (!spec || !*spec)
		return;
	char *dup = strdup(spec);
	if (!dup)
		return;
	char *save = NULL;
	for (char *tok = strtok_r(dup, ":", &save); tok && nmaps < MAX_MAPS; tok = strtok_r(NULL, ":", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq || tok[0] != '/' || eq[1] != '/')
			continue; /* both sides must be absolute */
		*eq = 0;
		struct pmap *m = &maps[nmaps++];
		m->from = tok;
		m->to = eq + 1;
		m->flen = strlen(m->from);
		m->tlen = strlen(m->to);
		trim_slash(m->from, &m->flen);
		trim_slash(m->to, &m->tlen);
	}
	iow_paths_active = nmaps > 0;
}

/* iow_redirect returns path, or its rewrite in buf. */
const char *iow_redirect(const char *path, char *buf, size_t bufsz)
{
	if (!iow_paths_active || !path || path[0] != '/')
		return path;
	for (int i = 0; i < nmaps; i++) {
		struct pmap *m = &maps[i];
		if (strncmp(path, m->from, m->flen) != 0)
			continue;
		const char *rest = path + m->flen;
		if (*rest != 0 && *rest != '/')
			continue; /* /lustre/projX is not under /lustre/proj */
		size_t rlen = strlen(rest);
		if (m->tlen + rlen + 1 > bufsz)
			return path;
		memcpy(buf, m->to, m->tlen);
		memcpy(buf + m->tlen, rest, rlen + 1);
		return buf;
	}
	return path;
}

#define RD(p) char rb_##p[4096]; p = iow_redirect(p, rb_##p, sizeof rb_##p)

DECL_REAL(stat);
DECL_REAL(lstat);
DECL_REAL(stat64);
DECL_REAL(lstat64);
DECL_REAL(fstatat);
DECL_REAL(fstatat64);
DECL_REAL(statx);
DECL_REAL(access);
DECL_REAL(faccessat);
DECL_REAL(euidaccess);
DECL_REAL(mkdir);
DECL_REAL(mkdirat);
DECL_REAL(rmdir);
DECL_REAL(unlink);
DECL_REAL(unlinkat);
DECL_REAL(rename);
DECL_REAL(renameat);
DECL_REAL(renameat2);
DECL_REAL(opendir);
DECL_REAL(truncate);
DECL_REAL(truncate64);
DECL_REAL(chdir);
DECL_REAL(chmod);
DECL_REAL(readlink);
DECL_REAL(utimensat);
DECL_REAL(link);
DECL_REAL(symlink);
DECL_REAL_T(__xstat, int (*)(int, const char *, struct stat *));
DECL_REAL_T(__lxstat, int (*)(int, const char *, struct stat *));
DECL_REAL_T(__xstat64, int (*)(int, const char *, struct stat64 *));
DECL_REAL_T(__lxstat64, int (*)(int, const char *, struct stat64 *));
DECL_REAL_T(__fxstatat, int (*)(int, int, const char *, struct stat *, int));
DECL_REAL_T(__fxstatat64, int (*)(int, int, const char *, struct stat64 *, int));

int stat(const char *p, struct stat *st) { RD(p); return IOW_REAL(stat)(p, st); }
int lstat(const char *p, struct stat *st) { RD(p); return IOW_REAL(lstat)(p, st); }
int stat64(const char *p, struct stat64 *st) { RD(p); return IOW_REAL(stat64)(p, st); }
int lstat64(const char *p, struct stat64 *st) { RD(p); return IOW_REAL(lstat64)(p, st); }
/* An fstat in disguise (empty path, AT_EMPTY_PATH) on an fd of ours: the
 * kernel is made to see the shared size first (posix.c, iow_ksync_fd). */
#define KS(d, p, fl) do { if (((fl) & AT_EMPTY_PATH) && !*(p)) iow_ksync_fd(d); } while (0)
int fstatat(int d, const char *p, struct stat *st, int fl) { KS(d, p, fl); RD(p); return IOW_REAL(fstatat)(d, p, st, fl); }
int fstatat64(int d, const char *p, struct stat64 *st, int fl) { KS(d, p, fl); RD(p); return IOW_REAL(fstatat64)(d, p, st, fl); }
int statx(int d, const char *p, int fl, unsigned mask, struct statx *st) { KS(d, p, fl); RD(p); return IOW_REAL(statx)(d, p, fl, mask, st); }
int __xstat(int v, const char *p, struct stat *st) { RD(p); return IOW_REAL(__xstat)(v, p, st); }
int __lxstat(int v, const char *p, struct stat *st) { RD(p); return IOW_REAL(__lxstat)(v, p, st); }
int __xstat64(int v, const char *p, struct stat64 *st) { RD(p); return IOW_REAL(__xstat64)(v, p, st); }
int __lxstat64(int v, const char *p, struct stat64 *st) { RD(p); return IOW_REAL(__lxstat64)(v, p, st); }
int __fxstatat(int v, int d, const char *p, struct stat *st, int fl) { RD(p); return IOW_REAL(__fxstatat)(v, d, p, st, fl); }
int __fxstatat64(int v, int d, const char *p, struct stat64 *st, int fl) { RD(p); return IOW_REAL(__fxstatat64)(v, d, p, st, fl); }
int access(const char *p, int m) { RD(p); return IOW_REAL(access)(p, m); }
int faccessat(int d, const char *p, int m, int fl) { RD(p); return IOW_REAL(faccessat)(d, p, m, fl); }
int euidaccess(const char *p, int m) { RD(p); return IOW_REAL(euidaccess)(p, m); }
int eaccess(const char *p, int m) { RD(p); return IOW_REAL(euidaccess)(p, m); }
int mkdir(const char *p, mode_t m) { RD(p); return IOW_REAL(mkdir)(p, m); }
int mkdirat(int d, const char *p, mode_t m) { RD(p); return IOW_REAL(mkdirat)(d, p, m); }
int rmdir(const char *p) { RD(p); return IOW_REAL(rmdir)(p); }
int unlink(const char *p) { RD(p); return IOW_REAL(unlink)(p); }
int unlinkat(int d, const char *p, int fl) { RD(p); return IOW_REAL(unlinkat)(d, p, fl); }
int rename(const char *a, const char *b) { RD(a); RD(b); return IOW_REAL(rename)(a, b); }
int renameat(int da, const char *a, int db, const char *b) { RD(a); RD(b); return IOW_REAL(renameat)(da, a, db, b); }
int renameat2(int da, const char *a, int db, const char *b, unsigned fl) { RD(a); RD(b); return IOW_REAL(renameat2)(da, a, db, b, fl); }
DIR *opendir(const char *p) { RD(p); return IOW_REAL(opendir)(p); }
int truncate(const char *p, off_t n) { RD(p); return IOW_REAL(truncate)(p, n); }
int truncate64(const char *p, off64_t n) { RD(p); return IOW_REAL(truncate64)(p, n); }
int chdir(const char *p) { RD(p); return IOW_REAL(chdir)(p); }
int chmod(const char *p, mode_t m) { RD(p); return IOW_REAL(chmod)(p, m); }
ssize_t readlink(const char *p, char *b, size_t n) { RD(p); return IOW_REAL(readlink)(p, b, n); }
/* -D_FORTIFY_SOURCE turns readlink into this; glibc's calls its internal
 * readlink, past the redirection. */
extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __readlink_chk(const char *p, char *b, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	RD(p);
	return IOW_REAL(readlink)(p, b, n);
}
int utimensat(int d, const char *p, const struct timespec t[2], int fl) { RD(p); return IOW_REAL(utimensat)(d, p, t, fl); }
int link(const char *a, const char *b) { RD(a); RD(b); return IOW_REAL(link)(a, b); }
int symlink(const char *target, const char *p) { RD(p); return IOW_REAL(symlink)(target, p); }
