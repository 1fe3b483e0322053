/* ior.c: the access patterns of IOR (ior -a POSIX|MPIIO -t XFER -b BLOCK
 * [-F] [-e] [-C] [-w] [-r] [-W] -o FILE), for the benchmark of the mount
 * against tmpfs (scripts/bench.sh). IOR is not packaged here, so this is a
 * small reimplementation of what those options do, with one segment:
 *
 *   -F  file per process: rank r uses FILE.0000000r; else one shared file
 *       in which rank r owns bytes [r*BLOCK, (r+1)*BLOCK)
 *   -C  read back another rank's data: rank r reads what rank (r+1)%n wrote
 *   -e  fsync (MPI_File_sync) after the write phase, before close
 *   -W  verify every transfer read against the pattern of the rank that
 *       wrote it (a mismatch is an error: exit status 1)
 *   -k  keep the file(s) (else they are removed at the end)
 *   -w, -r  the write and read phases (neither: both)
 *
 * Each 8-byte word of a rank's data is key(seed, rank) + its file offset,
 * so a byte read from the wrong rank, offset or run is caught. A phase is
 * timed like IOR: from the first open to the last close across ranks
 * (MPI_Barrier before each phase); bandwidth = bytes of all ranks / that.
 * Filling a transfer with the pattern and checking it (-W) happen inside
 * the timed phase, as in IOR; both run on the 1 MiB buffer in cache.
 *
 * Output, one line per phase (parsed by scripts/bench.sh and the tests):
 *   ior op=write api=POSIX ranks=2 fpp=1 fsync=0 xfer=1048576
 *       block=536870912 bytes=1073741824 time_s=0.412 bw_mib=2485.4
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts {
	int mpiio, fpp, fsync, reorder, verify, keep, write, read;
	long long xfer, block;
	uint64_t seed;
	const char *path;
};

struct phase {
	MPI_File fh; /* MPIIO */
	int fd;	     /* POSIX */
};

static int rank, nranks;

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	va_list ap;
	int e = errno;
	fprintf(stderr, "ior: rank %d: ", rank);
	va_start(ap, fmt);
	errno = e;
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static long long parse_size(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end || v <= 0)
		die("bad size %s", s);
	return v;
}

static void usage(void)
{
	if (rank == 0)
		fprintf(stderr, "usage: ior [-a POSIX|MPIIO] [-t XFER] [-b BLOCK] [-F] [-e] [-C] [-W] [-k] [-w] [-r] [-s SEED] -o FILE\n");
	MPI_Finalize();
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	int c;
	*o = (struct opts){.xfer = 1 << 20, .block = 16 << 20, .seed = 1};
	while ((c = getopt(argc, argv, "a:t:b:FeCWkwrs:o:")) != -1) {
		switch (c) {
		case 'a':
			if (strcasecmp(optarg, "MPIIO") == 0)
				o->mpiio = 1;
			else if (strcasecmp(optarg, "POSIX") != 0)
				die("unknown api %s (POSIX or MPIIO)", optarg);
			break;
		case 't': o->xfer = parse_size(optarg); break;
		case 'b': o->block = parse_size(optarg); break;
		case 'F': o->fpp = 1; break;
		case 'e': o->fsync = 1; break;
		case 'C': o->reorder = 1; break;
		case 'W': o->verify = 1; break;
		case 'k': o->keep = 1; break;
		case 'w': o->write = 1; break;
		case 'r': o->read = 1; break;
		case 's': o->seed = strtoull(optarg, NULL, 10); break;
		case 'o': o->path = optarg; break;
		default: usage();
		}
	}
	if (!o->path || optind != argc)
		usage();
	if (o->xfer % 8 || o->block % o->xfer)
		die("%s", "the transfer size must be a multiple of 8 and divide the block size");
	if (!o->write && !o->read)
		o->write = o->read = 1;
}

