/* iowcap.h: the shim's handshake and grant request, done by hand, for
 * tests that play a hostile or curious client (layouts: fusefs/shim.go,
 * fusefs/grant.go). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct cap {
	uint32_t magic, version;
	uint64_t ino, page_size;
	uint32_t pid, uid, accmode, flags;
	uint8_t token[32];
	char endpoint[108];
	uint32_t daemon_pid;
	int32_t data_fd, table_fd;
	uint32_t pad0, pad1;
	uint64_t grant;
	uint8_t pad[48];
};
#define IOC _IOWR('W', 0x57, struct cap)

static int get_cap(int fd, struct cap *c)
{
	memset(c, 0, sizeof *c);
	c->magic = 0x43574f49u;
	c->version = 2;
	c->pid = (uint32_t)getpid();
	return ioctl(fd, IOC, c);
}

/* ask_grant returns the daemon's status (0 = granted, else an errno, -1 =
 * no answer) and, when granted, the two fds. */
static int ask_grant(const struct cap *c, uint32_t acc, const uint8_t *token, int fds[2])
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = strnlen(c->endpoint, sizeof c->endpoint);
	memcpy(a.sun_path + 1, c->endpoint + 1, n - 1);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0)
		return -1;
	uint8_t req[64] = {0};
	uint32_t magic = 0x47574f49u, ver = 1;
	memcpy(req, &magic, 4);
	memcpy(req + 4, &ver, 4);
	memcpy(req + 8, &c->grant, 8);
	memcpy(req + 16, &c->ino, 8);
	memcpy(req + 24, &acc, 4);
	memcpy(req + 32, token, 32);
	if (send(s, req, sizeof req, 0) != (ssize_t)sizeof req)
		return -1;
	int32_t st[2] = {-1, 0};
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = {st, sizeof st};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t r = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	if (r < 4)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (st[0] == 0 && cm && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fds, CMSG_DATA(cm), 2 * sizeof(int));
	return st[0];
}
