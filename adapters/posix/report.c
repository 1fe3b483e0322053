/* report.c: IOWARP_REPORT=1 prints one line per process at exit (to
 * stderr; IOWARP_REPORT=/path appends it to that file) with the calls
 * intercepted on our fds and the bytes each path carried. */
#include "shim.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct iow_counters iow_cnt;

static const char *report_to;
static int report_fd = -1; /* IOWARP_REPORT=1: a dup of stderr (programs close 2 before exit) */
static int warned[8];

void iow_report_init(void)
{
	const char *r = getenv("IOWARP_REPORT");
	if (r && *r && strcmp(r, "0") != 0)
		report_to = r;
	if (report_to && strcmp(report_to, "1") == 0)
		report_fd = fcntl(2, F_DUPFD_CLOEXEC, 900);
}

void iow_warn_once(int which, const char *msg)
{
	if (which < 0 || which >= 8 || __atomic_exchange_n(&warned[which], 1, __ATOMIC_RELAXED))
		return;
	int e = errno;
	size_t n = strlen(msg);
	if (write(2, msg, n) < 0 || write(2, "\n", 1) < 0) {
	}
	errno = e;
}

#define LD(f) __atomic_load_n(&iow_cnt.f, __ATOMIC_RELAXED)

__attribute__((destructor)) static void iow_report(void)
{
	if (!report_to)
		return;
	int e = errno;
	char line[512];
	int n = snprintf(line, sizeof line,
			 "iowarp-report pid=%d exe=%s child=%d opens=%lu calls=%lu "
			 "fast_read=%lu fast_write=%lu kernel_read=%lu kernel_write=%lu "
			 "ipc_read=%lu ipc_write=%lu ipc_lease=%lu "
			 "fast_hits=%lu fast_misses=%lu stdio=%lu mpi=%lu handshake_fail=%lu\n",
			 (int)getpid(), program_invocation_short_name, iow_in_child, LD(opens), LD(calls),
			 LD(fast_read), LD(fast_write), LD(kernel_read), LD(kernel_write), LD(ipc_read), LD(ipc_write), LD(ipc_lease),
			 LD(fast_hits), LD(fast_misses), LD(stdio_streams), LD(mpi_calls), LD(handshake_fail));
	if (n <= 0)
		return;
	int fd = report_fd;
	if (strcmp(report_to, "1") != 0)
		fd = open(report_to, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) < 0) {
		}
		close(fd);
	}
	errno = e;
}
