// Package ipc is the client↔daemon transport of iowarp: a Unix-socket
// handshake that hands each client its own shared-memory segment, and
// request/completion rings in that segment through which tasks of the
// runtime's modules are called.
//
// # Handshake
//
// The daemon listens on a Unix stream socket in a per-user directory (mode
// 0700; /run/iowarp for root, $XDG_RUNTIME_DIR/iowarp otherwise; the socket
// itself 0600, next to the control socket of the same mount, SocketPath).
// A client connects and sends a hello (magic, version, wanted segment
// size, flags: whether the daemon may spin waiting for its requests). The daemon reads the peer's credentials (SO_PEERCRED; only its own
// user and root are served, or on a per-user socket of a daemon serving
// several users, Options.ForUser, that user and root; the session keeps
// the uid and gid for the modules, which check them on every request),
// creates a memfd, formats it as an
// shm.Segment with a request ring and a completion ring (shm.Ring, roots
// "req" and "cq"), and sends the fd back over SCM_RIGHTS. From then on the
// socket carries no data: each side blocks reading it, and a hang-up is how
// each learns that the other died.
//
// # Calls
//
// The client allocates argument, input and output buffers from the rest of
// the segment (its data arena, with the segment's own allocator), enqueues
// a Request naming module id, method id and the buffers by offset, and
// waits for the Completion with the same tag. Waiting spins briefly (the
// rings' Spin) and then sleeps on the ring's futex with a waiter flag, so
// that nobody makes a wake-up system call for a peer that is not asleep.
// One waiting goroutine of a client at a time consumes the completion ring
// and hands other goroutines' completions over (leader/follower).
//
// The daemon runs one poller goroutine per client; it spins like the
// client before sleeping, unless the client asked it not to
// (DialOptions.DaemonSleeps: every request then costs a futex wake-up). A request that arrives
// alone is executed in the poller (no goroutine hand-off); when more are
// queued behind it, it goes to the runtime's bounded worker pool so that a
// client's asynchronous calls run in parallel.
//
// # Trust
//
// The daemon treats the segment as hostile: it copies each descriptor out
// of the ring before looking at it, checks module and method ids against
// the registry, every offset and length against the segment (overflow-safe),
// the argument size against MaxArgs, and copies the arguments out before a
// module decodes them. A client has at most the completion ring's capacity
// of requests outstanding (dequeued and not yet consumed); a client that
// exceeds it, corrupts its rings so that a completion cannot be posted, or
// writes on the socket after the handshake is disconnected. The daemon
// never uses the allocator of a client segment, so a client holding its
// allocator lock stalls only itself. Whatever a client does to its segment
// can hurt only its own calls.
//
// # Death
//
// A client that dies closes its socket: the daemon stops polling its ring,
// waits for that client's tasks still running (they write into its
// segment), closes the session's handles and unmaps and closes the memfd.
// Server.Stats shows the live segments and the last reclaimed one. A daemon
// that dies closes every client socket: each client's watcher marks the
// connection dead and every waiting call returns ErrDaemonGone (the waiter
// also polls a dead flag between futex sleeps of at most a few ms).
//
// A daemon that is alive but stalled is bounded too: a call that gets no
// slot or no completion within DialOptions.CallTimeout (DefaultCallTimeout,
// 2 minutes) fails with ErrStalled, which wraps ErrDaemonGone, and the
// connection is given up: every pending and later call fails the same way
// (the daemon may still answer the stalled call, into buffers the caller
// has reused, so the connection cannot be kept).
package ipc
