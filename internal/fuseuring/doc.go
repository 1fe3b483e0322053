// Package fuseuring serves a FUSE connection over io_uring (FUSE-over-io_uring,
// Linux 6.14+, CONFIG_FUSE_IO_URING, switched on by the fuse module's
// enable_uring parameter) instead of read(2)/write(2) on /dev/fuse. go-fuse has
// no such transport; this package adds one underneath it, and answers each
// request with go-fuse's own ProtocolServer, so the file system code (fs
// bridge, node API) is the same as over /dev/fuse.
//
// # How it works
//
// The kernel keeps one request queue per possible CPU and puts a request on
// the queue of the CPU that issued it. For every queue, Start runs Config.Threads
// OS threads pinned to that CPU (LockOSThread + sched_setaffinity), each with
// its own io_uring (128-byte SQEs) and one ring entry: a 288-byte header
// (fuse_in_header / fuse_out_header, the op header, commit id and payload size)
// and a payload buffer of at least the connection's max_write. The entry is
// handed to the kernel with FUSE_IO_URING_CMD_REGISTER; a request arrives as
// its completion; the reply is written into the same buffers and handed back
// with FUSE_IO_URING_CMD_COMMIT_AND_FETCH, which is also the wait for the next
// request: one io_uring_enter per request, on the CPU that made it. One entry
// per thread means the kernel only gives a request to an idle thread, so a
// handler that blocks holds up one thread of its CPU, not the CPU's queue.
//
// INIT, FORGET, INTERRUPT and notifications still travel over /dev/fuse: the
// mount is made with mount(2) on our own /dev/fuse fd, go-fuse's fuse.Server
// reads that fd (it answers INIT, asking for FUSE_OVER_IO_URING, flag 41,
// through MountOptions.ExtraCapabilities), and the queues are registered
// after the INIT reply, when the kernel knows max_write. Until every queue
// has an entry the kernel holds every request back, and once INIT negotiated
// io_uring the connection cannot return to /dev/fuse: a registration that
// fails unmounts, and Mount in Auto mode mounts again without io_uring.
//
// # Measured
//
// Both transports mounted in one process and read in alternating rounds (the
// order flips every round), with direct I/O so that every read(2) is one FUSE
// READ, on this 2-CPU machine under a load average of 12-20 from other work:
// the absolute figures are noisy, the ratios are from the same run. Seven
// runs each, the range of devfuse/uring (> 1: io_uring faster):
//
//	through fusefs, RAM-tier file (fusefs BenchmarkIoUringRatio)
//	  4 KiB pread   /dev/fuse 44-88 µs, io_uring 16-39 µs   1.75-3.1x
//	  1 MiB pread   /dev/fuse 0.64-0.77 ms, io_uring 0.43-0.62 ms   1.20-1.58x
//	  4 KiB pwrite  /dev/fuse 37-51 µs, io_uring 20-38 µs   1.12-2.36x (3 runs)
//	bare transport, in-memory file (BenchmarkTransportRatio)
//	  4 KiB pread   /dev/fuse 21-74 µs, io_uring 12-59 µs   1.25-2.3x
//	  1 MiB pread   /dev/fuse 0.50-0.75 ms, io_uring 0.43-0.62 ms   0.94-1.29x
//
// perf stat over 50000 4 KiB reads: 2.7 context switches and 30 µs of CPU per
// read over /dev/fuse, 2.2 and 25 µs over io_uring. With a Read that returned
// a slice of its own memory instead of filling the buffer it is given, 1 MiB
// reads were 0.77-0.88x: the reply is then copied into the ring buffer and
// again by the kernel, where /dev/fuse's writev copies once. fusefs fills the
// buffer (its dest is the ring buffer here), and its reads of 64 KiB and more
// (a ReadResult with an fd) are pread straight into the ring buffer.
//
// # Limits
//
//   - INTERRUPT reaches the fuse.Server, not the ProtocolServer that runs ring
//     requests: an interrupted ring request runs to completion (as fusefs
//     requests do over /dev/fuse too, see fusefs/doc.go).
//   - A NOTIFY_RETRIEVE reply would come over a ring to the ProtocolServer,
//     which did not ask for it (the fuse.Server sent it); iowarp sends no
//     notifications.
//   - Each CPU's queue is served by Config.Threads threads; more requests from
//     one CPU than that wait in the kernel.
//   - Memory and threads: possible CPUs x Threads (about 64 by default) rings
//     and payload buffers (1 MiB each with fusefs's max_write), mapped
//     lazily but resident once a large request used them.
//   - enable_uring is system-wide; Mode On sets it (root), Auto only uses it.
//
// Transport and Server are safe for concurrent use.
package fuseuring
