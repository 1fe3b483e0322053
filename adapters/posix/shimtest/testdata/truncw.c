/* truncw: opens path O_RDWR|O_CREAT|O_TRUNC and runs one command per line
 * of stdin, printing "ok" after each (or what went wrong, and exits 1):
 *   w N  writes N bytes of the next letter ('a', 'b', ...) at the end of
 *        the file (lseek SEEK_END, then write(2) in 1 MiB calls);
 *   t N  ftruncate(fd, N);
 *   s    fsync.
 * After each it checks that fstat and lseek(SEEK_END) report the size it
 * expects. At EOF it closes the file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	static char buf[1 << 20];
	char line[64];
	int letter = 0;
	long size = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		long n = atol(line + 1);
		if (line[0] == 'w') {
			if (lseek(fd, 0, SEEK_END) != size) {
				printf("lseek(SEEK_END) before a write: want %ld\n", size);
				return 1;
			}
			memset(buf, 'a' + letter++ % 26, sizeof buf);
			for (long left = n; left > 0;) {
				size_t k = left < (long)sizeof buf ? (size_t)left : sizeof buf;
				ssize_t w = write(fd, buf, k);
				if (w <= 0) {
					perror("write");
					return 1;
				}
				left -= w;
			}
			size += n;
		} else if (line[0] == 't') {
			if (ftruncate(fd, n) != 0) {
				perror("ftruncate");
				return 1;
			}
			size = n;
		} else if (line[0] == 's') {
			if (fsync(fd) != 0) {
				perror("fsync");
				return 1;
			}
		}
		struct stat st;
		if (fstat(fd, &st) != 0 || st.st_size != size) {
			printf("fstat size %ld, want %ld\n", (long)st.st_size, size);
			return 1;
		}
		if (lseek(fd, 0, SEEK_END) != size) {
			printf("lseek(SEEK_END) want %ld\n", size);
			return 1;
		}
		printf("ok\n");
	}
	return close(fd) != 0;
}
