/* fstatw FILE: opens FILE read-write and answers commands on stdin, one a
 * line: "s" prints the fd's fstat (size mode nlink mtime_ns ctime_ns ino
 * dev uid blksize type),
 * "w OFF N" writes N bytes of 'w' at OFF through the fd, "q" exits. For
 * TestFstatCoherent: the same program on tmpfs and, under the shim, on the
 * mount, while the test changes the file from other processes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void out(const char *s)
{
	size_t n = strlen(s);
	if (write(1, s, n) != (ssize_t)n)
		exit(3);
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	char line[256], buf[512];
	size_t have = 0;
	for (;;) {
		char *nl = memchr(line, '\n', have);
		if (!nl) {
			ssize_t r = read(0, line + have, sizeof line - 1 - have);
			if (r <= 0)
				return 0;
			have += (size_t)r;
			continue;
		}
		*nl = 0;
		if (line[0] == 'q')
			return 0;
		if (line[0] == 's') {
			struct stat st;
			if (fstat(fd, &st) != 0) {
				snprintf(buf, sizeof buf, "err %m\n");
			} else {
				snprintf(buf, sizeof buf, "size=%lld mode=%o nlink=%lu mtime=%lld ctime=%lld ino=%llu dev=%llu uid=%u blksize=%ld type=%o\n",
					 (long long)st.st_size, st.st_mode & 07777, (unsigned long)st.st_nlink,
					 (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
					 (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec,
					 (unsigned long long)st.st_ino, (unsigned long long)st.st_dev, st.st_uid,
					 (long)st.st_blksize, st.st_mode & S_IFMT);
			}
			out(buf);
		} else if (line[0] == 'w') {
			long long off = 0, n = 0;
			if (sscanf(line + 1, "%lld %lld", &off, &n) != 2 || n <= 0 || n > 1 << 20)
				return 2;
			char *b = malloc((size_t)n);
			memset(b, 'w', (size_t)n);
			if (pwrite(fd, b, (size_t)n, off) != n) {
				perror("pwrite");
				return 1;
			}
			free(b);
			out("ok\n");
		}
		size_t used = (size_t)(nl + 1 - line);
		memmove(line, nl + 1, have - used);
		have -= used;
	}
}