static uint64_t key(uint64_t seed, int r)
{
	uint64_t z = seed * 0x9E3779B97F4A7C15ull + (uint64_t)r + 1; /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void fill(uint64_t *buf, size_t words, uint64_t k, uint64_t off)
{
	for (size_t i = 0; i < words; i++)
		buf[i] = k + off + 8 * i;
}

/* check returns the number of words of buf that differ from the pattern,
 * and prints the first one. */
static long long check(const uint64_t *buf, size_t words, uint64_t k, uint64_t off, const char *file)
{
	uint64_t bad = 0;
	for (size_t i = 0; i < words; i++)
		bad |= buf[i] ^ (k + off + 8 * i);
	if (!bad)
		return 0;
	long long n = 0;
	for (size_t i = 0; i < words; i++) {
		uint64_t want = k + off + 8 * i;
		if (buf[i] == want)
			continue;
		if (n++ == 0)
			fprintf(stderr, "ior: rank %d: verify: %s offset %" PRIu64 ": got 0x%016" PRIx64 ", want 0x%016" PRIx64 "\n",
				rank, file, off + 8 * i, buf[i], want);
	}
	return n;
}

static void file_name(const struct opts *o, int owner, char *out, size_t n)
{
	if (o->fpp)
		snprintf(out, n, "%s.%08d", o->path, owner);
	else
		snprintf(out, n, "%s", o->path);
}

static void open_file(const struct opts *o, const char *name, int writing, struct phase *p)
{
	if (o->mpiio) {
		int amode = writing ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
		MPI_Comm comm = o->fpp ? MPI_COMM_SELF : MPI_COMM_WORLD;
		if (MPI_File_open(comm, name, amode, MPI_INFO_NULL, &p->fh) != MPI_SUCCESS)
			die("MPI_File_open %s failed", name);
		return;
	}
	p->fd = writing ? open(name, O_WRONLY | O_CREAT, 0644) : open(name, O_RDONLY);
	if (p->fd < 0)
		die("open %s: %m", name);
}

static void xfer_at(const struct opts *o, struct phase *p, int writing, void *buf, long long off, const char *name)
{
	if (o->mpiio) {
		MPI_Status st;
		int count = 0, rc;
		if (writing)
			rc = MPI_File_write_at(p->fh, off, buf, (int)o->xfer, MPI_BYTE, &st);
		else
			rc = MPI_File_read_at(p->fh, off, buf, (int)o->xfer, MPI_BYTE, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		if (rc != MPI_SUCCESS || count != o->xfer)
			die("MPI_File_%s_at failed or short on %s", writing ? "write" : "read", name);
		return;
	}
	for (long long done = 0; done < o->xfer;) {
		ssize_t n = writing ? pwrite(p->fd, (char *)buf + done, o->xfer - done, off + done)
				    : pread(p->fd, (char *)buf + done, o->xfer - done, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("%s %s: %m", writing ? "pwrite" : "pread", name);
		if (n == 0)
			die("short read of %s (end of file)", name);
		done += n;
	}
}

static void close_file(const struct opts *o, struct phase *p, int writing, const char *name)
{
	if (o->mpiio) {
		if (writing && o->fsync && MPI_File_sync(p->fh) != MPI_SUCCESS)
			die("MPI_File_sync %s failed", name);
		if (MPI_File_close(&p->fh) != MPI_SUCCESS)
			die("MPI_File_close %s failed", name);
		return;
	}
	if (writing && o->fsync && fsync(p->fd) != 0)
		die("fsync %s: %m", name);
	if (close(p->fd) != 0)
		die("close %s: %m", name);
}

/* run_phase writes or reads BLOCK bytes of the rank whose data this rank
 * handles, and returns the number of words that failed verification. */
static long long run_phase(const struct opts *o, int writing, uint64_t *buf, double *t0, double *t1)
{
	int owner = writing || !o->reorder ? rank : (rank + 1) % nranks;
	char name[4096];
	struct phase p;
	long long bad = 0, base = o->fpp ? 0 : (long long)owner * o->block;
	uint64_t k = key(o->seed, owner);
	size_t words = (size_t)o->xfer / 8;

	file_name(o, owner, name, sizeof name);
	MPI_Barrier(MPI_COMM_WORLD);
	*t0 = MPI_Wtime();
	open_file(o, name, writing, &p);
	for (long long off = base; off < base + o->block; off += o->xfer) {
		if (writing)
			fill(buf, words, k, (uint64_t)off);
		xfer_at(o, &p, writing, buf, off, name);
		if (!writing && o->verify)
			bad += check(buf, words, k, (uint64_t)off, name);
	}
	close_file(o, &p, writing, name);
	*t1 = MPI_Wtime();
	return bad;
}

static long long phase(const struct opts *o, int writing, uint64_t *buf)
{
	double t0, t1, first, last;
	long long bad = run_phase(o, writing, buf, &t0, &t1), allbad;
	MPI_Allreduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	MPI_Allreduce(&bad, &allbad, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		double bytes = (double)o->block * nranks, t = last - first;
		printf("ior op=%s api=%s ranks=%d fpp=%d fsync=%d xfer=%lld block=%lld bytes=%.0f time_s=%.6f bw_mib=%.1f\n",
		       writing ? "write" : "read", o->mpiio ? "MPIIO" : "POSIX", nranks, o->fpp, writing && o->fsync,
		       o->xfer, o->block, bytes, t, t > 0 ? bytes / t / 1048576 : 0);
		if (allbad)
			fprintf(stderr, "ior: verify: %lld words differ from the pattern\n", allbad);
		fflush(stdout);
	}
	return allbad;
}

static void cleanup(const struct opts *o)
{
	char name[4096];
	MPI_Barrier(MPI_COMM_WORLD);
	if (o->keep || (!o->fpp && rank != 0))
		return;
	file_name(o, rank, name, sizeof name);
	if (unlink(name) != 0 && errno != ENOENT)
		fprintf(stderr, "ior: rank %d: unlink %s: %s\n", rank, name, strerror(errno));
}

int main(int argc, char **argv)
{
	struct opts o;
	long long bad = 0;
	void *buf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	parse(argc, argv, &o);
	if (posix_memalign(&buf, 4096, (size_t)o.xfer) != 0)
		die("%s", "out of memory");
	if (o.write)
		phase(&o, 1, buf);
	if (o.read)
		bad = phase(&o, 0, buf);
	cleanup(&o);
	free(buf);
	MPI_Finalize();
	return bad ? 1 : 0;
}
