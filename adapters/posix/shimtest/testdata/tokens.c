/* tokens.c RO RW: the grant socket checks the token against the caller.
 * Run as root without the shim (it plays the client by hand). */
#include "iowcap.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PT_SIZE (4096 + 2 * (1 << 17))
#define FAIL(code) do { printf("fail %d errno %d\n", code, errno); return code; } while (0)

/* in_child runs fn in a forked child (optionally as uid 65534) and
 * returns its exit status. */
static int in_child(int drop, int (*fn)(const struct cap *, int), const struct cap *c, int arg)
{
	pid_t p = fork();
	if (p == 0) {
		if (drop && (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0))
			_exit(90);
		_exit(fn(c, arg));
	}
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

/* replay presents the parent's token: refused (EPERM) in another process. */
static int replay(const struct cap *c, int unused)
{
	(void)unused;
	int fds[2];
	return ask_grant(c, 0, c->token, fds) == EPERM ? 0 : 1;
}

/* reopen tries to turn a read-only fd into a read-write one. */
static int reopen(const struct cap *c, int fd)
{
	(void)c;
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	return open(p, O_RDWR) < 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	int ro = open(argv[1], O_RDONLY), rw = open(argv[2], O_RDWR);
	if (ro < 0 || rw < 0)
		FAIL(1);
	struct cap c, w;
	if (get_cap(ro, &c) != 0 || get_cap(rw, &w) != 0 || !c.grant || c.endpoint[0] != '@')
		FAIL(2);
	int fds[2];
	/* The read-only open's token, for a write: refused. */
	if (ask_grant(&c, O_RDWR, c.token, fds) != EPERM)
		FAIL(3);
	/* Another open's token (read-write) for the read-only grant: refused. */
	if (ask_grant(&c, O_RDWR, w.token, fds) == 0)
		FAIL(4);
	/* A made-up grant id with a good token: refused. */
	struct cap bad = c;
	bad.grant ^= 2;
	if (ask_grant(&bad, O_RDONLY, c.token, fds) != ESTALE)
		FAIL(5);
	/* The same token from another process, same uid or another: refused. */
	if (in_child(0, replay, &c, 0) != 0)
		FAIL(6);
	if (in_child(1, replay, &c, 0) != 0)
		FAIL(7);
	/* Granted: read-only fds that cannot be mapped for writing. */
	if (ask_grant(&c, O_RDONLY, c.token, fds) != 0)
		FAIL(8);
	if (mmap(NULL, PT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0) != MAP_FAILED)
		FAIL(9);
	if (mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0) != MAP_FAILED)
		FAIL(10);
	void *m = mmap(NULL, PT_SIZE, PROT_READ, MAP_SHARED, fds[0], 0);
	if (m == MAP_FAILED || mprotect(m, 4096, PROT_READ | PROT_WRITE) == 0)
		FAIL(11);
	/* Another uid cannot reopen them read-write through /proc. */
	if (in_child(1, reopen, &c, fds[1]) != 0 || in_child(1, reopen, &c, fds[0]) != 0)
		FAIL(12);
	/* The read-write open gets writable maps. */
	int wf[2];
	if (ask_grant(&w, O_RDWR, w.token, wf) != 0)
		FAIL(13);
	if (mmap(NULL, PT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, wf[0], 0) == MAP_FAILED)
		FAIL(14);
	/* The table cannot be shrunk under the daemon's mapping. */
	if (ftruncate(wf[0], 0) == 0)
		FAIL(15);
	printf("ok\n");
	return 0;
}
