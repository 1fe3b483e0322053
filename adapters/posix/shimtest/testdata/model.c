/* model.c FILE SEED OPS MODELOUT: random operations on FILE, checked
 * against an in-memory model of its bytes after every read and at the
 * end: pread/pwrite, read/write at the offset, preadv2/pwritev2, reads and
 * stores through shared maps, fallocate (punch hole, zero range),
 * copy_file_range within the file, ftruncate, fsync. Under the shim, the
 * writes inside the file that hit resident pages take the fast path and
 * the rest the kernel; every door must see every other. On success it
 * writes the model to MODELOUT (the test compares the file on the mount
 * and, after a clean unmount, the backing file) and prints "ok"; else the
 * first difference, with the op number. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAXSZ (3u << 20)
#define PG 4096u

static unsigned char model[MAXSZ], buf[MAXSZ], buf2[MAXSZ];
static size_t size;
static uint64_t rng;
static long op;
static int fd;
static int tracing; /* MODEL_TRACE set: each op on stderr */

#define TRACE(name, a, b) \
	do { \
		if (tracing) \
			fprintf(stderr, "%ld %s %zu %zu size %zu\n", op, name, (size_t)(a), (size_t)(b), size); \
	} while (0)

static uint64_t rnd(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* a length: mostly small, sometimes most of a pool page or more */
static size_t rlen(void)
{
	switch (rnd() % 4) {
	case 0: return 1 + below(64);
	case 1: return 1 + below(8192);
	case 2: return 1 + below(256 << 10);
	default: return 1 + below(1536 << 10);
	}
}

static void die(const char *what, long got, long want)
{
	printf("op %ld: %s: got %ld want %ld (size %zu, errno %d)\n", op, what, got, want, size, errno);
	exit(1);
}

static void fill(unsigned char *p, size_t n)
{
	unsigned char c = (unsigned char)rnd();
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(c + i * 31 + (i >> 9));
}

static void compare(const unsigned char *got, size_t off, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != model[off + i])
			die(what, (long)(off + i), got[i] * 1000L + model[off + i]);
}

static size_t expect(size_t off, size_t n) { return off >= size ? 0 : (off + n > size ? size - off : n); }

static void apply(const unsigned char *p, size_t off, size_t n)
{
	if (off > size)
		memset(model + size, 0, off - size);
	memcpy(model + off, p, n);
	if (off + n > size)
		size = off + n;
}

/* off and len of a write that stays under MAXSZ */
static void wrange(size_t *off, size_t *n)
{
	*n = rlen();
	if (*n > MAXSZ / 2)
		*n = MAXSZ / 2;
	size_t lim = size + (64 << 10) < MAXSZ - *n ? size + (64 << 10) : MAXSZ - *n;
	/* mostly inside the file, where fast-path hits are */
	*off = (rnd() % 4) ? below(size > *n ? size - *n + 1 : 1) : below(lim + 1);
}

static void op_pwrite(void)
{
	size_t off, n;
	wrange(&off, &n);
	fill(buf, n);
	TRACE("pwrite", off, n);
	ssize_t r = pwrite(fd, buf, n, (off_t)off);
	if (r != (ssize_t)n)
		die("pwrite", r, (long)n);
	apply(buf, off, n);
}

static void op_pread(void)
{
	size_t off = below(size + 4096), n = rlen();
	if (off + n > MAXSZ)
		n = MAXSZ - off;
	TRACE("pread", off, n);
	ssize_t r = pread(fd, buf, n, (off_t)off);
	if (r != (ssize_t)expect(off, n))
		die("pread count", r, (long)expect(off, n));
	compare(buf, off, (size_t)r, "pread byte");
}

static void op_write(void)
{
	size_t off, n;
	wrange(&off, &n);
	fill(buf, n);
	TRACE("write", off, n);
	if (lseek(fd, (off_t)off, SEEK_SET) != (off_t)off)
		die("lseek", -1, (long)off);
	ssize_t r = write(fd, buf, n);
	if (r != (ssize_t)n)
		die("write", r, (long)n);
	apply(buf, off, n);
	if (lseek(fd, 0, SEEK_CUR) != (off_t)(off + n))
		die("offset after write", lseek(fd, 0, SEEK_CUR), (long)(off + n));
}

static void op_read(void)
{
	size_t off = below(size + 1), n = rlen();
	if (off + n > MAXSZ)
		n = MAXSZ - off;
	TRACE("read", off, n);
	lseek(fd, (off_t)off, SEEK_SET);
	ssize_t r = read(fd, buf, n);
	if (r != (ssize_t)expect(off, n))
		die("read count", r, (long)expect(off, n));
	compare(buf, off, (size_t)r, "read byte");
}

static void op_pwritev2(void)
{
	size_t off, n;
	wrange(&off, &n);
	fill(buf, n);
	size_t h = below(n + 1);
	struct iovec iov[2] = {{buf, h}, {buf + h, n - h}};
	TRACE("pwritev2", off, n);
	ssize_t r = pwritev2(fd, iov, 2, (off_t)off, 0);
	if (r != (ssize_t)n)
		die("pwritev2", r, (long)n);
	apply(buf, off, n);
}

static void op_preadv2(void)
{
	size_t off = below(size + 1), n = rlen();
	if (off + n > MAXSZ)
		n = MAXSZ - off;
	size_t h = below(n + 1);
	struct iovec iov[2] = {{buf, h}, {buf + h, n - h}};
	TRACE("preadv2", off, n);
	ssize_t r = preadv2(fd, iov, 2, (off_t)off, 0);
	if (r != (ssize_t)expect(off, n))
		die("preadv2 count", r, (long)expect(off, n));
	compare(buf, off, (size_t)r, "preadv2 byte");
}

