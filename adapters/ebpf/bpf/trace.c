// SPDX-License-Identifier: GPL-2.0-only
// (The kernel lets only GPL programs call the probe-read helpers; the
// rest of iowarp is Apache-2.0.)
//
// The I/O tracer's kernel side: BTF-typed tracepoints (tp_btf) on
// sys_enter/sys_exit, filtered in the kernel to the traced cgroup (or set
// of processes) and to the I/O syscalls userspace marked in `wanted`. At
// entry the time (and a path argument, read from user memory) is kept in
// the thread's task storage, whose presence also caches the filter's
// verdict; at exit, with the arguments read from the saved registers:
//
//   - a successful read or write (read, pread64, readv, preadv, preadv2
//     and the writes) is counted in the kernel, per process and fd
//     (struct agg in `fdagg`: calls, bytes, Darshan's size buckets,
//     sequential and consecutive accesses from the previous offset, time),
//     unless config.every asks for every event; one call per fd and
//     SAMPLE_NS goes to the ring buffer too, marked F_SAMPLE, for the
//     timeline only;
//   - any other call (open, close, seek, fsync, stat ...) and a failed
//     read or write goes to the ring buffer as one event, with its
//     latency and result. Before the event of a call that ends an fd's
//     life or gives its number to another file (close, dup2/dup3 onto
//     it, an open returning it after an exec closed it), the fd's counts
//     go out as an F_AGG record, so userspace, which joins fds to paths,
//     counts them to the file they were made on.
//
// block_rq_issue counts the requests issued to each block device (by
// any process or kernel thread) while the trace runs.
//
// sched_process_fork adds a traced process's children to the traced set
// (MODE_PIDS) from their creation, before their first call, and sends an
// F_FORK record so userspace copies the parent's fds to the child before
// any of the child's events.
//
// Offsets: pread's is its argument; read's and write's is the file
// position after the call (task->files->fdt->fd[fd]->f_pos, read with
// CO-RE against the kernel's BTF) minus the bytes moved.
//
// x86_64 only (syscall numbers; the argument registers of struct
// pt_regs, relocated by CO-RE).
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define PATH_MAX_EV 256
#define MAX_SYSCALL 512
#define NRW 10               // the read and write syscalls counted in the kernel
#define NBUCKETS 10          // Darshan's access-size buckets
#define SAMPLE_NS 1000000ULL // one timeline sample per fd per ms

// The kernel's types, as far as the programs read them; CO-RE relocates
// the field offsets against the running kernel's BTF.
struct pt_regs {
	unsigned long r10, r8, dx, si, di;
} __attribute__((preserve_access_index));

struct file {
	long long f_pos;
} __attribute__((preserve_access_index));

