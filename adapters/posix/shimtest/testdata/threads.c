/* threads.c DIR: 8 threads write disjoint 1 MiB regions of one file in
 * 4 KiB pwrites (and each its own file with write), then read and verify. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NT 8
#define REGION (1 << 20)
#define BS 4096
static int shared_fd;
static const char *dir;

static void fill(char *b, int t, long off)
{
	for (int i = 0; i < BS; i++)
		b[i] = (char)((t * 31 + off / BS + i) & 0xff);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	char b[BS], r[BS], p[4096];
	snprintf(p, sizeof p, "%s/thread%d.bin", dir, t);
	int own = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (own < 0)
		return (void *)1;
	for (long off = 0; off < REGION; off += BS) {
		fill(b, t, off);
		if (pwrite(shared_fd, b, BS, (long)t * REGION + off) != BS || write(own, b, BS) != BS)
			return (void *)2;
	}
	for (long off = 0; off < REGION; off += BS) {
		fill(b, t, off);
		if (pread(shared_fd, r, BS, (long)t * REGION + off) != BS || memcmp(b, r, BS) != 0)
			return (void *)3;
		if (pread(own, r, BS, off) != BS || memcmp(b, r, BS) != 0)
			return (void *)4;
	}
	close(own);
	return NULL;
}

int main(int argc, char **argv)
{
	char p[4096];
	dir = argv[1];
	snprintf(p, sizeof p, "%s/shared.bin", dir);
	shared_fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (shared_fd < 0)
		return 1;
	pthread_t th[NT];
	for (long i = 0; i < NT; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	int bad = 0;
	for (int i = 0; i < NT; i++) {
		void *r;
		pthread_join(th[i], &r);
		if (r)
			bad = (int)(long)r;
	}
	if (bad)
		return 10 + bad;
	printf("ok\n");
	return 0;
}
