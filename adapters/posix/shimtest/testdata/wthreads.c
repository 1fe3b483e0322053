/* wthreads.c FILE: 8 threads pwrite disjoint 256 KiB ranges of FILE (which
 * exists, 2 MiB) in 4 KiB pieces, each byte a function of its offset,
 * then each reads its range back with pread and checks it. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

enum { T = 8, R = 256 << 10, B = 4096 };
static int fd;
static int bad;

static void *worker(void *arg)
{
	long t = (long)arg;
	char b[B];
	for (int round = 0; round < 4; round++)
		for (long off = t * R; off < (t + 1) * R; off += B) {
			for (int i = 0; i < B; i++)
				b[i] = (char)((off + i) * 13 + t + round);
			if (pwrite(fd, b, B, off) != B)
				__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		}
	for (long off = t * R; off < (t + 1) * R; off += B) {
		if (pread(fd, b, B, off) != B)
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < B; i++)
			if (b[i] != (char)((off + i) * 13 + t + 3))
				__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return 1;
	pthread_t th[T];
	for (long t = 0; t < T; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	for (int t = 0; t < T; t++)
		pthread_join(th[t], NULL);
	if (bad)
		return 2;
	close(fd);
	printf("ok\n");
	return 0;
}