struct fdtable {
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct block_device {
	unsigned int bd_dev; // dev_t
} __attribute__((preserve_access_index));

struct request {
	unsigned int cmd_flags; // blk_opf_t: the operation in the low 8 bits
	unsigned int __data_len;
	struct block_device *part;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct files_struct *files;
} __attribute__((preserve_access_index));

// Filter modes (config.mode).
#define MODE_CGROUP 1 // the current task's cgroup (or one level of its ancestry) is cgid
#define MODE_PIDS 2   // the current tgid is in `pids`

struct config {
	__u32 mode;
	__u32 cgroup_level; // the ancestor level to compare (MODE_CGROUP)
	__u64 cgid;
	__u32 self;         // the tracer's own tgid, never traced
	__u32 every;        // 1: every call goes to the ring buffer (no counting in the kernel)
};

// wanted[nr] bits (0 = not traced).
#define W_TRACED 1
#define W_PATH0 (1 << 1)      // the first argument is a path
#define W_PATH1 (1 << 2)      // the second is
#define W_FLUSH_RET (1 << 3)  // returns a new fd: its old counts go out first
#define W_FLUSH_ARG0 (1 << 4) // ends the fd in args[0] (close)
#define W_FLUSH_DUP (1 << 5)  // a dup: returns an fd (not args[0]) that may have had another file
#define W_RW_SHIFT 8          // bits 8-11: 1 + index of a read or write syscall (0-4 reads, 5-9 writes)
#define W_POSITIONED (1 << 12) // offset in args[3] (-1: the file position, preadv2)

struct start {
	__u64 ts;
	__u32 nr;
	__u32 w;     // wanted[nr]
	__u32 busy;  // a call is in progress
	__u32 every; // config.every, when the task was first traced
};

struct pathbuf {
	__u32 valid;
	char path[PATH_MAX_EV];
};

// Ring records: struct event; struct path_event (F_PATH); struct
// agg_event (F_AGG). F_SAMPLE: a counted call, for the timeline.
// F_FORK: pid forked ret (a new process).
#define F_PATH 1
#define F_SAMPLE 2
#define F_AGG 4
#define F_FORK 8

struct event {
	__u64 ts;     // exit time, ns (CLOCK_MONOTONIC)
	__u64 lat;    // ns from entry to exit
	__u32 pid;    // tgid
	__u32 tid;
	__u32 nr;     // syscall number
	__u32 flags;
	__s64 ret;
	__s64 off;    // a read's or write's offset (-1 if unknown)
	__u64 args[5];
};

struct path_event {
	struct event e;
	char path[PATH_MAX_EV];
};

struct fdkey {
	__u32 pid;
	__s32 fd;
};

// agg is what one process did on one fd, counted in the kernel. [0]
// reads, [1] writes.
struct agg {
	__u64 calls[NRW];     // by syscall (read, pread64, readv, preadv, preadv2, write, ...)
	__u64 bytes[2];
	__u64 seq[2];         // at an offset past the previous access's last byte
	__u64 consec[2];      // right after it
	__u64 time[2];        // ns in the calls
	__u64 sizes[2][NBUCKETS];
	__s64 last[2];        // the previous access's last byte (0 before the first)
	__s64 max_end[2];     // highest offset accessed + 1
	__s64 first_off[2];   // 1 + the first access's offset (0: none with a known offset yet)
	__s64 pos;            // the fd's position as its reads and writes moved it (files without f_pos: devices)
	__u64 first;          // start of the first call, ns
	__u64 end;            // end of the last
	__u64 sampled;        // time of the last F_SAMPLE event
};

struct agg_event {
	struct event e; // pid; args[0]: the fd
	struct agg a;
};

// blkio is what was issued to one block device while the trace ran (by
// anyone: write-back and read-ahead are issued by kernel threads, not the
// traced processes). [0] reads, [1] writes, [2] other operations.
struct blkio {
	__u64 requests[3];
	__u64 bytes[3];
};

// Keep the record types in the object's BTF for bpf2go (-type ...).
const struct event *unused_event __attribute__((unused));
const struct path_event *unused_path_event __attribute__((unused));
const struct agg_event *unused_agg_event __attribute__((unused));
const struct blkio *unused_blkio __attribute__((unused));

// wakeup_bytes: the consumer is woken when this much is queued; below
// it, events are submitted without a wake-up (a wake-up per event costs
// a cross-core interrupt per traced syscall) and the consumer polls.
#define WAKEUP_BYTES (256 << 10)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SYSCALL);
	__type(key, __u32);
	__type(value, __u32);
} wanted SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct pathbuf);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fdkey);
	__type(value, struct agg);
} fdagg SEC(".maps");

// zero_agg initialises new fdagg entries (too big for the BPF stack).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg);
} zero_agg SEC(".maps");

// blk[dev]: per-CPU counts of the requests issued to the device.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct blkio);
} blk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

// dropped[0]: events lost to a full ring buffer; [1]: calls not followed
// (no task storage); [2]: counted calls sent as events (fdagg full).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline void count_drop(__u32 i) {
	__u64 *n = bpf_map_lookup_elem(&dropped, &i);
	if (n)
		(*n)++;
}

static __always_inline struct config *config(void) {
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cfg, &zero);
}

static __always_inline int traced(struct config *c) {
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (tgid == c->self)
		return 0;
	if (c->mode == MODE_CGROUP) {
		if (c->cgroup_level > 0)
			return bpf_get_current_ancestor_cgroup_id(c->cgroup_level) == c->cgid;
		return bpf_get_current_cgroup_id() == c->cgid;
	}
	if (c->mode == MODE_PIDS)
		return bpf_map_lookup_elem(&pids, &tgid) != 0;
	return 0;
}

