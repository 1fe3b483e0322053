// rw writes a file, syncs it and reads it back with raw libc calls, and
// prints how many read and write calls it made on the file and the bytes
// they moved (a 0-byte read at the end of the file is a call too), for
// the tracer's tests to compare with the trace. Built with -static, no
// libc call of it reaches the kernel other than as a system call, and
// the LD_PRELOAD shim cannot enter it.
//
// On argv[1]: 1000 writes of 123 bytes, 7 pwrites of 4096 at offset
// 1 MiB + i x 8192, 3 fsyncs, a pread of 5000 at 0; then, reopened, reads
// of 64 KiB to the end.
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static long long writes, written, reads, nread;

static int counted(ssize_t n, long long *calls, long long *bytes) {
	(*calls)++;
	if (n > 0)
		*bytes += n;
	return n;
}

int main(int argc, char **argv) {
	static char buf[65536];
	memset(buf, 'x', sizeof buf);
	int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		return 1;
	for (int i = 0; i < 1000; i++)
		if (counted(write(fd, buf, 123), &writes, &written) != 123)
			return 2;
	for (int i = 0; i < 7; i++)
		if (counted(pwrite(fd, buf, 4096, (1 << 20) + i * 8192), &writes, &written) != 4096)
			return 3;
	for (int i = 0; i < 3; i++)
		if (fsync(fd))
			return 4;
	if (counted(pread(fd, buf, 5000, 0), &reads, &nread) != 5000)
		return 5;
	close(fd);
	if ((fd = open(argv[1], O_RDONLY)) < 0)
		return 6;
	ssize_t n;
	while ((n = counted(read(fd, buf, sizeof buf), &reads, &nread)) > 0)
		;
	if (n < 0)
		return 7;
	close(fd);
	printf("writes %lld bytes %lld reads %lld bytes %lld\n", writes, written, reads, nread);
	return 0;
}
