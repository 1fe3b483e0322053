/* mpi.c: MPI-IO entry points. OpenMPI's ompio and ROMIO do their I/O with
 * libc calls, which posix.c already intercepts; these wrappers add the
 * whole-file points: the file name is redirected (IOWARP_PATHS),
 * MPI_File_sync is a durability point (ompio fsyncs its fds, which reach
 * the daemon's fsync), and MPI_File_close by every rank leaves the file
 * complete on the mount. The real functions are found with dlsym, so in a
 * program without libmpi nothing calls these. Handles are passed through
 * as opaque machine words: OpenMPI's are pointers, MPICH's ints, both in
 * integer registers. */
#include "shim.h"
#include <dlfcn.h>

#define MPI_ERR_OTHER_GUESS 16 /* OpenMPI's MPI_ERR_OTHER */

typedef int (*open_fn)(void *comm, const char *name, int amode, void *info, void *fh);
typedef int (*fh_fn)(void *fh);
typedef int (*size_fn)(void *fh, long long size);

static open_fn real_open;
static fh_fn real_close, real_sync;
static size_fn real_set_size;

static void *mpi_real(const char *name)
{
	IOW_ADD(mpi_calls, 1);
	return dlsym(RTLD_NEXT, name);
}

int MPI_File_open(void *comm, const char *name, int amode, void *info, void *fh)
{
	if (!real_open)
		real_open = (open_fn)mpi_real("MPI_File_open");
	else
		IOW_ADD(mpi_calls, 1);
	if (!real_open)
		return MPI_ERR_OTHER_GUESS;
	char buf[4096];
	return real_open(comm, iow_redirect(name, buf, sizeof buf), amode, info, fh);
}

int MPI_File_close(void *fh)
{
	if (!real_close)
		real_close = (fh_fn)mpi_real("MPI_File_close");
	else
		IOW_ADD(mpi_calls, 1);
	return real_close ? real_close(fh) : MPI_ERR_OTHER_GUESS;
}

int MPI_File_sync(void *fh)
{
	if (!real_sync)
		real_sync = (fh_fn)mpi_real("MPI_File_sync");
	else
		IOW_ADD(mpi_calls, 1);
	return real_sync ? real_sync(fh) : MPI_ERR_OTHER_GUESS;
}

int MPI_File_set_size(void *fh, long long size)
{
	if (!real_set_size)
		real_set_size = (size_fn)mpi_real("MPI_File_set_size");
	else
		IOW_ADD(mpi_calls, 1);
	return real_set_size ? real_set_size(fh, size) : MPI_ERR_OTHER_GUESS;
}
