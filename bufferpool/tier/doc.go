// Package tier holds the devices of the buffer pool: a Device is one tier
// (a RAM tier made of memfds, or a file tier made of sparse files in a
// directory), and a Segment is one bucket's sparse image on a device.
//
// # Kinds
//
// A tier kind is a Kind registered with Register, one file per kind:
// ram_linux.go, file_linux.go, and cuda.go (only with -tags cuda, a
// placeholder whose Open fails with ErrNotSupported). A Kind has a name
// (what the config's tiers[].kind says), Traits (whether a tier of it
// has a directory, is memory the kernel cannot page out, outlives the
// daemon) and Open, which returns its Backend: what makes segments, and,
// for a persistent kind, its journal and the stale instances of dead
// daemons (Journaled). The pool, config validation and the CLI act on a
// kind's traits, never on its name, so adding a kind is one file with one
// Register call in its init.
//
// A Segment is a plain file descriptor addressed by offset: the buffer
// pool decides what lives where (page i of a page bucket at i*PageSize,
// named blobs in extents) and the segment only reads, writes and punches
// holes. Ranges never written, or punched, read as zeros.
//
// I/O: a file-tier segment reads and writes with pread/pwrite. A RAM-tier
// segment also keeps a MAP_SHARED mapping of its memfd, grown (mremap)
// with the file, and copies through it where the pages are resident and
// were touched once already, a memmove about 3x cheaper than pwrite for
// 1 MiB; first touches (a page pwritten and read once, as a stage-in
// is), holes and anything it cannot map take pread/pwrite, since a
// page's first access through a mapping costs more than the copy it
// saves on these VMs (mmap_linux.go has the rules). The mapping is never touched past the
// segment's size as this process set it, and a fault in it (a memfd
// shrunk behind the daemon's back) degrades to pread/pwrite rather than
// killing the process. Close unmaps.
//
// Files of a file tier live in an instance directory per daemon,
// DIR/iowarp-<pid>-<start>/ (instance_linux.go): a lock file flock'ed for
// the daemon's life, the segment files (seg-*), removed by Segment.Close,
// and a journal (journal.go) the buffer pool appends to, naming the dirty
// pages the segments hold. Device.Close removes the directory. Open finds
// the directories of dead daemons (their lock is free), locks them and
// lists them in Device.Stale for the pool to replay and remove; segment
// files of older builds (DIR/iowarp-seg-*) are removed at once.
//
// Concurrency: ReadAt may run concurrently with other ReadAt calls; every
// other method needs exclusive access (the buffer pool calls them under
// the owning bucket's lock).
package tier
