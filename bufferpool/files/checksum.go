package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
)

// Checksums of the backing file.
//
// The write-back takes the crc32c (Castagnoli, hardware accelerated) of
// every page it writes whole (its dirty ranges cover the page up to the
// file's size; a page written back in part has bytes the pool did not
// write and gets none), with the bytes past the end of the file taken as
// zeros, as a stage-in reads them. After the pass is on the backing store
// the checksums are recorded, with the backing file's size and mtime as
// the pass left them, in the file's xattr user.iowarp.crc32c. A stage-in
// of a whole page (demand, read-ahead, `iowarp stage-in`) checks the page
// against the record when the backing file's size and mtime are still
// the recorded ones: a mismatch is corruption (EIO, one log line naming
// the file and page, Stats.BackingChecksumErrors). When size or mtime
// differ the file was changed legitimately since (another node, a program
// on the backing directory, our own truncate): nothing is checked, and the
// next write-back starts a new record. A change that keeps size and mtime
// (a byte rewritten and the mtime put back, or a write within the same
// timestamp tick as ours on a file system with coarse timestamps) is, by
// this rule, taken for corruption.
//
// Why an xattr and not a sidecar index: the record travels with the
// inode: through renames and hard links, to every node that mounts the
// same backing store (another node's stage-in checks what this one wrote
// back), and away with the file when it is deleted, with no index to keep
// in step with the namespace or to collect. Its cost is a size limit
// (ext4 holds about 4 KiB of xattrs per inode: about 1000 pages in a run,
// 1 GiB of 1 MiB pages) and backing stores without user xattrs. Both fall
// back cleanly: the record stays in the daemon's memory (checked as long
// as the file object lives), the xattr is removed rather than left stale,
// and a store that refuses user xattrs is logged once and not asked again.
// The name is hidden from the doors' xattr calls (user.iowarp.*).
//
// Small reads served around the pool (readAround) and reads through a
// pool full of dirty pages are not checked: they read part of a page, and
// checking it would read all of it, which is what they exist to avoid. The
// page a second small read stages behind is checked.
//
// A page the pool holds on a slower tier is checksummed by the pool
// (bufferpool ErrCorrupt): a clean one is repaired by dropping it and
// staging it in again from the backing file (Stats.Repaired); a dirty one
// has no other copy, and the read is EIO.

const (
	sumXattr     = "user.iowarp.crc32c"
	hiddenXattrs = "user.iowarp."
	sumMagic     = "IWC1"
	// maxSumXattr bounds the xattr written (a larger record stays in
	// memory only).
	maxSumXattr = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumRecord is what the write-back recorded of the backing file.
type sumRecord struct {
	size  int64
	mtime int64 // UnixNano
	ps    int64
	sums  map[int64]uint32
}

// fileSums is a file's record, loaded from the xattr at first use.
// Safe for concurrent use.
type fileSums struct {
	mu     sync.Mutex
	loaded bool
	rec    sumRecord
	logged map[int64]bool // pages whose mismatch was logged
	// unsaved: the record changed since the xattr was last written (a
	// pass without a sync: writethrough writes); tooBig: the record no
	// longer fits an xattr (removed once, kept in memory).
	unsaved, tooBig bool
}

// pageSum is the checksum of a page whose first n bytes are data: the rest
// of the page counts as zeros.
func pageSum(data []byte, ps int64) uint32 {
	c := crc32.Checksum(data, castagnoli)
	for pad := ps - int64(len(data)); pad > 0; {
		z := min(pad, int64(len(zeroPage)))
		c = crc32.Update(c, castagnoli, zeroPage[:z])
		pad -= z
	}
	return c
}

var zeroPage [64 << 10]byte

// encode is the xattr value: magic, page size, size, mtime, then runs of
// consecutive pages (first page, count, their sums).
func (r *sumRecord) encode() []byte {
	pages := make([]int64, 0, len(r.sums))
	for i := range r.sums {
		pages = append(pages, i)
	}
	slices.Sort(pages)
	b := append([]byte(sumMagic), make([]byte, 24)...)
	binary.LittleEndian.PutUint64(b[4:], uint64(r.ps))
	binary.LittleEndian.PutUint64(b[12:], uint64(r.size))
	binary.LittleEndian.PutUint64(b[20:], uint64(r.mtime))
	for j := 0; j < len(pages); {
		k := j + 1
		for k < len(pages) && pages[k] == pages[k-1]+1 {
			k++
		}
		b = binary.LittleEndian.AppendUint64(b, uint64(pages[j]))
		b = binary.LittleEndian.AppendUint32(b, uint32(k-j))
		for _, i := range pages[j:k] {
			b = binary.LittleEndian.AppendUint32(b, r.sums[i])
		}
		j = k
	}
	return b
}

var errBadSumRecord = errors.New("bad checksum record")

// decodeSumRecord parses an xattr value; an error leaves no record.
func decodeSumRecord(b []byte) (sumRecord, error) {
	r := sumRecord{sums: map[int64]uint32{}}
	if len(b) < 28 || string(b[:4]) != sumMagic {
		return sumRecord{}, errBadSumRecord
	}
	r.ps = int64(binary.LittleEndian.Uint64(b[4:]))
	r.size = int64(binary.LittleEndian.Uint64(b[12:]))
	r.mtime = int64(binary.LittleEndian.Uint64(b[20:]))
	if r.ps <= 0 || r.size < 0 {
		return sumRecord{}, errBadSumRecord
	}
	for b = b[28:]; len(b) > 0; {
		if len(b) < 12 {
			return sumRecord{}, errBadSumRecord
		}
		first, n := int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint32(b[8:]))
		b = b[12:]
		if first < 0 || n == 0 || n > int64(len(b)/4) || first > (1<<62)/r.ps {
			return sumRecord{}, errBadSumRecord
		}
		for k := range n {
			r.sums[first+k] = binary.LittleEndian.Uint32(b[4*k:])
		}
		b = b[4*n:]
	}
	return r, nil
}

