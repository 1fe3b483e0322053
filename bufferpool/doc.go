// Package bufferpool is the Context Transfer Engine: named buckets of
// blobs placed on tiers of decreasing speed (RAM memfds, then sparse files
// on NVMe), with a data placement engine and an organizer that moves blobs
// between tiers by access score.
//
// # Semantics
//
// The pool is a cache. Close (or DeleteBucket) drops every blob, dirty or
// not, and removes every segment; callers such as bufferpool/files write
// dirty pages back before that. The one exception is a crash: with
// Config.Journal, dirty pages of tagged page buckets on file tiers are
// journaled (journal.go), and the next pool on the same tier directory
// hands them back (Replay) for the owner to write back. The other is
// durable named blobs (PutOptions.Durable, durable.go): copied into a
// bbolt store in the first file tier's directory and fsynced before the
// put returns, and put back into their buckets by the next New on that
// directory; in a durable bucket (BucketOptions.Durable, SetDurable)
// every write is, so the whole bucket comes back.
//
// Named buckets carry an owner, group and mode (meta.go) that the pool
// stores and the door that knows the caller enforces; blob tags and
// bucket names are indexed for Query and BucketsUnder (catalog.go);
// PutVersion keeps the last versions of a blob as hidden blobs
// (versions.go).
//
// A bucket has one segment per tier, opened when the first blob lands on
// that tier and closed when the last leaves (except the first-tier segment
// once PageTable handed it to clients). Page buckets keep a sparse image of
// the file: page i sits at offset i*PageSize in whichever tier's segment
// holds it; moving a page copies it, then punches the hole it left.
// Named-blob buckets place blobs with a first-fit extent allocator.
// Unallocated ranges of a segment always read as zero.
//
// # Checksums and compression on slower tiers
//
// A blob moved to a tier that is not memory is stored there in chunks (16
// KiB raw, 64 KiB compressed), each with its crc32c, compressed when its
// bucket asks for a codec (zstd, s2, lz4; Bucket.SetCompress,
// BucketOptions.Compress) and the first chunk shows it pays. Every read of
// it there checks the chunks it touches: a mismatch is ErrCorrupt
// (TierStats.ChecksumErrors). RAM tiers hold blobs raw, for the shims to
// map. A write in place on a slower tier makes the blob plain again first.
// stored.go has the details.
//
// # Capacity and eviction
//
// Every blob costs its size rounded up to 4 KiB on the tier holding it.
// Capacity is reserved with compare-and-swap before bytes are written, so a
// tier's used bytes never exceed its capacity.
//
// Placement (Config.Placement) picks a tier with room: the fastest
// (minimize_io_time), the next in turn (round_robin) or a random one. When
// none has room, clean blobs are evicted, coldest first, from the slowest
// tier up; pinned buckets are evicted from only when nothing else frees
// enough. If that still finds no room the write fails with ErrNoSpace.
//
// Dirty blobs are never evicted. They leave the pool only through Delete,
// DeletePage, Truncate, DeleteBucket or Close. Named blobs are always
// dirty (there is no write-back for them), so they are only ever demoted.
//
// # Organizer
//
// Every OrganizerInterval (and on Organize) the organizer folds each blob's
// access counters into its score, a count of reads and writes decayed with
// a 10 s half-life (frequency weighted by recency, as in Hermes). Then:
// the last tier, past its high watermark, evicts its coldest clean blobs
// down to the low watermark; every other tier past its high watermark
// demotes its coldest blobs to the next slower tier with room (a clean
// blob with nowhere to go is evicted) down to its low watermark; and blobs
// on slower tiers whose decayed read count reaches PromoteReads, or that
// belong to a pinned bucket, are promoted to the fastest tier that is
// below its low watermark, or else swapped into a faster tier at its low
// watermark by demoting the coldest blobs there when the hot blob's reads
// times its size beat their scores times theirs by Config.SwapCost times
// the bytes copied (TierStats.Swapped). Pinned buckets are never demoted.
//
// Under memory pressure the daemon calls Shed: the coldest blobs of every
// RAM tier are demoted the same way until the tier holds keep of what it
// held, and the tier is held there (TierStats.Ceiling; reservations,
// placement and promotion respect it, never below 1/16 of the capacity)
// until Unshed.
//
// Counters in TierStats: Promoted counts blobs promoted into the tier,
// Demoted blobs demoted out of it, Evicted blobs dropped from it.
//
// # Locking
//
// Lock order:
//
//	Pool.orgMu (one organizer pass at a time)
//	  -> Bucket.mu (one bucket at a time, blocking)
//	    -> other Bucket.mu, TryLock/TryRLock only
//	      -> Pool.mu (bucket map)
//	        -> catalog.mu (leaf: name and tag indexes; also taken
//	           under a bucket's lock alone, for tags)
//	      -> the blob store's transaction (bbolt's lock; durable.go)
//
// One exception: Pool.Bucket creating a durable bucket commits its record
// holding Pool.mu and the new bucket's mu (no one else can hold that one
// yet; no transaction function takes Pool.mu, so the bbolt lock it waits
// for is always released).
//
// Bucket.mu (an RWMutex) guards the bucket's blob map, segments and blob
// I/O; hits take it shared and bump atomic counters. Tier accounting is
// atomic. A goroutine that holds a bucket's lock and needs space evicts
// from other buckets only through TryLock, skipping busy ones, so two
// writers filling the pool never wait for each other. Filler callbacks
// run with their bucket write-locked: a page cannot be evicted between
// stage-in and write, and a Filler must not call back into its bucket.
// Pool.mu is held only to read or change the bucket map, never while
// taking a bucket lock.
//
// Known consequence: a writer can get ErrNoSpace while clean blobs exist
// in buckets that stayed busy through its few retries (for example one
// whose Filler is reading a slow backing store). Callers that drain treat
// ErrNoSpace as "retry after write-back", which covers this case too.
package bufferpool
