package bufferpool

import (
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// Blobs on slower tiers: checksums and compression.
//
// A blob that moves to a tier that is not memory (a demotion to a file
// tier, or a move between file tiers) is written there in chunks of
// sumChunk logical bytes (storedChunk when compressed), each with its
// crc32c (Castagnoli, hardware accelerated: hash/crc32 uses SSE4.2/ARMv8
// CRC instructions), and, when its bucket asks for a codec
// (Bucket.SetCompress), compressed chunk by chunk. The first chunk
// decides: when it does not shrink to 7/8 or less, the whole blob is
// stored raw (only checksummed), so incompressible data costs one trial
// compression per blob, not one per chunk. A chunk that does not shrink in
// a compressed blob is stored raw inside it. The description of the stored
// form (codec, chunk offsets, checksums) lives with the blob in memory
// (blob.st): the tier's bytes are this daemon's alone, and a dead daemon's
// segments are only replayed through the journal, whose pages are never
// compressed (below).
//
// Every read of such a blob (ReadPage, SnapshotDirty, Get, PartialGet, the
// move up to a faster tier) reads the chunks it touches whole,
// decompresses them and checks their crc32c: a mismatch is ErrCorrupt, and
// nothing of the chunk is returned. The tier's TierStats.ChecksumErrors
// counts the blob once; from then on the organizer does not move it (each
// move would fail the same way), and every read of its bad chunk fails.
// The pool has no second copy of a blob; the caller that has one
// (bufferpool/files: a clean page is on the backing file) repairs by
// dropping the page and staging it in again.
//
// A blob moved to a memory tier is stored raw, without checksums: the RAM
// tier is what shims map and write in place. A blob written in place on a
// slower tier (WritePage, PutPage, Put/PartialPut, ZeroRange, PunchRange,
// Truncate's tail) is first made plain again: decompressed in place (the
// capacity compression saved is reserved again, or the write fails with
// ErrNoSpace) and its checksums dropped, until it moves again. A write of
// all of it (PutPage, Put) drops the form without decoding, so a blob that
// failed its checksum can be replaced. Dirty pages of a journaled bucket
// are checksummed but never compressed, as the journal's replay reads page
// images from a dead daemon's segment files.
//
// Capacity: a compressed blob takes roundUp(its stored bytes) of its
// tier's capacity (a page keeps its place i*PageSize in the sparse
// segment, a named blob its extent; the rest is a hole on disk).
// TierStats.SavedBytes is what that leaves free.

// storeSlower is false only in the benchmark that measures a move as it
// was before stored forms (a plain copy), its baseline.
var storeSlower = true

// storedChunk is the unit of compression (a compressed blob's checksums
// are per chunk too), sumChunk that of the checksums of a blob stored
// raw: a small read from a slower tier reads (and checks) one or two
// chunks, not a page. A 4 KiB read of a checksummed page in the page
// cache took 1.75x a plain one with 16 KiB chunks, 4x with 64 KiB
// (BenchmarkSlowTierRead, medians on a loaded machine); compression wants
// the larger chunk (zstd on the HDF5 checkpoint: ratio 2.81 with 64 KiB).
// The price is memory: 4 bytes of checksum per 16 KiB held on slower
// tiers, 256 B per 1 MiB page, 256 MiB per TiB of file tier.
const (
	storedChunk = 64 << 10
	sumChunk    = 16 << 10
)

// castagnoli is the crc32c table (the journal's, tier.Castagnoli).
var castagnoli = tier.Castagnoli

// ErrCorrupt: a blob's bytes on a tier do not match the checksum taken
// when it was written there. Nothing of the corrupt chunk is returned.
var ErrCorrupt = errors.New("bufferpool: checksum mismatch")

// stored is how a blob is laid out on a slower tier. Guarded by the
// bucket's mu, like the blob.
type stored struct {
	c     codec    // nil: chunk k is raw at k*chunk
	chunk int64    // storedChunk if compressed, else sumChunk
	offs  []uint32 // c != nil: chunk k is bytes [offs[k], offs[k+1]) from the blob's offset; raw where that is its logical length
	sums  []uint32 // crc32c of each chunk's logical bytes
	// saved is the capacity of the tier the compression leaves free.
	saved int64
	span  int64 // logical bytes described
	// bad: a read found a chunk that fails its checksum. It is counted
	// once, and the organizer no longer tries to move the blob (each try
	// would fail the same way); reads still check and fail.
	bad atomic.Bool
}

// storeCounters are a tier's counters of stored forms (TierStats).
type storeCounters struct {
	summed     atomic.Int64  // blobs with checksums
	compressed atomic.Int64  // blobs compressed
	logical    atomic.Int64  // logical bytes of the compressed blobs
	saved      atomic.Int64  // capacity they leave free
	corrupt    atomic.Uint64 // blobs found failing their checksums there (each once)
}

// chunkBufs holds scratch room for one chunk's compressed form.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, 3*storedChunk); return &b }}

// spanLocked is the logical bytes of bl in its segment.
func (b *Bucket) spanLocked(bl *blob) int64 {
	if bl.page >= 0 {
		return b.pageSize
	}
	return bl.size
}

// chunks is the number of chunks of the form.
func (st *stored) chunks() int { return int((st.span + st.chunk - 1) / st.chunk) }

// chunkLen is the logical length of chunk k.
func (st *stored) chunkLen(k int) int64 { return min(st.chunk, st.span-int64(k)*st.chunk) }

// batchBufs holds buffers of one batch (storedBatch logical bytes) for
// reads and moves of stored blobs.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, storedBatch); return &b }}

// storedBatch is how much a move or a large read handles per I/O: the
// chunks of a batch are read (and written) with one call each.
const storedBatch = 16 * storedChunk

// buffer returns n bytes of scratch: pooled up to storedBatch, with the
// function that gives them back.
func buffer(n int64) ([]byte, func()) {
	if n > storedBatch {
		return make([]byte, n), func() {}
	}
	bp := batchBufs.Get().(*[]byte)
	return (*bp)[:n], func() { batchBufs.Put(bp) }
}

// readBlobLocked reads buf at off of bl, through its stored form: the
// chunks it touches are read with one call, decompressed and checked.
// Needs the bucket's lock (shared is enough).
func (b *Bucket) readBlobLocked(bl *blob, off int64, buf []byte) error {
	seg := b.segs[bl.tier].seg
	st := bl.st
	if st == nil || len(buf) == 0 {
		return seg.ReadAt(buf, bl.off+off)
	}
	end := off + int64(len(buf))
	if end > st.span { // a named blob's bytes past its size read as zero
		clear(buf[max(0, st.span-off):])
		if off >= st.span {
			return nil
		}
		buf, end = buf[:st.span-off], st.span
	}
	k0, k1 := int(off/st.chunk), int((end-1)/st.chunk)
	lo, hi := int64(k0)*st.chunk, min(int64(k1+1)*st.chunk, st.span)
	dst := buf
	if lo != off || hi != end {
		tmp, put := buffer(hi - lo)
		defer put()
		dst = tmp
	}
	if err := b.readChunksLocked(bl, k0, k1, dst); err != nil {
		return err
	}
	if &dst[0] != &buf[0] {
		copy(buf, dst[off-lo:])
	}
	return nil
}

// readChunksLocked reads chunks k0..k1 of bl into dst (their logical
// bytes) and checks them.
func (b *Bucket) readChunksLocked(bl *blob, k0, k1 int, dst []byte) error {
	st, seg := bl.st, b.segs[bl.tier].seg
	base := int64(k0) * st.chunk
	if st.c == nil {
		if err := seg.ReadAt(dst, bl.off+base); err != nil {
			return fmt.Errorf("read %s of bucket %s: %w", bl.key(), b.Name(), err)
		}
	} else {
		clo, chi := int64(st.offs[k0]), int64(st.offs[k1+1])
		cbuf, put := buffer(chi - clo)
		defer put()
		if err := seg.ReadAt(cbuf, bl.off+clo); err != nil {
			return fmt.Errorf("read %s of bucket %s: %w", bl.key(), b.Name(), err)
		}
		for k := k0; k <= k1; k++ {
			piece := cbuf[int64(st.offs[k])-clo : int64(st.offs[k+1])-clo]
			d := dst[int64(k)*st.chunk-base:][:st.chunkLen(k)]
			if len(piece) == len(d) {
				copy(d, piece) // stored raw: it did not shrink
			} else if err := st.c.decode(d, piece); err != nil {
				return b.corruptLocked(bl, k, fmt.Sprintf("%s: %v", st.c.name(), err))
			}
		}
	}
	for k := k0; k <= k1; k++ {
		d := dst[int64(k)*st.chunk-base:][:st.chunkLen(k)]
		if got := crc32.Checksum(d, castagnoli); got != st.sums[k] {
			return b.corruptLocked(bl, k, fmt.Sprintf("crc32c %08x, written %08x", got, st.sums[k]))
		}
	}
	return nil
}

func (b *Bucket) corruptLocked(bl *blob, k int, why string) error {
	ts := b.p.tiers[bl.tier]
	if !bl.st.bad.Swap(true) {
		ts.sc.corrupt.Add(1)
	}
	return fmt.Errorf("%s of bucket %s on tier %s, bytes [%d,+%d): %s: %w", bl.key(), b.Name(), ts.cfg.Name,
		int64(k)*bl.st.chunk, bl.st.chunkLen(k), why, ErrCorrupt)
}

// codecForLocked is the codec bl gets on a slower tier: its bucket's,
// except for a dirty page the journal may replay from the segment.
func (b *Bucket) codecForLocked(bl *blob) codec {
	c := b.codec.Load()
	if c == nil || (bl.page >= 0 && bl.dirty && b.j != nil) {
		return nil
	}
	return *c
}

// transferLocked writes bl's logical bytes to dseg at doff, in the form
// tier dst keeps them, and returns that form (nil: raw). It moves a
// batch of chunks per read and per write.
func (b *Bucket) transferLocked(bl *blob, dseg *tier.Segment, doff int64, dst int) (*stored, error) {
	if bl.st != nil && bl.st.bad.Load() {
		return nil, fmt.Errorf("move %s of bucket %s: failed its checksum: %w", bl.key(), b.Name(), ErrCorrupt)
	}
	span := b.spanLocked(bl)
	memory := span == 0 || b.p.tiers[dst].memory() || !storeSlower
	if memory && bl.st == nil {
		return nil, copySeg(dseg, doff, b.segs[bl.tier].seg, bl.off, span)
	}
	lbuf, put := buffer(min(span, storedBatch))
	defer put()
	var st *stored
	var first []byte // chunk 0 compressed by the trial
	if !memory {
		fp := chunkBufs.Get().(*[]byte)
		defer chunkBufs.Put(fp)
		var err error
		if st, first, err = b.newFormLocked(bl, span, lbuf, (*fp)[:0]); err != nil {
			return nil, err
		}
	}
	obuf, oput := buffer(min(span, storedBatch))
	defer oput()
	cp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(cp)
	var pos int64 // stored bytes written (compressed)
	for lo := int64(0); lo < span; lo += storedBatch {
		logical := lbuf[:min(storedBatch, span-lo)]
		if err := b.readBlobLocked(bl, lo, logical); err != nil {
			return nil, err
		}
		if st == nil {
			if err := dseg.WriteAt(logical, doff+lo); err != nil {
				return nil, err
			}
			continue
		}
		out := logical
		if st.c != nil {
			out = obuf[:0]
		}
		for c := int64(0); c < int64(len(logical)); c += st.chunk {
			k := int((lo + c) / st.chunk)
			chunk := logical[c:min(c+st.chunk, int64(len(logical)))]
			st.sums[k] = crc32.Checksum(chunk, castagnoli)
			if st.c == nil {
				continue
			}
			enc, ok := first, true
			if k > 0 {
				enc, ok = st.c.encode((*cp)[:0], chunk)
			}
			if !ok {
				enc = chunk
			}
			out = append(out, enc...)
			st.offs[k+1] = uint32(pos + int64(len(out)))
		}
		if st.c == nil {
			pos = lo
		}
		if err := dseg.WriteAt(out, doff+pos); err != nil {
			return nil, err
		}
		pos += int64(len(out))
	}
	if st != nil && st.c != nil {
		st.saved = max(0, roundUp(span)-roundUp(pos))
	}
	return st, nil
}

// newFormLocked starts the form of bl on a slower tier: compressed with
// the bucket's codec when its first chunk shrinks to 7/8 or less (first
// is that chunk compressed, into room), else raw with checksums. scratch
// holds at least a chunk.
func (b *Bucket) newFormLocked(bl *blob, span int64, scratch, room []byte) (st *stored, first []byte, err error) {
	st = &stored{c: b.codecForLocked(bl), chunk: storedChunk, span: span}
	if st.c != nil {
		chunk := scratch[:min(storedChunk, span)]
		if err := b.readBlobLocked(bl, 0, chunk); err != nil {
			return nil, nil, err
		}
		enc, ok := st.c.encode(room, chunk)
		if ok && len(enc)*8 <= len(chunk)*7 {
			first = enc
		} else {
			st.c = nil // does not pay: the blob is stored raw
		}
	}
	if st.c == nil {
		st.chunk = sumChunk
	} else {
		st.offs = make([]uint32, st.chunks()+1)
	}
	st.sums = make([]uint32, st.chunks())
	return st, first, nil
}

// storeLocked makes st bl's form on its tier t (after a move there):
// the capacity it saves goes back to the tier.
func (b *Bucket) storeLocked(bl *blob, st *stored) {
	bl.st = st
	if st == nil {
		return
	}
	sc := &b.p.tiers[bl.tier].sc
	sc.summed.Add(1)
	if st.c != nil {
		sc.compressed.Add(1)
		sc.logical.Add(st.span)
		sc.saved.Add(st.saved)
		b.p.tiers[bl.tier].release(st.saved)
	}
}

// unstoreLocked forgets bl's stored form (it leaves the tier, or is made
// plain) and returns the capacity its compression had saved, which the
// caller must account for.
func (b *Bucket) unstoreLocked(bl *blob) (saved int64) {
	st := bl.st
	if st == nil {
		return 0
	}
	bl.st = nil
	sc := &b.p.tiers[bl.tier].sc
	sc.summed.Add(-1)
	if st.c != nil {
		sc.compressed.Add(-1)
		sc.logical.Add(-st.span)
		sc.saved.Add(-st.saved)
	}
	return st.saved
}

// plainLocked makes bl raw and unchecksummed where it is, before it is
// written in place: with keep, a compressed blob is decompressed into its
// place (ErrCorrupt if it fails its checksum); without, the caller
// overwrites all of it and only the form goes. Either way the capacity
// compression saved is taken back (ErrNoSpace if the tier has none).
func (b *Bucket) plainLocked(bl *blob, keep bool) error {
	st := bl.st
	if st == nil {
		return nil
	}
	if st.c == nil {
		b.unstoreLocked(bl)
		return nil
	}
	ts := b.p.tiers[bl.tier]
	if st.saved > 0 && !ts.reserve(st.saved) {
		return fmt.Errorf("decompress %s of bucket %s on tier %s to write it: %w", bl.key(), b.Name(), ts.cfg.Name, ErrNoSpace)
	}
	if !keep {
		b.unstoreLocked(bl)
		return nil
	}
	if err := b.decodeInPlaceLocked(bl); err != nil {
		ts.release(st.saved)
		return err
	}
	b.unstoreLocked(bl)
	return nil
}

// decodeInPlaceLocked rewrites compressed bl raw in its place, a batch
// at a time from the last: chunk k's compressed bytes end at or before
// (k+1)*storedChunk, so writing a batch raw never reaches the compressed
// bytes of an earlier one. Every chunk is checked before the first write
// (a blob larger than a batch is read twice), so a corrupt one fails the
// call with the blob as it was.
func (b *Bucket) decodeInPlaceLocked(bl *blob) error {
	st, seg := bl.st, b.segs[bl.tier].seg
	buf, put := buffer(min(st.span, storedBatch))
	defer put()
	last := (st.span - 1) / storedBatch * storedBatch
	if last > 0 {
		for lo := int64(0); lo < st.span; lo += storedBatch {
			if err := b.readBlobLocked(bl, lo, buf[:min(storedBatch, st.span-lo)]); err != nil {
				return err
			}
		}
	}
	for lo := last; lo >= 0; lo -= storedBatch {
		batch := buf[:min(storedBatch, st.span-lo)]
		if err := b.readBlobLocked(bl, lo, batch); err != nil {
			return err // only the last batch, read first: nothing written yet
		}
		if err := seg.WriteAt(batch, bl.off+lo); err != nil {
			return err
		}
	}
	return nil
}

// SetCompress sets the codec (one of Codecs; "" is none) blobs of the
// bucket get when they move to a slower tier from now on. Blobs already
// there keep theirs.
func (b *Bucket) SetCompress(name string) error {
	c, err := codecByName(name)
	if err != nil {
		return err
	}
	if c == nil {
		b.codec.Store(nil)
	} else {
		b.codec.Store(&c)
	}
	return nil
}

// Compress is the bucket's codec name (CompressNone if none).
func (b *Bucket) Compress() string {
	if c := b.codec.Load(); c != nil {
		return (*c).name()
	}
	return CompressNone
}
