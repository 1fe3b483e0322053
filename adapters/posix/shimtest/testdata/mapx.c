/* mapx.c map|rw FILE [-]: shared maps across processes, both under the shim.
 *   map: map 64 KiB of FILE shared read-write, store 'X' into it (no
 *        msync), print "stored", wait for a line; print "ok" if the first
 *        4 KiB of the map now hold 'Y' (written by the other process),
 *        else "stale"; wait for a line, unmap, close.
 *   rw:  print "open", wait for a line (with "-", at once); pread 64 KiB
 *        at 0, print "X" if it holds the map's stores, else "stale"; then
 *        pwrite 4 KiB of 'Y' at 0. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { K = 64 << 10 };
static char buf[K];

static int all(const char *p, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return 0;
	return 1;
}

static void wait_line(void)
{
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		_exit(9);
}

int main(int argc, char **argv)
{
	int fd = open(argv[2], O_RDWR);
	if (fd < 0)
		return 1;
	if (strcmp(argv[1], "map") == 0) {
		char *m = mmap(NULL, K, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return 2;
		memset(m, 'X', K);
		printf("stored\n");
		fflush(stdout);
		wait_line();
		printf("%s\n", all(m, 'Y', 4096) && all(m + 4096, 'X', K - 4096) ? "ok" : "stale");
		fflush(stdout);
		wait_line();
		munmap(m, K);
		close(fd);
		return 0;
	}
	if (argc < 4) {
		printf("open\n");
		fflush(stdout);
		wait_line();
	}
	if (pread(fd, buf, K, 0) != K)
		return 3;
	printf("%s\n", all(buf, 'X', K) ? "X" : "stale");
	memset(buf, 'Y', 4096);
	if (pwrite(fd, buf, 4096, 0) != 4096)
		return 4;
	close(fd);
	return 0;
}
