/* mmap.c FILE: writes a file through write(2), then maps it and checks
 * every byte; then writes through the map and reads it back with pread. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	enum { N = 3 << 20 };
	static char b[N], r[4096];
	for (int i = 0; i < N; i++)
		b[i] = (char)(i * 7 + 3);
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, b, N) != N)
		return 1;
	char *m = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 2;
	if (memcmp(m, b, N) != 0)
		return 3;
	memset(m + 4096, 'M', 4096);
	if (msync(m, N, MS_SYNC) != 0)
		return 4;
	if (pread(fd, r, 4096, 4096) != 4096)
		return 5;
	for (int i = 0; i < 4096; i++)
		if (r[i] != 'M')
			return 6;
	munmap(m, N);
	close(fd);
	printf("ok\n");
	return 0;
}
