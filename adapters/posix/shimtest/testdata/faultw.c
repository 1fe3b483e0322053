/* faultw: the writer of the shimfault tests. Opens path O_RDWR|O_CREAT|
 * O_TRUNC and, for each line of stdin:
 *   "w N"       appends N bytes of the pattern with write(2) in calls of
 *               at most 1 MiB, checks the size fstat reports and prints
 *               "ok SIZE";
 *   "fsync"     fsync(2), prints "synced";
 *   "fdatasync" fdatasync(2), prints "synced";
 *   "loop"      prints "looping" and appends the pattern in 64 KiB + 1
 *               byte calls until it is killed (or a write fails);
 *   "fork"      forks a child that keeps the fd (and the maps the shim
 *               inherited) and waits in pause(2) to be killed, and
 *               prints "forked PID".
 * The byte at offset o is pat(o) (shimfault_helper_test.go has the same
 * function), so a reader can check any prefix of the file. At EOF it
 * closes the file and prints "closed". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static unsigned char pat(uint64_t o)
{
	return (unsigned char)(((uint32_t)o * 2654435761u) >> 24);
}

static char buf[1 << 20];

/* put appends n bytes at *off; 0 or -1 (perror done). */
static int put(int fd, uint64_t *off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)pat(*off + i);
	size_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, buf + done, n - done);
		if (w <= 0) {
			perror("write");
			return -1;
		}
		done += (size_t)w;
	}
	*off += n;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	char line[64];
	uint64_t off = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "fsync", 5) == 0 || strncmp(line, "fdatasync", 9) == 0) {
			int rc = line[1] == 's' ? fsync(fd) : fdatasync(fd);
			if (rc != 0) {
				perror("fsync");
				return 1;
			}
			printf("synced\n");
			continue;
		}
		if (strncmp(line, "fork", 4) == 0) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("fork");
				return 1;
			}
			if (pid == 0)
				for (;;)
					pause();
			printf("forked %d\n", (int)pid);
			continue;
		}
		if (strncmp(line, "loop", 4) == 0) {
			printf("looping\n");
			for (;;)
				if (put(fd, &off, (64 << 10) + 1) != 0)
					return 1;
		}
		if (line[0] != 'w')
			return 2;
		long n = atol(line + 1);
		while (n > 0) {
			size_t k = n < (long)sizeof buf ? (size_t)n : sizeof buf;
			if (put(fd, &off, k) != 0)
				return 1;
			n -= (long)k;
		}
		struct stat st;
		if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != off) {
			printf("fstat size %ld, want %lu\n", (long)st.st_size, (unsigned long)off);
			return 1;
		}
		printf("ok %lu\n", (unsigned long)off);
	}
	if (close(fd) != 0) {
		perror("close");
		return 1;
	}
	printf("closed\n");
	return 0;
}
