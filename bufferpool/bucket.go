package bufferpool

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// halfLife is the decay half-life of blob access scores.
const halfLife = 10 * time.Second

// blob is one blob's placement and state. Fields above the atomics are
// guarded by the owning bucket's mu (written under the write lock).
type blob struct {
	name    string // named buckets
	page    int64  // page buckets; -1 for named blobs
	tier    int    // index of the tier holding it
	off     int64  // offset of its bytes in the tier's segment
	size    int64  // logical bytes
	alloc   int64  // bytes reserved in the tier (size rounded up to 4 KiB)
	dirty   bool
	dranges dirtyRanges // page buckets: what is dirty of a dirty page
	busy    bool        // being resized: never an eviction victim
	version uint64
	st      *stored // its form on a slower tier (stored.go); nil: raw

	// Named blobs only: tags, modification time (unix ns), the version
	// number PutVersion gave the bytes, and whether the durable store
	// holds this content.
	tags    map[string]string
	mtime   int64
	gen     uint64
	durable bool

	// score and readScore are decayed access and read counts as of
	// scoreAt, with the counters folded in up to seenAcc and seenReads.
	score, readScore   float64
	scoreAt            int64
	seenAcc, seenReads uint64

	// Updated by readers under the read lock.
	accesses atomic.Uint64
	reads    atomic.Uint64
	lastUsed atomic.Int64 // unix nanoseconds
}

// touch records an access.
func (bl *blob) touch(now int64, read bool) {
	bl.accesses.Add(1)
	if read {
		bl.reads.Add(1)
	}
	bl.lastUsed.Store(now)
}

func decay(age int64) float64 {
	if age <= 0 {
		return 1
	}
	return math.Exp2(-float64(age) / float64(halfLife))
}

// scores returns the decayed access and read counts at now: frequency
// weighted by recency, as Hermes scores blobs.
func (bl *blob) scores(now int64) (score, reads float64) {
	d := decay(now - bl.scoreAt)
	score = bl.score*d + float64(bl.accesses.Load()-bl.seenAcc)
	reads = bl.readScore*d + float64(bl.reads.Load()-bl.seenReads)
	return score, reads
}

// foldLocked stores the scores at now. Needs the bucket's write lock.
func (bl *blob) foldLocked(now int64) {
	acc, rd := bl.accesses.Load(), bl.reads.Load()
	d := decay(now - bl.scoreAt)
	bl.score = bl.score*d + float64(acc-bl.seenAcc)
	bl.readScore = bl.readScore*d + float64(rd-bl.seenReads)
	bl.scoreAt, bl.seenAcc, bl.seenReads = now, acc, rd
}

// segment is a bucket's segment on one tier, open while it holds a blob.
type segment struct {
	seg     *tier.Segment
	nblobs  int  // blobs with bytes in it
	exposed bool // mapped by clients through PageTable: stays open
	// passthrough counts the kernel passthrough opens of the segment
	// (passthrough.go): it stays open and at the file's size.
	passthrough int
	ext         extentAlloc
}

// Bucket is a set of blobs. Safe for concurrent use.
type Bucket struct {
	p        *Pool
	id       uint64
	pageSize int64
	name     atomic.Pointer[string]
	pins     atomic.Int32
	codec    atomic.Pointer[codec] // for blobs moving to slower tiers (stored.go); nil: none
	bufs     sync.Pool             // *[]byte of pageSize bytes

	// Shim writes (pagetable_unsafe.go): the owner's harvest callback and
	// the pages harvests found dirty since HarvestShimWrites last asked.
	onHarvest atomic.Pointer[func(pages int)]
	harvested atomic.Int64
	// ptReaders pins the page table's mapping for lock-free reads of its
	// words (ShimMtime, AttrChanged): dropPageTableLocked waits for them.
	ptReaders atomic.Int64

	// mu guards everything below and every blob's placement and bytes.
	// Readers of resident blobs take it shared.
	mu     seqMutex // write side makes the shared page table's seq odd
	dead   bool
	pt     *pageTable // shared page table (PageTable), nil until asked for
	leased int64      // bytes of tier 0 reserved for pages shims may create (lease.go)
	// shimDropped counts pages shims created past their lease (lease.go).
	shimDropped int64
	pages       map[int64]*blob
	named       map[string]*blob
	segs        []*segment // per tier, nil while closed
	ndirty      int
	j           *bucketJournal // nil unless SetJournalTag (journal.go)

	// jsize is the file's logical size for the journal (SetSharedSize).
	jsize atomic.Int64

	// meta is the owner, group and mode (meta.go): read without a lock
	// (every cte request checks it), replaced under mu.
	meta atomic.Pointer[BucketMeta]
	// storedFlag: the durable store knows the bucket (written under mu).
	storedFlag atomic.Bool
	// kept lists the kept versions of each blob name (versions.go).
	kept map[string][]uint64
	// stored is the bytes each blob name with a copy in the blob store
	// holds of the store tier's capacity (durable.go), those recovery
	// could not put back into the pool included: a plain write or a
	// delete of the name drops the copy and gives the bytes back.
	stored map[string]int64
}

