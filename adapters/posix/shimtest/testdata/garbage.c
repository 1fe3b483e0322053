/* garbage.c A B: a hostile client. It gets the read-write maps of A and
 * the read-only maps of B by hand, scribbles random bytes over all of A's
 * page table and segment (writers, seq, size, flags, bitmaps, data),
 * tries to write B's, tries to shrink A's segment (sealed: refused), then
 * prints "scribbled" and
 * keeps its maps until stdin closes. */
#include "iowcap.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define PT_SIZE (4096 + 2 * (1 << 17))

int main(int argc, char **argv)
{
	int a = open(argv[1], O_RDWR), b = open(argv[2], O_RDONLY);
	struct cap ca, cb;
	int fa[2], fb[2];
	if (a < 0 || b < 0 || get_cap(a, &ca) || get_cap(b, &cb))
		return 1;
	if (ask_grant(&ca, O_RDWR, ca.token, fa) || ask_grant(&cb, O_RDONLY, cb.token, fb))
		return 2;
	unsigned char *pt = mmap(NULL, PT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fa[0], 0);
	unsigned char *d = mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fa[1], 0);
	if (pt == MAP_FAILED || d == MAP_FAILED)
		return 3;
	if (mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fb[1], 0) != MAP_FAILED ||
	    mmap(NULL, PT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fb[0], 0) != MAP_FAILED)
		return 4;
	srand(7);
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < PT_SIZE; i++)
			pt[i] = (unsigned char)rand();
		for (size_t i = 0; i < (2 << 20); i += 61)
			d[i] = (unsigned char)rand();
		usleep(1000);
	}
	/* writers stays garbage (non-zero): the daemon must not wait forever. */
	*(int64_t *)(pt + 64) = 12345;
	if (ftruncate(fa[0], 0) == 0)
		return 5;
	if (ftruncate(fa[1], 4096) == 0) /* sealed: a mapped segment never shrinks */
		return 6;
	printf("scribbled\n");
	fflush(stdout);
	char line[8];
	fgets(line, sizeof line, stdin);
	return 0;
}
