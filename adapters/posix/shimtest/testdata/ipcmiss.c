/* ipcmiss.c: misses of the shim through runtime/ipc (run with IOWARP_IPC=1).
 *   ipcmiss write FILE OFF N   pwrite N bytes of '#' at OFF (inside the file,
 *                              pages not resident), then run a plain `cat FILE`
 *                              (LD_PRELOAD unset) to OUT=$IPCMISS_OUT while the
 *                              fd is open, then fsync and close.
 *   ipcmiss fork FILE          open O_RDWR, fork; the child preads 4 KiB at
 *                              1 MiB (not resident) and writes it to stdout; the
 *                              parent waits, then preads 4 KiB at 2 MiB (the
 *                              child's read staged its own page in) and prints it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[1 << 20];
	if (argc >= 5 && strcmp(argv[1], "write") == 0) {
		int fd = open(argv[2], O_RDWR);
		long off = atol(argv[3]), n = atol(argv[4]);
		if (fd < 0 || n > (long)sizeof buf)
			return 1;
		memset(buf, '#', (size_t)n);
		if (pwrite(fd, buf, (size_t)n, off) != n)
			return 2;
		char cmd[4096];
		snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD -u IOWARP_REPORT cat '%s' > '%s'", argv[2], getenv("IPCMISS_OUT"));
		if (system(cmd) != 0)
			return 3;
		if (fsync(fd) != 0 || close(fd) != 0)
			return 4;
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "fork") == 0) {
		int fd = open(argv[2], O_RDWR);
		if (fd < 0)
			return 1;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			if (pread(fd, buf, 4096, 1 << 20) != 4096 || write(1, buf, 4096) != 4096)
				_exit(2);
			exit(0); /* runs the shim's report */
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 3;
		if (pread(fd, buf, 4096, 2 << 20) != 4096 || write(1, buf, 4096) != 4096)
			return 4;
		return close(fd) != 0;
	}
	fprintf(stderr, "usage: ipcmiss write FILE OFF N | fork FILE\n");
	return 64;
}
