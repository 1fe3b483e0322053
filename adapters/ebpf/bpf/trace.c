// SPDX-License-Identifier: GPL-2.0-only
// (The kernel lets only GPL programs call the probe-read helpers; the
// rest of iowarp is Apache-2.0.)
//
// The I/O tracer's kernel side: raw tracepoints on sys_enter/sys_exit,
// filtered in the kernel to the traced cgroup (or set of processes) and
// to the I/O syscalls userspace marked in `wanted`. At entry the
// arguments (and a path argument, read from user memory) are kept per
// thread; at exit one event goes to the ring buffer with the latency and
// the result. Nothing here knows file offsets or paths of fds: userspace
// joins them (adapters/ebpf).
//
// x86_64 only: syscall arguments are read from struct pt_regs at the
// offsets of the kernel's layout (the raw tracepoint hands a pointer to
// it; there is no BTF-typed access without vmlinux.h, which needs
// bpftool, not installed here).
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define PATH_MAX_EV 256
#define MAX_SYSCALL 512

// The kernel's struct pt_regs on x86_64 (arch/x86/include/asm/ptrace.h).
struct regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

// Filter modes (config.mode).
#define MODE_CGROUP 1 // the current task's cgroup (or one level of its ancestry) is cgid
#define MODE_PIDS 2   // the current tgid is in `pids`

struct config {
	__u32 mode;
	__u32 cgroup_level; // the ancestor level to compare (MODE_CGROUP)
	__u64 cgid;
	__u32 self;         // the tracer's own tgid, never traced
	__u32 pad;
};

// Syscalls whose first argument or second is a path to read at entry.
#define PATH_ARG0 1
#define PATH_ARG1 2

struct start {
	__u64 ts;
	__u64 nr;
	__u64 args[5];
};

// pathbuf is the path argument of a call in progress, kept apart from
// struct start so that the calls without one copy 56 bytes, not 312.
struct pathbuf {
	char path[PATH_MAX_EV];
};

struct event {
	__u64 ts;     // exit time, ns (CLOCK_MONOTONIC)
	__u64 lat;    // ns from entry to exit
	__u32 pid;    // tgid
	__u32 tid;
	__u32 nr;     // syscall number
	__u32 flags;  // 1: a path follows (struct path_event)
	__s64 ret;
	__u64 args[5];
};

// path_event is an event of a call with a path argument: the event, then
// the path. Calls without one send the shorter struct event.
struct path_event {
	struct event e;
	char path[PATH_MAX_EV];
};

// Keep the event types in the object's BTF for bpf2go (-type ...).
const struct event *unused_event __attribute__((unused));
const struct path_event *unused_path_event __attribute__((unused));

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

// wanted[nr]: 0 = not traced; else 1 | PATH_ARG0<<1 | PATH_ARG1<<2.
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
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pathbuf);
} paths SEC(".maps");

// scratch holds a path while it is read (too big for the BPF stack).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pathbuf);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

// dropped[0]: events lost to a full ring buffer; [1]: entries lost to a
// full starts map.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

static __always_inline void count_drop(__u32 i) {
	__u64 *n = bpf_map_lookup_elem(&dropped, &i);
	if (n)
		(*n)++;
}

static __always_inline int traced(void) {
	__u32 zero = 0;
	struct config *c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return 0;
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

static __always_inline __u64 arg(struct regs *r, int i) {
	unsigned long v = 0;
	switch (i) {
	case 0: bpf_probe_read_kernel(&v, sizeof v, &r->di); break;
	case 1: bpf_probe_read_kernel(&v, sizeof v, &r->si); break;
	case 2: bpf_probe_read_kernel(&v, sizeof v, &r->dx); break;
	case 3: bpf_probe_read_kernel(&v, sizeof v, &r->r10); break;
	case 4: bpf_probe_read_kernel(&v, sizeof v, &r->r8); break;
	}
	return v;
}

SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx) {
	__u32 nr = (__u32)ctx->args[1];
	if (nr >= MAX_SYSCALL)
		return 0;
	__u32 *w = bpf_map_lookup_elem(&wanted, &nr);
	if (!w || !*w || !traced())
		return 0;
	struct regs *r = (struct regs *)ctx->args[0];
	struct start s = {.nr = nr};
	for (int i = 0; i < 5; i++)
		s.args[i] = arg(r, i);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	if (*w & ((PATH_ARG0 | PATH_ARG1) << 1)) {
		__u32 zero = 0;
		struct pathbuf *pb = bpf_map_lookup_elem(&scratch, &zero);
		if (pb) {
			const void *up = (const void *)((*w & (PATH_ARG0 << 1)) ? s.args[0] : s.args[1]);
			if (bpf_probe_read_user_str(pb->path, sizeof pb->path, up) <= 0)
				pb->path[0] = 0;
			if (bpf_map_update_elem(&paths, &tid, pb, BPF_ANY))
				count_drop(1);
		}
	}
	s.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &tid, &s, BPF_ANY))
		count_drop(1);
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx) {
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct start *s = bpf_map_lookup_elem(&starts, &tid);
	if (!s)
		return 0;
	__u64 nr = s->nr;
	struct pathbuf *pb = bpf_map_lookup_elem(&paths, &tid);
	int with_path = pb && pb->path[0] != 0;
	struct event *e;
	if (with_path)
		e = bpf_ringbuf_reserve(&events, sizeof(struct path_event), 0);
	else
		e = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);
	if (!e) {
		count_drop(0);
		bpf_map_delete_elem(&starts, &tid);
		if (pb)
			bpf_map_delete_elem(&paths, &tid);
		return 0;
	}
	__u64 now = bpf_ktime_get_ns();
	e->ts = now;
	e->lat = now - s->ts;
	e->pid = id >> 32;
	e->tid = tid;
	e->nr = (__u32)nr;
	e->ret = (__s64)ctx->args[1];
	for (int i = 0; i < 5; i++)
		e->args[i] = s->args[i];
	e->flags = with_path;
	if (with_path)
		__builtin_memcpy(((struct path_event *)e)->path, pb->path, PATH_MAX_EV);
	if (pb)
		bpf_map_delete_elem(&paths, &tid);
	__u64 queued = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	bpf_ringbuf_submit(e, queued >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	bpf_map_delete_elem(&starts, &tid);
	// A traced process that forks: follow the child (MODE_PIDS).
	if ((nr == 56 || nr == 57 || nr == 58 || nr == 435) && (__s64)ctx->args[1] > 0) {
		__u32 child = (__u32)ctx->args[1];
		__u8 one = 1;
		__u32 zero = 0;
		struct config *c = bpf_map_lookup_elem(&cfg, &zero);
		if (c && c->mode == MODE_PIDS)
			bpf_map_update_elem(&pids, &child, &one, BPF_ANY);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