func newBucket(p *Pool, id uint64, name string, opts BucketOptions) *Bucket {
	b := &Bucket{
		p: p, id: id, pageSize: opts.PageSize,
		segs: make([]*segment, len(p.tiers)),
	}
	m := metaOf(opts, time.Now())
	b.meta.Store(&m)
	b.name.Store(&name)
	if opts.PageSize > 0 {
		b.pages = make(map[int64]*blob)
	} else {
		b.named = make(map[string]*blob)
	}
	return b
}

func (b *Bucket) Name() string    { return *b.name.Load() }
func (b *Bucket) PageSize() int64 { return b.pageSize }

// Pin keeps pages of this bucket in the first tier (organizer skips it)
// while the pin count is positive.
func (b *Bucket) Pin()   { b.pins.Add(1) }
func (b *Bucket) Unpin() { b.pins.Add(-1) }

func (b *Bucket) pinned() bool { return b.pins.Load() > 0 }

// errGone is the error for a bucket that was deleted or whose pool closed.
func (b *Bucket) errGone() error {
	if b.p.closed.Load() {
		return ErrClosed
	}
	return ErrNotFound
}

// checkLocked returns an error if the bucket is gone.
func (b *Bucket) checkLocked() error {
	if b.dead {
		return fmt.Errorf("bucket %s: %w", b.Name(), b.errGone())
	}
	return nil
}

// key names a blob for errors and BlobInfo.
func (bl *blob) key() string {
	if bl.page >= 0 {
		return strconv.FormatInt(bl.page, 10)
	}
	return bl.name
}

// currentLocked reports whether bl is still the live blob under its key.
func (b *Bucket) currentLocked(bl *blob) bool {
	if b.dead {
		return false
	}
	if bl.page >= 0 {
		return b.pages[bl.page] == bl
	}
	return b.named[bl.name] == bl
}

// segLocked returns the open segment of tier t, creating it.
func (b *Bucket) segLocked(t int) (*segment, error) {
	if s := b.segs[t]; s != nil {
		return s, nil
	}
	ts := b.p.tiers[t]
	sg, err := ts.dev.NewSegment(strconv.FormatUint(b.id, 10))
	if err != nil {
		return nil, fmt.Errorf("tier %s: bucket %s: %w", ts.cfg.Name, b.Name(), err)
	}
	s := &segment{seg: sg}
	b.segs[t] = s
	return s, nil
}

// maybeCloseLocked closes the segment of tier t if it holds nothing.
func (b *Bucket) maybeCloseLocked(t int) {
	s := b.segs[t]
	if s == nil || s.nblobs > 0 || s.exposed || s.passthrough > 0 {
		return
	}
	s.seg.Close()
	b.segs[t] = nil
}

// blobBytes is the span of bl's bytes in its segment: a whole page for
// page buckets, the extent for named blobs.
func (b *Bucket) blobBytes(bl *blob) int64 {
	if bl.page >= 0 {
		return b.pageSize
	}
	return bl.alloc
}

// attachLocked gives bl storage on tier t, whose capacity the caller
// already reserved (bl.alloc bytes). On error the reservation is released.
func (b *Bucket) attachLocked(bl *blob, t int) error {
	ts := b.p.tiers[t]
	if bl.alloc > 0 {
		s, err := b.segLocked(t)
		if err != nil {
			ts.release(bl.alloc)
			return err
		}
		s.nblobs++
		if bl.page >= 0 {
			bl.off = bl.page * b.pageSize
		} else {
			bl.off = s.ext.alloc(bl.alloc)
		}
	}
	b.enterTierLocked(bl, t)
	return nil
}

// enterTierLocked makes t bl's tier and counts bl there: in the page
// table (pages of tier 0) and in the tier's blob and dirty counts.
func (b *Bucket) enterTierLocked(bl *blob, t int) {
	bl.tier = t
	if t == 0 && bl.page >= 0 {
		b.ptSetLocked(bl.page, true)
	} else if bl.page >= 0 {
		b.raiseSizeForLocked(bl.page)
	}
	ts := b.p.tiers[t]
	ts.blobs.Add(1)
	if bl.dirty {
		ts.dirty.Add(bl.size)
	}
}

