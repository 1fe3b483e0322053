/* fork.c DIR: the parent opens a file, forks; the child writes through the
 * inherited fd without exec, and a file of its own; the parent reads both. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char p[4096], q[4096], buf[64] = {0};
	snprintf(p, sizeof p, "%s/forked.txt", argv[1]);
	snprintf(q, sizeof q, "%s/child.txt", argv[1]);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "parent ", 7) != 7)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		if (write(fd, "child\n", 6) != 6)
			_exit(2);
		int c = open(q, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (c < 0 || write(c, "own file\n", 9) != 9 || close(c) != 0)
			_exit(3);
		FILE *f = fopen(q, "a");
		if (!f || fprintf(f, "stdio in child\n") < 0 || fclose(f) != 0)
			_exit(4);
		exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return 10 + WEXITSTATUS(st);
	if (pread(fd, buf, 13, 0) != 13 || strcmp(buf, "parent child\n") != 0)
		return 20;
	close(fd);
	FILE *f = fopen(q, "r");
	char line[64];
	if (!f || !fgets(line, sizeof line, f) || strcmp(line, "own file\n") != 0)
		return 21;
	if (!fgets(line, sizeof line, f) || strcmp(line, "stdio in child\n") != 0)
		return 22;
	fclose(f);
	printf("ok\n");
	return 0;
}