// sumsLocked returns the file's record, reading the xattr the first
// time. Called with f.sums.mu held.
func (f *file) sumsLocked() *sumRecord {
	s := &f.sums
	if s.loaded {
		return &s.rec
	}
	s.loaded = true
	s.rec = sumRecord{ps: f.fs.ps, sums: map[int64]uint32{}}
	if f.fs.noXattr.Load() {
		return &s.rec
	}
	buf := make([]byte, 4096)
	n, err := unix.Fgetxattr(int(f.backing.Fd()), sumXattr, buf)
	if errors.Is(err, unix.ERANGE) {
		if sz, err2 := unix.Fgetxattr(int(f.backing.Fd()), sumXattr, nil); err2 == nil && sz <= maxSumXattr {
			buf = make([]byte, sz)
			n, err = unix.Fgetxattr(int(f.backing.Fd()), sumXattr, buf)
		}
	}
	switch {
	case err == nil:
		if r, derr := decodeSumRecord(buf[:n]); derr == nil && r.ps == f.fs.ps {
			s.rec = r
		}
	case errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP):
		f.fs.noUserXattrs(err)
	}
	return &s.rec
}

// noUserXattrs records that the backing store takes no user xattrs.
func (fs *FS) noUserXattrs(err error) {
	if !fs.noXattr.Swap(true) {
		fs.log().Infof("backing store %s keeps no user xattrs (%v): page checksums recorded at write-back "+
			"are kept in memory only, for the files the daemon holds", fs.rootPath, err)
	}
}

// stagePage reads page i of the backing file for a stage-in (into buf,
// a whole page) and checks it against the checksum the write-back
// recorded, if the backing file is as that write-back left it.
func (f *file) stagePage(buf []byte, i int64) (int, error) {
	n, err := f.stageRead(buf, i*f.fs.ps, true)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, err
	}
	if cerr := f.checkStaged(i, buf[:n]); cerr != nil {
		return 0, cerr
	}
	return n, err
}

// checkStaged checks page i's data (its first bytes; the rest is zeros)
// against the record.
func (f *file) checkStaged(i int64, data []byte) error {
	f.sums.mu.Lock()
	rec := f.sumsLocked()
	want, ok := rec.sums[i]
	size, mtime := rec.size, rec.mtime
	f.sums.mu.Unlock()
	if !ok {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &st) != nil || st.Size != size || st.Mtim.Nano() != mtime {
		return nil // changed since the write-back: nothing to check against
	}
	f.fs.stats.sumsChecked.Add(1)
	got := pageSum(data, f.fs.ps)
	if got == want {
		return nil
	}
	f.fs.stats.backingCorrupt.Add(1)
	if f.firstMismatch(i) {
		f.fs.log().WithField("file", f.displayName()).WithField("page", i).Errorf(
			"checksum mismatch staging in page %d of %s from the backing file: crc32c %08x, written back %08x "+
				"(size and mtime as written back): the backing store returned corrupt data; the read fails with EIO",
			i, f.displayName(), got, want)
	}
	return fmt.Errorf("stage in page %d of %s: crc32c %08x, written back %08x: %w: %w",
		i, f.displayName(), got, want, ErrCorrupt, unix.EIO)
}

// firstMismatch reports whether page i's mismatch is the first of the
// file's to log (one line per page, at most 1024 pages a file).
func (f *file) firstMismatch(i int64) bool {
	f.sums.mu.Lock()
	defer f.sums.mu.Unlock()
	if f.sums.logged == nil {
		f.sums.logged = map[int64]bool{}
	}
	first := !f.sums.logged[i] && len(f.sums.logged) < 1024
	f.sums.logged[i] = true
	return first
}

// ErrCorrupt is returned (wrapped, with EIO) for data whose checksum does
// not match: a page on a slower tier of the pool, or staged in from the
// backing file.
var ErrCorrupt = bufferpool.ErrCorrupt

