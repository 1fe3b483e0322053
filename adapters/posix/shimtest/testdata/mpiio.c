/* mpiio.c DIR: collective writes of every rank's blocks into one shared
 * file, plus one file per process; sync, close, reopen, read back, verify. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLK 65536
#define NB 8

int main(int argc, char **argv)
{
	int rank, size, bad = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	char path[4096], own[4096];
	snprintf(path, sizeof path, "%s/shared.dat", argv[1]);
	snprintf(own, sizeof own, "%s/rank%d.dat", argv[1], rank);
	char *b = malloc(BLK), *r = malloc(BLK);
	MPI_File fh;
	MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
	MPI_File_set_size(fh, 0);
	for (int i = 0; i < NB; i++) {
		memset(b, 'a' + (rank * NB + i) % 26, BLK);
		MPI_Offset off = ((MPI_Offset)i * size + rank) * BLK;
		MPI_File_write_at_all(fh, off, b, BLK, MPI_BYTE, MPI_STATUS_IGNORE);
	}
	MPI_File_sync(fh);
	MPI_File_close(&fh);
	MPI_File_open(MPI_COMM_SELF, own, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
	for (int i = 0; i < NB; i++) {
		memset(b, '0' + (rank + i) % 10, BLK);
		MPI_File_write_at(fh, (MPI_Offset)i * BLK, b, BLK, MPI_BYTE, MPI_STATUS_IGNORE);
	}
	MPI_File_close(&fh);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
	int peer = (rank + 1) % size;
	for (int i = 0; i < NB; i++) {
		MPI_Offset off = ((MPI_Offset)i * size + peer) * BLK;
		MPI_File_read_at_all(fh, off, r, BLK, MPI_BYTE, MPI_STATUS_IGNORE);
		memset(b, 'a' + (peer * NB + i) % 26, BLK);
		if (memcmp(b, r, BLK) != 0)
			bad = 1;
	}
	MPI_File_close(&fh);
	MPI_File_open(MPI_COMM_SELF, own, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
	for (int i = 0; i < NB; i++) {
		MPI_File_read_at(fh, (MPI_Offset)i * BLK, r, BLK, MPI_BYTE, MPI_STATUS_IGNORE);
		memset(b, '0' + (rank + i) % 10, BLK);
		if (memcmp(b, r, BLK) != 0)
			bad = 1;
	}
	MPI_File_close(&fh);
	int any;
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf(any ? "BAD\n" : "ok\n");
	MPI_Finalize();
	return any;
}