// detachLocked frees bl's storage: punch, free the extent, release the
// reservation, close an empty segment.
func (b *Bucket) detachLocked(bl *blob) error {
	ts := b.p.tiers[bl.tier]
	if bl.tier == 0 && bl.page >= 0 {
		b.ptSetLocked(bl.page, false)
	}
	var err error
	if bl.alloc > 0 {
		s := b.segs[bl.tier]
		err = s.seg.Punch(bl.off, b.blobBytes(bl))
		if bl.page < 0 {
			s.ext.release(bl.off, bl.alloc)
		}
		s.nblobs--
		ts.release(bl.alloc - b.unstoreLocked(bl))
		b.maybeCloseLocked(bl.tier)
	}
	ts.blobs.Add(-1)
	if bl.dirty {
		ts.dirty.Add(-bl.size)
	}
	return err
}

// setDirtyLocked sets bl's dirty bit, keeping the accounting.
func (b *Bucket) setDirtyLocked(bl *blob, dirty bool) {
	if bl.dirty == dirty {
		return
	}
	bl.dirty = dirty
	if !dirty {
		bl.dranges.reset()
	}
	d := bl.size
	if dirty {
		b.ndirty++
	} else {
		b.ndirty--
		d = -d
	}
	b.p.tiers[bl.tier].dirty.Add(d)
	b.jtouchLocked(bl)
}

// insertLocked adds bl to the bucket's map.
func (b *Bucket) insertLocked(bl *blob) {
	if bl.page >= 0 {
		b.pages[bl.page] = bl
	} else {
		b.named[bl.name] = bl
		b.keepCountLocked(bl.name, 1)
	}
	if bl.dirty {
		b.ndirty++
		b.jtouchLocked(bl)
	}
}

// removeLocked drops bl from the bucket and frees its storage.
func (b *Bucket) removeLocked(bl *blob) error {
	if bl.page >= 0 {
		delete(b.pages, bl.page)
	} else {
		delete(b.named, bl.name)
		b.keepCountLocked(bl.name, -1)
		b.p.cat.untagAll(b, bl)
	}
	if bl.dirty {
		b.ndirty--
	}
	b.jtouchLocked(bl)
	return b.detachLocked(bl)
}

// drop frees every blob and segment and marks the bucket dead.
func (b *Bucket) drop() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dead {
		return nil
	}
	var errs []error
	b.journalDropLocked()
	if !b.p.closed.Load() {
		if err := b.unstoreBucketLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, bl := range b.pages {
		b.releaseQuietLocked(bl)
	}
	for _, bl := range b.named {
		b.p.cat.untagAll(b, bl)
		b.releaseQuietLocked(bl)
	}
	b.pages, b.named, b.ndirty = nil, nil, 0
	b.dropPageTableLocked()
	for t, s := range b.segs {
		if s != nil {
			if err := s.seg.Close(); err != nil {
				errs = append(errs, err)
			}
			b.segs[t] = nil
		}
	}
	b.dead = true
	return errors.Join(errs...)
}

// releaseQuietLocked returns bl's accounting without touching its bytes
// (the segment is about to be closed).
func (b *Bucket) releaseQuietLocked(bl *blob) {
	ts := b.p.tiers[bl.tier]
	ts.release(bl.alloc - b.unstoreLocked(bl))
	ts.blobs.Add(-1)
	if bl.dirty {
		ts.dirty.Add(-bl.size)
	}
}

// info describes bl at now.
func (b *Bucket) infoLocked(bl *blob, now int64) BlobInfo {
	score, _ := bl.scores(now)
	var last time.Time
	if lu := bl.lastUsed.Load(); lu != 0 {
		last = time.Unix(0, lu)
	}
	bi := BlobInfo{
		Name: bl.key(), Page: bl.page, Size: bl.size,
		Tier: b.p.tiers[bl.tier].cfg.Name, Dirty: bl.dirty,
		Version: bl.version, Reads: bl.reads.Load(), Score: score, LastUsed: last,
		Generation: bl.gen, Durable: bl.durable,
	}
	if bl.mtime != 0 {
		bi.Modified = time.Unix(0, bl.mtime)
	}
	if len(bl.tags) > 0 {
		bi.Tags = maps.Clone(bl.tags)
	}
	if i := strings.IndexByte(bi.Name, 0); i >= 0 {
		bi.Name = bi.Name[:i] // a kept version: its blob's name
	}
	return bi
}

// getBuf returns a zeroed page buffer.
func (b *Bucket) getBuf() *[]byte {
	if v := b.bufs.Get(); v != nil {
		bp := v.(*[]byte)
		clear(*bp)
		return bp
	}
	buf := make([]byte, b.pageSize)
	return &buf
}

func (b *Bucket) putBuf(bp *[]byte) { b.bufs.Put(bp) }

// copyBufs holds 1 MiB buffers for moving blobs between segments.
var copyBufs = sync.Pool{New: func() any { buf := make([]byte, 1<<20); return &buf }}