// sumPass collects the checksums of one write-back pass.
type sumPass struct {
	sums map[int64]uint32 // pages written whole
	drop []int64          // pages written in part: their old sums are void
}

// noteWritten records page i of a pass: whole says its ranges covered
// the page's data (buf[:valid]).
func (p *sumPass) noteWritten(i int64, data []byte, whole bool, ps int64) {
	if !whole {
		p.drop = append(p.drop, i)
		return
	}
	if p.sums == nil {
		p.sums = map[int64]uint32{}
	}
	p.sums[i] = pageSum(data, ps)
}

// startSumPassLocked begins a write-back pass: when the backing file is
// no longer as the last pass left it (changed behind us), the record's
// sums are void. Called with backingMu held.
func (f *file) startSumPassLocked() {
	var st unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &st) != nil {
		return
	}
	f.sums.mu.Lock()
	defer f.sums.mu.Unlock()
	rec := f.sumsLocked()
	if len(rec.sums) > 0 && (st.Size != rec.size || st.Mtim.Nano() != rec.mtime) {
		clear(rec.sums)
	}
}

// commitSumPassLocked records a pass that reached the backing file: its
// sums, with the backing file's size and mtime now, in memory, and when
// the pass synced (save) in the xattr too; a pass without a sync (a
// writethrough write) leaves that to the next fsync. Called with
// backingMu held.
func (f *file) commitSumPassLocked(p *sumPass, save bool) {
	var st unix.Stat_t
	if unix.Fstat(int(f.backing.Fd()), &st) != nil {
		return
	}
	f.sums.mu.Lock()
	rec := f.sumsLocked()
	for _, i := range p.drop {
		delete(rec.sums, i)
	}
	for i, c := range p.sums {
		if i*rec.ps < st.Size { // always, as truncation waits for backingMu: a guard
			rec.sums[i] = c
		}
	}
	// Sums of earlier passes past the end cannot be left: a shrink moved
	// the size, and startSumPassLocked voided them all.
	rec.size, rec.mtime = st.Size, st.Mtim.Nano()
	f.sums.unsaved = true
	f.sums.mu.Unlock()
	if save {
		f.saveSumsLocked()
	}
}

// saveSumsLocked writes the record to the xattr if it changed since.
// Called with backingMu held.
func (f *file) saveSumsLocked() {
	f.sums.mu.Lock()
	if !f.sums.unsaved || f.fs.noXattr.Load() {
		f.sums.mu.Unlock()
		return
	}
	f.sums.unsaved = false
	rec := &f.sums.rec
	var val []byte
	big := len(rec.sums) > maxSumXattr/4 // a page takes 4 bytes at the least
	if !big && len(rec.sums) > 0 {
		val = rec.encode()
		big = len(val) > maxSumXattr
	}
	if big {
		val = nil
		if f.sums.tooBig {
			f.sums.mu.Unlock()
			return // removed already
		}
		f.fs.stats.sumsNotStored.Add(1)
	}
	f.sums.tooBig = big
	f.sums.mu.Unlock()
	f.storeSums(val)
}

// storeSums writes the record's xattr, or with val nil (no record, or one
// that does not fit) removes it: a later daemon must not find an older
// record than what this one knows, even one the size and mtime would
// refuse.
func (f *file) storeSums(val []byte) {
	fd := int(f.backing.Fd())
	var err error
	if val != nil {
		if err = unix.Fsetxattr(fd, sumXattr, val, 0); err == nil {
			return
		}
	}
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		f.fs.noUserXattrs(err)
		return
	}
	if err != nil {
		f.fs.stats.sumsNotStored.Add(1) // too large for this store (E2BIG, ENOSPC): memory only
	}
	rerr := unix.Fremovexattr(fd, sumXattr)
	if errors.Is(rerr, unix.ENOTSUP) || errors.Is(rerr, unix.EOPNOTSUPP) {
		f.fs.noUserXattrs(rerr)
	}
}

// repairPage handles a page of a slower tier whose bytes did not match
// the pool's checksum (err): a clean page is dropped, to be staged in
// again from the backing file, which holds it (true); a dirty one is the
// only copy: the read fails (false). Either way one line is logged.
func (f *file) repairPage(i int64, err error) bool {
	f.fs.stats.tierCorrupt.Add(1)
	log := f.fs.log().WithField("file", f.displayName()).WithField("page", i)
	if f.fs.scratch || !f.bucket.DropCleanPage(i) {
		if !f.firstMismatch(i) {
			return false // logged at the first read that found it
		}
		log.Errorf("checksum mismatch reading page %d of %s from the pool (%v): the page is dirty, "+
			"no other copy exists: the read fails with EIO", i, f.displayName(), err)
		return false
	}
	f.fs.stats.repaired.Add(1)
	log.Warnf("checksum mismatch reading page %d of %s from the pool (%v): repaired from the backing file",
		i, f.displayName(), err)
	return true
}
