/* mdtest.c: the file metadata phases of mdtest (mdtest -n N -d DIR
 * [-z DEPTH -b BRANCH] [-u] [-w BYTES] [-C] [-T] [-r]), for the benchmark
 * of the mount against tmpfs (scripts/bench.sh). mdtest is not packaged
 * here, so this is a small reimplementation of what those options do:
 *
 *   -n N      files per rank
 *   -z, -b    a directory tree of DEPTH levels below the root with BRANCH
 *             subdirectories each; files go to the leaves, round-robin
 *             (-z 0, the default: every file in one directory)
 *   -u        a tree per rank (else one tree shared by all ranks; file
 *             names carry the rank, so no two ranks touch one file)
 *   -w BYTES  write BYTES into each file when it is created; stat then
 *             checks the size
 *   -C, -T, -r  only the create, stat or remove phase (several may be
 *             given; none: all three, and the tree is made and removed)
 *
 * A phase is timed from the barrier before it to the last rank's end;
 * its rate is the items of all ranks / that time. stat checks that each
 * file is a regular file of BYTES bytes; any failed call or check makes
 * the exit status 1.
 *
 * Output, one line per phase (parsed by scripts/bench.sh and the tests):
 *   mdtest phase=create ranks=2 depth=0 branch=0 items=20000 time_s=0.81 ops_s=24691.4
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct opts {
	long n, bytes;
	int depth, branch, unique, create, stat, remove;
	const char *dir;
};

static int rank, nranks;
static long errors;

static void usage(void)
{
	if (rank == 0)
		fprintf(stderr, "usage: mdtest -d DIR [-n N] [-z DEPTH -b BRANCH] [-u] [-w BYTES] [-C] [-T] [-r]\n");
	MPI_Finalize();
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	int c;
	*o = (struct opts){.n = 1000, .branch = 1};
	while ((c = getopt(argc, argv, "n:d:z:b:uw:CTr")) != -1) {
		switch (c) {
		case 'n': o->n = atol(optarg); break;
		case 'd': o->dir = optarg; break;
		case 'z': o->depth = atoi(optarg); break;
		case 'b': o->branch = atoi(optarg); break;
		case 'u': o->unique = 1; break;
		case 'w': o->bytes = atol(optarg); break;
		case 'C': o->create = 1; break;
		case 'T': o->stat = 1; break;
		case 'r': o->remove = 1; break;
		default: usage();
		}
	}
	if (!o->dir || optind != argc || o->n < 0 || o->depth < 0 || o->branch < 1 || o->bytes < 0)
		usage();
	if (!o->create && !o->stat && !o->remove)
		o->create = o->stat = o->remove = 1;
}

/* fail counts one failed call or check and prints the first few. */
static void fail(const char *what, const char *path)
{
	if (errors++ < 5)
		fprintf(stderr, "mdtest: rank %d: %s %s: %s\n", rank, what, path, errno ? strerror(errno) : "mismatch");
}

static void root_dir(const struct opts *o, int r, char *out, size_t n)
{
	if (o->unique)
		snprintf(out, n, "%s/mdtest_tree.%d.0", o->dir, r);
	else
		snprintf(out, n, "%s/mdtest_tree.0", o->dir);
}

/* dir_at writes the path of directory number idx of level lvl (0: the
 * root; level l has branch^l directories) of rank r's tree. */
static void dir_at(const struct opts *o, int r, int lvl, long idx, char *out, size_t n)
{
	size_t len;
	root_dir(o, r, out, n);
	for (int l = lvl - 1; l >= 0; l--) {
		long div = 1;
		for (int i = 0; i < l; i++)
			div *= o->branch;
		len = strlen(out);
		snprintf(out + len, n - len, "/d%ld", (idx / div) % o->branch);
	}
}

static long width(const struct opts *o, int lvl)
{
	long w = 1;
	for (int i = 0; i < lvl; i++)
		w *= o->branch;
	return w;
}

