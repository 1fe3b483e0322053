/* coherence.c FILE N: through the shim, overwrite N bytes at 0 of FILE
 * (existing, at least N bytes) with 'S', print "written", wait for a line
 * on stdin (meanwhile another process reads and writes FILE without the
 * shim), then pread [N, 2N) and print it; then fsync. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t n = (size_t)atol(argv[2]);
	char *b = malloc(n);
	memset(b, 'S', n);
	int fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return 1;
	for (size_t off = 0; off < n; off += 4096)
		if (pwrite(fd, b + off, 4096, (off_t)off) != 4096)
			return 2;
	printf("written\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 3;
	if (pread(fd, b, n, (off_t)n) != (ssize_t)n)
		return 4;
	fwrite(b, 1, n, stdout);
	if (fsync(fd) != 0)
		return 5;
	close(fd);
	return 0;
}
