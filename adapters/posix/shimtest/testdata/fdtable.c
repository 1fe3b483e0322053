/* fdtable.c DIR OTHER: the shim's fd table stays exact. Each step writes
 * through an fd number that was ours and is now another file (or the
 * reverse); the files' contents prove where each byte went. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int must(int v, int code)
{
	if (v < 0) {
		perror("step");
		exit(code);
	}
	return v;
}

int main(int argc, char **argv)
{
	char a[4096], o[4096], buf[64] = {0};
	snprintf(a, sizeof a, "%s/ours.txt", argv[1]);
	snprintf(o, sizeof o, "%s/other.txt", argv[2]);
	int ours = must(open(a, O_RDWR | O_CREAT | O_TRUNC, 0644), 1);
	int other = must(open(o, O_RDWR | O_CREAT | O_TRUNC, 0644), 2);
	/* dup2 of a plain fd onto ours: the number is no longer ours. */
	int keep = must(dup(ours), 3);
	must(dup2(other, ours), 4);
	must(write(ours, "to-other\n", 9), 5);
	/* F_DUPFD of ours: the copy is ours and shares the offset. */
	int d = must(fcntl(keep, F_DUPFD_CLOEXEC, 100), 6);
	must(write(keep, "A", 1), 7);
	must(write(d, "B", 1), 8);
	/* O_APPEND through F_SETFL on one dup is seen by the other. */
	must(fcntl(d, F_SETFL, O_APPEND), 9);
	must(lseek(keep, 0, SEEK_SET), 10);
	must(write(keep, "C\n", 2), 11);
	/* close_range closes ours; a new plain fd may get its number. */
	must(close_range(d, d, 0), 12);
	int pipefd[2];
	must(pipe(pipefd), 13);
	/* dup3 of ours onto a fresh number, then close the original. */
	int e = must(dup3(keep, 200, O_CLOEXEC), 14);
	must(close(keep), 15);
	must(fcntl(e, F_SETFL, 0), 23); /* Linux pwrite appends under O_APPEND */
	must(pwrite(e, "Z", 1, 0), 16);
	close(e);
	/* fdopen and fileno on ours. */
	int f = must(open(a, O_RDONLY), 17);
	FILE *fp = fdopen(f, "r");
	if (!fp || fileno(fp) != f)
		return 18;
	if (!fgets(buf, sizeof buf, fp) || strcmp(buf, "ZBC\n") != 0) {
		fprintf(stderr, "ours: %s", buf);
		return 19;
	}
	fclose(fp);
	/* The fd number f is free again: a plain open reusing it is not ours. */
	int g = must(open(o, O_RDONLY), 20);
	memset(buf, 0, sizeof buf);
	must(read(g, buf, sizeof buf - 1), 21);
	if (strcmp(buf, "to-other\n") != 0)
		return 22;
	printf("ok\n");
	return 0;
}