SEC("tp_btf/sys_enter")
int sys_enter(__u64 *ctx) {
	__u32 nr = (__u32)ctx[1];
	if (nr >= MAX_SYSCALL)
		return 0;
	__u32 *w = bpf_map_lookup_elem(&wanted, &nr);
	if (!w || !*w)
		return 0;
	// A task with storage passed the filter at its first traced call
	// (and stays traced: a traced cgroup's processes do not leave it, a
	// traced process's children are traced too); the others pay the
	// filter at each call.
	struct task_struct *task = bpf_get_current_task_btf();
	struct start *s = bpf_task_storage_get(&starts, task, 0, 0);
	if (!s) {
		struct config *c = config();
		if (!c || !traced(c))
			return 0;
		s = bpf_task_storage_get(&starts, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!s) {
			count_drop(1);
			return 0;
		}
		s->every = c->every;
	}
	s->nr = nr;
	s->w = *w;
	if (*w & (W_PATH0 | W_PATH1)) {
		struct pathbuf *pb = bpf_task_storage_get(&paths, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (pb) {
			struct pt_regs *r = (struct pt_regs *)ctx[0];
			const void *up = (const void *)((*w & W_PATH0) ? r->di : r->si);
			pb->valid = bpf_probe_read_user_str(pb->path, sizeof pb->path, up) > 0;
		}
	}
	s->busy = 1;
	s->ts = bpf_ktime_get_ns();
	return 0;
}

static __always_inline void submit(void *e) {
	__u64 queued = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, queued >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

// flush sends the counts of pid's fd (if any) and forgets them.
static __always_inline void flush(__u32 pid, __s32 fd) {
	struct fdkey k = {.pid = pid, .fd = fd};
	struct agg *a = bpf_map_lookup_elem(&fdagg, &k);
	if (!a)
		return;
	struct agg_event *e = bpf_ringbuf_reserve(&events, sizeof(struct agg_event), 0);
	if (e) {
		__builtin_memset(&e->e, 0, sizeof e->e);
		e->e.ts = bpf_ktime_get_ns();
		e->e.pid = pid;
		e->e.flags = F_AGG;
		e->e.args[0] = (__u64)(__s64)fd;
		__builtin_memcpy(&e->a, a, sizeof *a);
		submit(e);
	} else {
		count_drop(0);
	}
	bpf_map_delete_elem(&fdagg, &k);
}

static __always_inline int bucket(__s64 n) {
	if (n <= 100) return 0;
	if (n <= 1024) return 1;
	if (n <= 10 << 10) return 2;
	if (n <= 100 << 10) return 3;
	if (n <= 1 << 20) return 4;
	if (n <= 4 << 20) return 5;
	if (n <= 10 << 20) return 6;
	if (n <= 100 << 20) return 7;
	if (n <= 1 << 30) return 8;
	return 9;
}

// file_pos is the position of the current task's fd (-1 if unreadable).
static __always_inline __s64 file_pos(struct task_struct *task, __s32 fd) {
	struct file **fds = BPF_CORE_READ(task, files, fdt, fd);
	struct file *f = 0;
	if (!fds || bpf_probe_read_kernel(&f, sizeof f, &fds[fd]) || !f)
		return -1;
	return BPF_CORE_READ(f, f_pos);
}

// count accounts a successful read or write in fdagg; 0 if it could not
// (the map is full), and whether a timeline sample is due in *sample.
static __always_inline int count(struct start *s, __u64 *args, __u32 w, __u32 pid, __s64 ret, __s64 off, __u64 now, int *sample) {
	__u32 i = ((w >> W_RW_SHIFT) & 15) - 1;
	if (i >= NRW)
		return 0;
	__u32 d = i >= 5;
	struct fdkey k = {.pid = pid, .fd = (__s32)args[0]};
	struct agg *a = bpf_map_lookup_elem(&fdagg, &k);
	if (!a) {
		__u32 zero = 0;
		struct agg *z = bpf_map_lookup_elem(&zero_agg, &zero);
		if (!z)
			return 0;
		z->first = s->ts;
		bpf_map_update_elem(&fdagg, &k, z, BPF_NOEXIST);
		z->first = 0;
		a = bpf_map_lookup_elem(&fdagg, &k);
		if (!a)
			return 0;
	}
	if (!(w & W_POSITIONED) || (__s64)args[3] == -1) {
		if (off < 0)
			off = a->pos; // a device, whose f_pos does not move: count as Darshan would
		a->pos = off + ret;
	}
	__sync_fetch_and_add(&a->calls[i], 1);
	__sync_fetch_and_add(&a->bytes[d], ret);
	__sync_fetch_and_add(&a->time[d], now - s->ts);
	__sync_fetch_and_add(&a->sizes[d][bucket(ret)], 1);
	if (off >= 0) {
		// The previous access's end and the highest are racy between
		// threads of one process on one fd; the counts are not.
		__s64 last = a->last[d];
		if (!a->first_off[d])
			a->first_off[d] = off + 1; // userspace judges it against the file's previous access
		if (off > last)
			__sync_fetch_and_add(&a->seq[d], 1);
		if (off == last + 1)
			__sync_fetch_and_add(&a->consec[d], 1);
		a->last[d] = off + ret - 1;
		if (off + ret > a->max_end[d])
			a->max_end[d] = off + ret;
	}
	a->end = now;
	*sample = now - a->sampled >= SAMPLE_NS;
	if (*sample)
		a->sampled = now;
	return 1;
}

SEC("tp_btf/sys_exit")
int sys_exit(__u64 *ctx) {
	struct task_struct *task = bpf_get_current_task_btf();
	struct start *s = bpf_task_storage_get(&starts, task, 0, 0);
	if (!s || !s->busy)
		return 0;
	s->busy = 0;
	__u32 nr = s->nr, w = s->w;
	// The argument registers are as the call found them (the kernel
	// saved them at entry and changes only ax and ip after the exit).
	struct pt_regs *r = (struct pt_regs *)ctx[0];
	__u64 args[5] = {r->di, r->si, r->dx, r->r10, r->r8};
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;
	__s64 ret = (__s64)ctx[1];
	__s64 off = -1;
	int sample = 1;
	if ((w >> W_RW_SHIFT) & 15) {
		if (ret >= 0) {
			if ((w & W_POSITIONED) && (__s64)args[3] != -1)
				off = args[3];
			else if ((off = file_pos(task, (__s32)args[0])) >= 0)
				off -= ret;
		}
		if (ret >= 0 && !s->every) {
			if (count(s, args, w, pid, ret, off, now, &sample)) {
				if (!sample)
					return 0;
			} else {
				count_drop(2);
				sample = 0;
			}
		} else {
			sample = 0;
		}
	} else {
		sample = 0;
		if ((w & W_FLUSH_RET) && ret >= 0)
			flush(pid, (__s32)ret);
		if (w & W_FLUSH_ARG0)
			flush(pid, (__s32)args[0]);
		if ((w & W_FLUSH_DUP) && ret >= 0 && (__s32)args[0] != (__s32)ret)
			flush(pid, (__s32)ret);
	}
	struct pathbuf *pb = 0;
	if (w & (W_PATH0 | W_PATH1))
		pb = bpf_task_storage_get(&paths, task, 0, 0);
	int with_path = pb && pb->valid;
	struct event *e;
	if (with_path)
		e = bpf_ringbuf_reserve(&events, sizeof(struct path_event), 0);
	else
		e = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	if (!e) {
		count_drop(0);
		if (pb)
			pb->valid = 0;
		return 0;
	}
	e->ts = now;
	e->lat = now - s->ts;
	e->pid = pid;
	e->tid = (__u32)id;
	e->nr = nr;
	e->ret = ret;
	e->off = off;
	for (int i = 0; i < 5; i++)
		e->args[i] = args[i];
	e->flags = (with_path ? F_PATH : 0) | (sample ? F_SAMPLE : 0);
	if (with_path) {
		__builtin_memcpy(((struct path_event *)e)->path, pb->path, PATH_MAX_EV);
		pb->valid = 0;
	}
	submit(e);
	return 0;
}

// A traced process's child is traced from its creation (MODE_PIDS), and
// userspace hears of a new process before any of its calls. The
// tracepoint runs in the parent.
SEC("tp_btf/sched_process_fork")
int sched_process_fork(__u64 *ctx) {
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	struct config *c = config();
	if (!c || !traced(c))
		return 0;
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (ptgid == ctgid)
		return 0; // a thread
	if (c->mode == MODE_PIDS) {
		__u8 one = 1;
		bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	if (!e) {
		count_drop(0);
		return 0;
	}
	__builtin_memset(e, 0, sizeof *e);
	e->ts = bpf_ktime_get_ns();
	e->pid = ptgid;
	e->tid = parent->pid;
	e->ret = ctgid;
	e->off = -1;
	e->flags = F_FORK;
	submit(e);
	return 0;
}

// Block requests issued to devices, counted per device.
SEC("tp_btf/block_rq_issue")
int block_rq_issue(__u64 *ctx) {
	struct request *rq = (struct request *)ctx[0];
	__u32 op = rq->cmd_flags & 0xff;
	__u32 i = op == 0 ? 0 : op == 1 ? 1 : 2; // REQ_OP_READ, REQ_OP_WRITE
	__u32 dev = 0;
	struct block_device *bd = rq->part;
	if (bd)
		dev = BPF_CORE_READ(bd, bd_dev);
	struct blkio *b = bpf_map_lookup_elem(&blk, &dev);
	if (!b) {
		struct blkio z = {};
		bpf_map_update_elem(&blk, &dev, &z, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&blk, &dev);
		if (!b)
			return 0;
	}
	if (i < 3) {
		b->requests[i]++;
		b->bytes[i] += rq->__data_len;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
