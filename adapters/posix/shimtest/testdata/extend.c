/* extend: opens path O_WRONLY|O_CREAT|O_TRUNC and, for each line of
 * stdin, extends it: a number N appends N bytes of the next letter ('a',
 * 'b', ...) with write(2) in 1 MiB calls, checks the size fstat reports
 * (its own fd: the kernel's copy of the size, which it then holds for
 * every process) and prints "ok"; "sync" fsyncs and prints "synced". At
 * EOF it closes the file. */
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
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	static char buf[1 << 20];
	char line[64];
	int letter = 0;
	long total = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "sync", 4) == 0) {
			if (fsync(fd) != 0) {
				perror("fsync");
				return 1;
			}
			printf("synced\n");
			continue;
		}
		long n = atol(line);
		memset(buf, 'a' + letter++ % 26, sizeof buf);
		while (n > 0) {
			size_t k = n < (long)sizeof buf ? (size_t)n : sizeof buf;
			ssize_t w = write(fd, buf, k);
			if (w <= 0) {
				perror("write");
				return 1;
			}
			n -= w;
			total += w;
		}
		struct stat st;
		if (fstat(fd, &st) != 0 || st.st_size != total) {
			printf("fstat size %ld, want %ld\n", (long)st.st_size, total);
			return 1;
		}
		printf("ok\n");
	}
	return close(fd) != 0;
}
