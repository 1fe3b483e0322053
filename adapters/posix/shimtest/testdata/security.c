/* security.c FILE: the handshake refuses a claimed pid that is not the
 * caller's; a write on an O_RDONLY fd of ours fails with EBADF. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct cap { uint32_t magic, version; uint8_t rest[248]; };
#define IOC _IOWR('W', 0x57, struct cap)

int main(int argc, char **argv)
{
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	struct cap c;
	memset(&c, 0, sizeof c);
	c.magic = 0x43574f49u;
	c.version = 2;
	uint32_t pid = (uint32_t)getpid();
	memcpy(c.rest + 16, &pid, 4); /* pid at offset 24 */
	if (ioctl(fd, IOC, &c) != 0)
		return 2; /* our own pid: granted */
	memcpy(&c, &(struct cap){0x43574f49u, 2, {0}}, 8);
	uint32_t other = 1;
	memcpy(c.rest + 16, &other, 4);
	if (ioctl(fd, IOC, &c) == 0 || errno != EPERM)
		return 3; /* somebody else's pid: refused */
	if (write(fd, "x", 1) != -1 || errno != EBADF)
		return 4;
	printf("ok\n");
	return 0;
}
