/* stale.c FILE: the kernel's page cache against the fast path, on one fd
 * (issue 9, item 10). An extending pwrite of 256 KiB of 'A' (kernel path:
 * the page cache holds it), a pwrite of 64 KiB of 'B' at 64 KiB (fast
 * path), then every kernel door that reads the file must see 'B':
 * copy_file_range of it to 192 KiB, a shared map, sendfile to a pipe.
 * Then the other way: a store through a shared map, and the fast path's
 * pread after munmap sees it. With a second argument, only the three
 * steps. Prints "ok" or what differed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

enum { K = 64 << 10 };
static char buf[4 * K];

static int all(const char *p, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

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
	memset(buf, 'A', 4 * K);
	if (pwrite(fd, buf, 4 * K, 0) != 4 * K)
		return fail("pwrite A");
	memset(buf, 'B', K);
	if (pwrite(fd, buf, K, K) != K)
		return fail("pwrite B");
	off64_t in = K, out = 3 * K;
	if (copy_file_range(fd, &in, fd, &out, K, 0) != K)
		return fail("copy_file_range");
	if (pread(fd, buf, K, 3 * K) != K || !all(buf, 'B', K))
		return fail("copy_file_range copied the stale page cache");
	if (argc > 2) { /* the three steps only */
		close(fd);
		printf("ok\n");
		return 0;
	}
	char *m = mmap(NULL, 4 * K, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return fail("mmap");
	if (!all(m, 'A', K) || !all(m + K, 'B', K) || !all(m + 2 * K, 'A', K) || !all(m + 3 * K, 'B', K))
		return fail("mmap read the stale page cache");
	munmap(m, 4 * K);
	int p[2];
	if (pipe(p) != 0)
		return fail("pipe");
	off_t so = K;
	if (sendfile(p[1], fd, &so, K) != K || read(p[0], buf, K) != K || !all(buf, 'B', K))
		return fail("sendfile read the stale page cache");
	/* Stores through a shared map, then the fast path reads. */
	m = mmap(NULL, 4 * K, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return fail("mmap rw");
	memset(m + 2 * K, 'M', K);
	if (pread(fd, buf, K, 2 * K) != K || !all(buf, 'M', K))
		return fail("pread while mapped missed a store through the map");
	memset(buf, 'W', K);
	if (pwrite(fd, buf, K, 0) != K || !all(m, 'W', K))
		return fail("the map missed a pwrite made while mapped");
	munmap(m, 4 * K);
	if (pread(fd, buf, 4 * K, 0) != 4 * K || !all(buf, 'W', K) || !all(buf + K, 'B', K) || !all(buf + 2 * K, 'M', K) ||
	    !all(buf + 3 * K, 'B', K))
		return fail("pread after munmap missed the map's stores");
	/* A fast write after munmap, seen by a new map. */
	memset(buf, 'F', K);
	if (pwrite(fd, buf, K, 2 * K) != K)
		return fail("pwrite F");
	m = mmap(NULL, 4 * K, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || !all(m + 2 * K, 'F', K))
		return fail("a second map read the stale page cache");
	munmap(m, 4 * K);
	close(fd);
	printf("ok\n");
	return 0;
}
