// Package ebpf is the I/O tracer of `iowarp trace`: eBPF programs on the
// kernel's sys_enter/sys_exit raw tracepoints (bpf/trace.c; fentry, fexit
// and kprobes do not load on the kernels this targets, uprobes cost
// ~10 µs a hit) that record the I/O system calls of a cgroup or of a set
// of processes and their children, filtered in the kernel, into a ring
// buffer; and the user-space side that joins them into per-file
// statistics (Aggregator: fds followed from their opens, forks or /proc,
// positions from reads, writes and seeks) and writes them as a table, as
// JSON lines, as Darshan's POSIX counters (darshan-parser's layout) or as
// a timeline page (Timeline.WriteHTML).
//
// It sees what no door does: static binaries, Go programs, programs that
// call the kernel directly and fortified libc calls. The BPF object is
// compiled by clang through bpf2go (`go generate ./adapters/ebpf`) and
// committed with the source's hash, so building needs no clang and a
// stale object fails TestGeneratedUpToDate.
//
// Cost: two tracepoint hits per traced syscall (a hash-map update and
// delete of a 56-byte entry, five register reads, one ring-buffer record of 80 bytes; 336
// with a path); the consumer is woken only when 256 KiB are queued and
// otherwise polls every 50 ms. Untraced processes pay the tracepoints'
// slow syscall path and a map lookup. x86_64 only (syscall numbers and
// the pt_regs layout).
//
// The join with the pool's side (hits, misses, stage-ins, write-back of
// the traced files on iowarp mounts) is made by `iowarp trace` from the
// daemons' per-file counters (files.FileIO), taken before and after.
// Not yet: which tier served each read, tier occupancy on the timeline,
// and in-kernel aggregation (which would cut the per-event cost when no
// event stream is asked for).
package ebpf