/* file_at writes the path of file i of rank r. */
static void file_at(const struct opts *o, int r, long i, char *out, size_t n)
{
	char dir[3072];
	dir_at(o, r, o->depth, i % width(o, o->depth), dir, sizeof dir);
	snprintf(out, n, "%s/file.mdtest.%d.%ld", dir, r, i);
}

static int owns_tree(const struct opts *o)
{
	return o->unique || rank == 0;
}

static void tree_create(const struct opts *o)
{
	char p[4096];
	if (!owns_tree(o))
		return;
	for (int lvl = 0; lvl <= o->depth; lvl++)
		for (long i = 0; i < width(o, lvl); i++) {
			dir_at(o, rank, lvl, i, p, sizeof p);
			errno = 0;
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				fail("mkdir", p);
		}
}

static void tree_remove(const struct opts *o)
{
	char p[4096];
	if (!owns_tree(o))
		return;
	for (int lvl = o->depth; lvl >= 0; lvl--)
		for (long i = 0; i < width(o, lvl); i++) {
			dir_at(o, rank, lvl, i, p, sizeof p);
			errno = 0;
			if (rmdir(p) != 0)
				fail("rmdir", p);
		}
}

static void create_one(const struct opts *o, const char *p, const char *data)
{
	errno = 0;
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0) {
		fail("open", p);
		return;
	}
	if (o->bytes && write(fd, data, (size_t)o->bytes) != o->bytes)
		fail("write", p);
	if (close(fd) != 0)
		fail("close", p);
}

static void stat_one(const struct opts *o, const char *p)
{
	struct stat st;
	errno = 0;
	if (stat(p, &st) != 0)
		fail("stat", p);
	else if (!S_ISREG(st.st_mode) || st.st_size != o->bytes)
		fail("stat (type or size)", p);
}

static void remove_one(const char *p)
{
	errno = 0;
	if (unlink(p) != 0)
		fail("unlink", p);
}

enum { CREATE, STAT, REMOVE };

static void files(const struct opts *o, int op, const char *data)
{
	char p[4096];
	for (long i = 0; i < o->n; i++) {
		file_at(o, rank, i, p, sizeof p);
		if (op == CREATE)
			create_one(o, p, data);
		else if (op == STAT)
			stat_one(o, p);
		else
			remove_one(p);
	}
}

/* timed runs one phase between barriers and prints its rate. */
static void timed(const struct opts *o, const char *name, long items, void (*tree)(const struct opts *), int op,
		  const char *data)
{
	double t0, t1, first, last;
	long total;
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	if (tree)
		tree(o);
	else
		files(o, op, data);
	t1 = MPI_Wtime();
	MPI_Allreduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	MPI_Allreduce(&items, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		double t = last - first;
		printf("mdtest phase=%s ranks=%d depth=%d branch=%d items=%ld time_s=%.6f ops_s=%.1f\n", name, nranks,
		       o->depth, o->depth ? o->branch : 0, total, t, t > 0 ? total / t : 0);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	long allerr;
	char *data;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	parse(argc, argv, &o);
	data = malloc((size_t)o.bytes + 1);
	for (long i = 0; i < o.bytes; i++)
		data[i] = (char)('a' + (rank + i) % 26);
	long dirs = 0;
	for (int l = 0; l <= o.depth; l++)
		dirs += width(&o, l);
	long mine = owns_tree(&o) ? dirs : 0;
	if (o.create) {
		timed(&o, "tree_create", mine, tree_create, 0, NULL);
		timed(&o, "create", o.n, NULL, CREATE, data);
	}
	if (o.stat)
		timed(&o, "stat", o.n, NULL, STAT, NULL);
	if (o.remove) {
		timed(&o, "remove", o.n, NULL, REMOVE, NULL);
		timed(&o, "tree_remove", mine, tree_remove, 0, NULL);
	}
	free(data);
	MPI_Allreduce(&errors, &allerr, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && allerr)
		fprintf(stderr, "mdtest: %ld failed calls or checks\n", allerr);
	MPI_Finalize();
	return allerr ? 1 : 0;
}
