/* appendx FILE TAG N: N appends of one line "TAG i\n" padded to 100
 * bytes, with write(2) on an O_APPEND fd, then prints "ok". Several run
 * at once (with and without the shim): every line must land whole. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	int n = atoi(argv[3]);
	char line[100];
	for (int i = 0; i < n; i++) {
		memset(line, '.', sizeof line);
		int k = snprintf(line, sizeof line, "%s %d", argv[2], i);
		line[k] = '.';
		line[sizeof line - 1] = '\n';
		if (write(fd, line, sizeof line) != (ssize_t)sizeof line) {
			perror("write");
			return 1;
		}
	}
	close(fd);
	printf("ok\n");
	return 0;
}
