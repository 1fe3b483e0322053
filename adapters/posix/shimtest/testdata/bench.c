/* bench.c FILE: 4 KiB pread and pwrite at random offsets in a 64 MiB file
 * and 1 MiB sequential read and write; prints one line per case:
 * "case ns_per_op MB_per_s". The file is written (and read once) first so
 * that every page is resident. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SIZE (64l << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report(const char *name, double secs, long ops, long bytes)
{
	printf("%-12s %9.0f ns/op %9.0f MB/s\n", name, secs / ops * 1e9, bytes / secs / 1e6);
}

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	memset(buf, 'x', sizeof buf);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 1;
	for (long off = 0; off < SIZE; off += sizeof buf)
		if (pwrite(fd, buf, sizeof buf, off) != sizeof buf)
			return 2;
	for (long off = 0; off < SIZE; off += sizeof buf)
		if (pread(fd, buf, sizeof buf, off) != sizeof buf)
			return 3;
	long n = argc > 2 ? atol(argv[2]) : 20000;
	unsigned seed = 1;
	double t = now();
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, 4096, (long)(rand_r(&seed) % (SIZE / 4096)) * 4096) != 4096)
			return 4;
	report("pread4k", now() - t, n, n * 4096);
	t = now();
	for (long i = 0; i < n; i++)
		if (pwrite(fd, buf, 4096, (long)(rand_r(&seed) % (SIZE / 4096)) * 4096) != 4096)
			return 5;
	report("pwrite4k", now() - t, n, n * 4096);
	int rounds = 4;
	t = now();
	for (int r = 0; r < rounds; r++)
		for (long off = 0; off < SIZE; off += sizeof buf)
			if (pread(fd, buf, sizeof buf, off) != sizeof buf)
				return 6;
	report("seqread1m", now() - t, rounds * (SIZE >> 20), rounds * SIZE);
	t = now();
	for (int r = 0; r < rounds; r++)
		for (long off = 0; off < SIZE; off += sizeof buf)
			if (pwrite(fd, buf, sizeof buf, off) != sizeof buf)
				return 7;
	report("seqwrite1m", now() - t, rounds * (SIZE >> 20), rounds * SIZE);
	close(fd);
	unlink(argv[1]);
	return 0;
}
