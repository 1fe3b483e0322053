/* benchmiss.c FILE: cold 4 KiB preads of FILE (64 MiB, written to the
 * backing store directly, so no page is resident in the pool): one read
 * at a random offset inside each 1 MiB pool page, pages in random order,
 * so every read is a miss that stages a page in. Prints
 * "miss4k ns_per_op". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SIZE (64l << 20)
#define PAGE (1l << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	static char buf[4096];
	long pages[SIZE / PAGE];
	unsigned seed = 7;
	int fd = argc > 1 ? open(argv[1], O_RDONLY) : -1;
	if (fd < 0)
		return 1;
	long n = SIZE / PAGE;
	for (long i = 0; i < n; i++)
		pages[i] = i;
	for (long i = n - 1; i > 0; i--) {
		long j = rand_r(&seed) % (i + 1), t = pages[i];
		pages[i] = pages[j], pages[j] = t;
	}
	double t = now();
	for (long i = 0; i < n; i++)
		if (pread(fd, buf, sizeof buf, pages[i] * PAGE + (rand_r(&seed) % (PAGE / 4096)) * 4096) != sizeof buf)
			return 2;
	printf("%-12s %9.0f ns/op\n", "miss4k", (now() - t) / n * 1e9);
	return 0;
}
