// Package tier holds the devices of the buffer pool: a Device is one tier
// (a RAM tier made of memfds, or a file tier made of sparse files in a
// directory), and a Segment is one bucket's sparse image on a device.
//
// A Segment is a plain file descriptor addressed by offset: the buffer
// pool decides what lives where (page i of a page bucket at i*PageSize,
// named blobs in extents) and the segment only reads, writes and punches
// holes. Ranges never written, or punched, read as zeros.
//
// Nothing here is durable: segment files of the file tier are scratch
// space, removed by Close. Stale files left by a killed process are named
// iowarp-seg-* in the tier directory.
//
// Concurrency: ReadAt may run concurrently with other ReadAt calls; every
// other method needs exclusive access (the buffer pool calls them under
// the owning bucket's lock).
package tier
