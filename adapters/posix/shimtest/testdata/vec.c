/* vec FILE: vector calls on a new file: writev at the offset, pwritev and
 * pwritev2 (flags 0, offset -1: at the offset) past it, then readv,
 * preadv and preadv2 read every byte back; the file offset moves as the
 * kernel's would. Prints "ok" or what differed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

enum { K = 100000 };
static char a[K], b[K], c[K], r1[K], r2[K], r3[K];

static int fail(const char *what)
{
	printf("%s\n", what);
	return 1;
}

int main(int argc, char **argv)
{
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return fail("open");
	memset(a, 'a', K), memset(b, 'b', K), memset(c, 'c', K);
	struct iovec w[3] = {{a, K}, {b, K}, {c, K}};
	if (writev(fd, w, 3) != 3 * K || lseek(fd, 0, SEEK_CUR) != 3 * K)
		return fail("writev");
	if (pwritev(fd, w + 1, 2, 3 * K) != 2 * K || lseek(fd, 0, SEEK_CUR) != 3 * K)
		return fail("pwritev");
	lseek(fd, 5 * K, SEEK_SET);
	if (pwritev2(fd, w, 1, -1, 0) != K || lseek(fd, 0, SEEK_CUR) != 6 * K)
		return fail("pwritev2");
	lseek(fd, 0, SEEK_SET);
	struct iovec r[3] = {{r1, K}, {r2, K}, {r3, K}};
	if (readv(fd, r, 3) != 3 * K || memcmp(r1, a, K) || memcmp(r2, b, K) || memcmp(r3, c, K))
		return fail("readv");
	if (preadv(fd, r, 3, 3 * K) != 3 * K || memcmp(r1, b, K) || memcmp(r2, c, K) || memcmp(r3, a, K))
		return fail("preadv");
	if (preadv2(fd, r, 2, -1, 0) != 2 * K || memcmp(r1, b, K) || memcmp(r2, c, K) || lseek(fd, 0, SEEK_CUR) != 5 * K)
		return fail("preadv2");
	if (preadv2(fd, r, 3, 5 * K, 0) != K || memcmp(r1, a, K))
		return fail("preadv2 at EOF");
	close(fd);
	printf("ok\n");
	return 0;
}
