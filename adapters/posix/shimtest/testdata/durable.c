/* durable.c FILE N: through the shim, overwrite N bytes at 0 of FILE with
 * 'D' in 4 KiB pwrites, fsync, print "synced" (the caller then kills the
 * daemon with SIGKILL). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = atol(argv[2]);
	char b[4096];
	memset(b, 'D', sizeof b);
	int fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return 1;
	for (long off = 0; off < n; off += 4096)
		if (pwrite(fd, b, 4096, off) != 4096)
			return 2;
	if (fsync(fd) != 0)
		return 3;
	printf("synced\n");
	fflush(stdout);
	return 0;
}