// copySeg copies n bytes from src at soff to dst at doff.
func copySeg(dst *tier.Segment, doff int64, src *tier.Segment, soff, n int64) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for n > 0 {
		c := min(n, int64(len(buf)))
		if err := src.ReadAt(buf[:c], soff); err != nil {
			return err
		}
		if err := dst.WriteAt(buf[:c], doff); err != nil {
			return err
		}
		soff, doff, n = soff+c, doff+c, n-c
	}
	return nil
}

// moveLocked moves bl to tier dst, whose capacity the caller reserved.
func (b *Bucket) moveLocked(bl *blob, dst int) error {
	ts := b.p.tiers[dst]
	if bl.alloc == 0 {
		b.p.tiers[bl.tier].blobs.Add(-1)
		if bl.dirty {
			b.p.tiers[bl.tier].dirty.Add(-bl.size)
			ts.dirty.Add(bl.size)
		}
		ts.blobs.Add(1)
		bl.tier = dst
		return nil
	}
	ds, err := b.segLocked(dst)
	if err != nil {
		ts.release(bl.alloc)
		return err
	}
	doff := bl.off
	if bl.page < 0 {
		doff = ds.ext.alloc(bl.alloc)
	}
	st, err := b.transferLocked(bl, ds.seg, doff, dst)
	if err != nil {
		ds.seg.Punch(doff, b.blobBytes(bl))
		if bl.page < 0 {
			ds.ext.release(doff, bl.alloc)
		}
		ts.release(bl.alloc)
		b.maybeCloseLocked(dst)
		return fmt.Errorf("move %s of bucket %s to tier %s: %w", bl.key(), b.Name(), ts.cfg.Name, err)
	}
	ds.nblobs++
	err = b.detachLocked(bl)
	bl.off = doff
	b.enterTierLocked(bl, dst)
	b.storeLocked(bl, st)
	b.jtouchLocked(bl)
	return err
}

// List describes every blob.
func (b *Bucket) List() []BlobInfo {
	now := time.Now().UnixNano()
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]BlobInfo, 0, len(b.pages)+len(b.named))
	for _, bl := range b.pages {
		out = append(out, b.infoLocked(bl, now))
	}
	for _, bl := range b.named {
		if !hiddenName(bl.name) {
			out = append(out, b.infoLocked(bl, now))
		}
	}
	sortInfos(out)
	return out
}

// Stat describes one blob.
func (b *Bucket) Stat(name string) (BlobInfo, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkLocked(); err != nil {
		return BlobInfo{}, err
	}
	bl, err := b.lookupLocked(name)
	if err != nil {
		return BlobInfo{}, err
	}
	return b.infoLocked(bl, time.Now().UnixNano()), nil
}

// Delete removes a blob (named or, for page buckets, the decimal index).
func (b *Bucket) Delete(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked(); err != nil {
		return err
	}
	if b.pageSize <= 0 {
		return b.deleteNamedLocked(name)
	}
	bl, err := b.lookupLocked(name)
	if err != nil {
		return err
	}
	return b.removeLocked(bl)
}

// deleteNamedLocked removes named blob name, its kept versions and their
// stored copies (one commit: a crash leaves all of them or none).
func (b *Bucket) deleteNamedLocked(name string) error {
	if hiddenName(name) {
		return fmt.Errorf("blob %q of bucket %s: %w", name, b.Name(), ErrInvalid)
	}
	bl := b.named[name]
	kept := b.keptLocked(name)
	_, inStore := b.stored[name] // in the store, maybe not in the pool (recovery skipped it)
	if bl == nil && len(kept) == 0 && !inStore {
		return fmt.Errorf("blob %q of bucket %s: %w", name, b.Name(), ErrNotFound)
	}
	keys := []string{name}
	for _, v := range kept {
		keys = append(keys, v.name)
	}
	if err := b.unstoreKeysLocked(keys); err != nil {
		return err
	}
	err := b.deleteVersionsLocked(name)
	if bl != nil {
		err = cmpErr(err, b.removeLocked(bl))
	}
	return err
}

// lookupLocked finds a blob by name (decimal index for page buckets).
func (b *Bucket) lookupLocked(name string) (*blob, error) {
	var bl *blob
	if b.pageSize > 0 {
		i, err := strconv.ParseInt(name, 10, 64)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("blob %q of page bucket %s: %w", name, b.Name(), ErrInvalid)
		}
		bl = b.pages[i]
	} else if !hiddenName(name) {
		bl = b.named[name]
	}
	if bl == nil {
		return nil, fmt.Errorf("blob %q of bucket %s: %w", name, b.Name(), ErrNotFound)
	}
	return bl, nil
}

// sortInfos orders blobs by page index, then name.
func sortInfos(infos []BlobInfo) {
	slices.SortFunc(infos, func(x, y BlobInfo) int {
		if c := cmp.Compare(x.Page, y.Page); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
}
