// Package ebpf is the I/O tracer of `iowarp trace`: eBPF programs on the
// kernel's sys_enter/sys_exit tracepoints (tp_btf, bpf/trace.c; fentry,
// fexit and kprobes do not load on the kernels this targets, uprobes cost
// ~10 µs a hit) that record the I/O system calls of a cgroup or of a set
// of processes and their children, filtered in the kernel; and the
// user-space side that joins them into per-file statistics (Aggregator:
// fds followed from their opens, forks or /proc) and writes them as a
// table, as JSON lines, as Darshan's POSIX counters (darshan-parser's
// layout) or as a timeline page (Timeline.WriteHTML).
//
// What reaches user space: by default, successful reads and writes are
// counted in the kernel per process and fd (calls per syscall, bytes,
// Darshan's size buckets, sequential and consecutive accesses, time) and
// come as Counts records when the fd is closed or its number passes to
// another file, and from Tracer.Flush at the end; one call per fd and
// millisecond also comes as a Sample event, for the timeline only. Every
// other call (open, close, seek, fsync, stat ...) and a failed read or
// write comes as an Event. Options.Every sends every call as an Event
// (`--output`'s full log). Counts are exact; the sequential verdicts are
// the kernel's per fd, each record's first access judged again per file
// (a file accessed through two fds at once counts them per fd). Offsets
// of read and write are the file position the kernel holds (f_pos, read
// by CO-RE), so fds inherited or opened before the trace have them too.
//
// Block devices: block_rq_issue counts the requests issued to each
// device while the trace runs, by anyone (Flush's last record).
//
// Children: sched_process_fork adds a traced process's children to the
// traced set before they run (a vfork child's first calls are seen) and
// sends a fork record ahead of the child's events, which copies the
// parent's fds to the child.
//
// It sees what no door does: static binaries, Go programs, programs that
// call the kernel directly and fortified libc calls. The BPF object is
// compiled by clang through bpf2go (`go generate ./adapters/ebpf`) and
// committed with the source's hash, so building needs no clang and a
// stale object fails TestGeneratedUpToDate.
//
// Cost: two tracepoint hits per syscall of every process on the machine
// while a trace runs: the kernel's slow syscall path and two BPF program
// runs, which for an untraced process look up the syscall and the filter
// and return. A traced task's filter verdict is cached in its task
// storage; a counted read or write costs two clock reads, the storage
// lookups, a hash lookup of its fd and a few atomic adds, and sends
// nothing to user space. scripts/bench-trace.sh measures both against
// untraced fio 4 KiB random reads on tmpfs in the same run: on the 2-core
// VM this was written on the tracepoints alone (programs filtering the
// call out) make most of the traced cost, so the traced figure cannot
// come much below theirs with this attachment. On that VM (kvm-clock) a
// clock read costs 130-220 ns, twice per traced call. The per-syscall
// tracepoints (syscalls/sys_enter_pread64 ...) were measured as the
// alternative: they spare the calls the tracer does not want (the kernel
// tests a bitmap before running a program) but cost more on the wanted
// ones (a perf trace record is filled first), which are most of an I/O
// workload's calls; README "Trace overhead" has the figures. The
// consumer is woken only when 256 KiB are queued and otherwise polls
// every 50 ms. x86_64 only (syscall numbers).
//
// The join with the pool's side (hits by tier, misses, stage-ins,
// write-back of the traced files on iowarp mounts) is made by `iowarp
// trace` from the daemons' per-file counters (files.FileIO), taken before
// and after, and the tiers' use on the timeline from their stats, sampled
// during the trace.
package ebpf