/* a mapped range inside the file: [*off, *off+*n), map from *base */
static int mrange(size_t *base, size_t *off, size_t *n)
{
	if (size == 0)
		return 0;
	*off = below(size);
	*n = 1 + below(size - *off);
	if (*n > (128 << 10)) /* msync of a large map costs ~10 ms */
		*n = 1 + below(128 << 10);
	*base = *off & ~(size_t)(PG - 1);
	return 1;
}

static void op_mapread(void)
{
	size_t base, off, n;
	if (!mrange(&base, &off, &n))
		return;
	TRACE("mapread", off, n);
	unsigned char *m = mmap(NULL, off + n - base, PROT_READ, MAP_SHARED, fd, (off_t)base);
	if (m == MAP_FAILED)
		die("mmap read", -1, 0);
	compare(m + (off - base), off, n, "map read byte");
	munmap(m, off + n - base);
}

static void op_mapwrite(void)
{
	size_t base, off, n;
	if (!mrange(&base, &off, &n))
		return;
	TRACE("mapwrite", off, n);
	unsigned char *m = mmap(NULL, off + n - base, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)base);
	if (m == MAP_FAILED)
		die("mmap write", -1, 0);
	fill(buf, n);
	memcpy(m + (off - base), buf, n);
	apply(buf, off, n);
	if (rnd() % 2) { /* a read of the file while it is mapped */
		size_t o2 = below(size), n2 = 1 + below(size - o2);
		ssize_t r = pread(fd, buf2, n2, (off_t)o2);
		if (r != (ssize_t)n2)
			die("pread while mapped", r, (long)n2);
		compare(buf2, o2, n2, "pread while mapped byte");
	}
	if (rnd() % 2 && msync(m, off + n - base, MS_SYNC) != 0)
		die("msync", -1, 0);
	munmap(m, off + n - base); /* without msync half the time */
}

static void op_fallocate(void)
{
	if (size == 0)
		return;
	size_t off = below(size), n = 1 + below(size - off + 8192);
	int punch = rnd() % 2;
	int mode = punch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE : FALLOC_FL_ZERO_RANGE;
	if (off + n > MAXSZ)
		n = MAXSZ - off;
	TRACE(punch ? "punch" : "zero", off, n);
	if (fallocate(fd, mode, (off_t)off, (off_t)n) != 0)
		die(punch ? "fallocate punch" : "fallocate zero", -1, 0);
	size_t end = off + n;
	if (punch && end > size)
		end = size;
	if (end > size)
		memset(model + size, 0, end - size), size = end;
	memset(model + off, 0, end - off);
}

static void op_copy(void)
{
	if (size == 0)
		return;
	size_t in = below(size), n = rlen();
	if (n > MAXSZ / 4)
		n = 1 + below(MAXSZ / 4);
	size_t out;
	for (int tries = 0;; tries++) { /* ranges of one file must not overlap */
		out = below((size + (64 << 10) < MAXSZ - n ? size + (64 << 10) : MAXSZ - n) + 1);
		if (out + n <= in || in + n <= out)
			break;
		if (tries > 20)
			return;
	}
	size_t want = expect(in, n);
	off64_t oi = (off64_t)in, oo = (off64_t)out;
	TRACE("copy", in, out);
	ssize_t r = copy_file_range(fd, &oi, fd, &oo, n, 0);
	if (r != (ssize_t)want)
		die("copy_file_range", r, (long)want);
	memcpy(buf, model + in, want);
	if (want)
		apply(buf, out, want);
}

static void op_truncate(void)
{
	size_t n = rnd() % 3 ? below(size + 1) : below(MAXSZ / 2);
	TRACE("truncate", n, 0);
	if (ftruncate(fd, (off_t)n) != 0)
		die("ftruncate", -1, (long)n);
	if (n > size)
		memset(model + size, 0, n - size);
	size = n;
}

static void op_fsync(void)
{
	TRACE("fsync", 0, 0);
	if (fsync(fd) != 0)
		die("fsync", -1, 0);
}

static void check_all(const char *what)
{
	ssize_t r = pread(fd, buf, MAXSZ, 0);
	if (r != (ssize_t)size)
		die(what, r, (long)size);
	compare(buf, 0, size, what);
}

int main(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	rng = strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
	long ops = atol(argv[3]);
	tracing = getenv("MODEL_TRACE") != NULL;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open", -1, 0);
	static void (*const table[])(void) = {
		op_pwrite, op_pwrite, op_pwrite, op_pread, op_pread, op_pread, op_write, op_read,
		op_pwritev2, op_preadv2, op_mapread, op_mapwrite, op_fallocate, op_copy, op_copy, op_truncate,
	};
	for (op = 0; op < ops; op++) {
		size_t k = below(sizeof table / sizeof table[0] * 16 + 1);
		if (k == 0)
			op_fsync();
		else
			table[(k - 1) % (sizeof table / sizeof table[0])]();
		if (op % 256 == 255)
			check_all("full read byte");
	}
	check_all("final read byte");
	close(fd);
	FILE *f = fopen(argv[4], "w");
	if (!f || fwrite(model, 1, size, f) != size || fclose(f) != 0)
		die("write the model", -1, 0);
	printf("ok\n");
	return 0;
}
