// Package tier holds the devices of the buffer pool: a Device is one tier
// (a RAM tier made of memfds, or a file tier made of sparse files in a
// directory), and a Segment is one bucket's sparse image on a device.
//
// A Segment is a plain file descriptor addressed by offset: the buffer
// pool decides what lives where (page i of a page bucket at i*PageSize,
// named blobs in extents) and the segment only reads, writes and punches
// holes. Ranges never written, or punched, read as zeros.
//
// I/O: a file-tier segment reads and writes with pread/pwrite. A RAM-tier
// segment also keeps a MAP_SHARED mapping of its memfd, grown (mremap)
// with the file, and copies through it where the pages are already
// resident, a memmove about 3x cheaper than pwrite for 1 MiB; first
// touches, holes and anything it cannot map take pread/pwrite
// (mmap_linux.go has the rules). The mapping is never touched past the
// segment's size as this process set it, and a fault in it (a memfd
// shrunk behind the daemon's back) degrades to pread/pwrite rather than
// killing the process. Close unmaps.
//
// Nothing here is durable: segment files of the file tier are scratch
// space, removed by Close. Stale files left by a killed process are named
// iowarp-seg-* in the tier directory.
//
// Concurrency: ReadAt may run concurrently with other ReadAt calls; every
// other method needs exclusive access (the buffer pool calls them under
// the owning bucket's lock).
package tier
