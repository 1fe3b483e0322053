/* fortify.c FILE N [overflow]: built with -O2 -D_FORTIFY_SOURCE=2 (the test
 * checks that it calls __read_chk, __pread_chk, __pread64_chk,
 * __fread_chk and __readlink_chk). FILE holds 1 MiB of byte(i*7+3)
 * (written through FUSE). With FORTIFY_LINK set it first prints
 * "link TARGET" of that symlink (a path IOWARP_PATHS redirects). It reads
 * FILE with
 * read, pread and fread, writes 64 KiB of 'F' at 128 KiB with pwrite and
 * reads it back, N bytes a call (65536: its buffer; a length it cannot
 * know at compile time, so the calls are the _chk ones); prints "ok".
 * With a third argument it reads N bytes anyway: past the buffer when N
 * is larger, and the fortified check must abort the program. The open
 * must leave errno as it was. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char buf[65536];

static int check(const char *b, size_t n, size_t off)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != (char)((off + i) * 7 + 3))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 1;
	size_t n = strtoul(argv[2], NULL, 10);
	const char *link = getenv("FORTIFY_LINK");
	if (link) {
		ssize_t l = readlink(link, buf, n);
		if (l < 0)
			return 9;
		printf("link %.*s\n", (int)l, buf);
	}
	errno = EDOM;
	int fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return 1;
	if (errno != EDOM) { /* a successful open leaves errno alone */
		printf("errno %d after open\n", errno);
		return 10;
	}
	if (argc > 3) {
		if (read(fd, buf, n) >= 0)
			printf("overflow not caught\n");
		return 2;
	}
	for (size_t off = 0; off < (1 << 20); off += n)
		if (read(fd, buf, n) != (ssize_t)n || !check(buf, n, off))
			return 3;
	if (pread(fd, buf, n, 512 << 10) != (ssize_t)n || !check(buf, n, 512 << 10))
		return 4;
	memset(buf, 'F', n);
	if (pwrite(fd, buf, n, 128 << 10) != (ssize_t)n)
		return 5;
	memset(buf, 0, n);
	if (pread64(fd, buf, n, 128 << 10) != (ssize_t)n)
		return 6;
	for (size_t i = 0; i < n; i++)
		if (buf[i] != 'F')
			return 7;
	FILE *fp = fopen(argv[1], "r");
	if (!fp || fread(buf, 1, n, fp) != n || !check(buf, n, 0))
		return 8;
	fclose(fp);
	close(fd);
	printf("ok\n");
	return 0;
}
