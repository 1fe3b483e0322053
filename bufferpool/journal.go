package bufferpool

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// The file-tier journal (Config.Journal). A page bucket whose owner gave
// it a tag (SetJournalTag) has its dirty pages on file tiers logged in
// that tier's journal (bufferpool/tier/journal.go): bucket tag, page,
// version, segment file and offset, CRC-32C and the file's logical size
// (SetSharedSize). After kill -9 the next pool finds the journal of the
// dead one (Pool.Replay) and hands back the pages that still match their
// checksum, so that the owner writes them back before it serves.
//
// Writes only mark a page (jtouchLocked); the journaler logs marked pages
// every JournalInterval (SyncJournal), reading each one under its
// bucket's lock to checksum it, appends the records in one write(2) per
// journal and then fdatasyncs the segment files the records point into,
// then the journals. So a dirty page on a file tier is
// replayable from about one interval after it got there; what changed
// since it was logged fails its checksum and is skipped, never written
// back half new. Truncation and bucket deletion log at once (a truncate
// must never be undone by a replay).
//
// Lock order: the journaler takes each bucket's lock in turn, holding no
// other; Pool.jmu (the set of marked buckets) is a leaf.

// jpage is what the journal of a tier holds about one page.
type jpage struct {
	tier int
	rec  tier.Record
}

// bucketJournal is a bucket's journal state, guarded by Bucket.mu.
type bucketJournal struct {
	tag     []byte
	tagFn   func() []byte      // computes tag when first needed (SetJournalTagFunc)
	touched map[int64]struct{} // pages to look at in the next pass
	logged  map[int64]jpage    // pages the journals hold as dirty
	known   []bool             // per tier: its journal has the bucket's RecBucket
	size    int64              // last size logged
}

// SetJournalTag makes the bucket's dirty pages on file tiers journaled,
// under tag (the owner's name for the file, handed back by Replay), with
// size as the file's logical size until SetSharedSize changes it. A
// no-op without Config.Journal or for named-blob buckets.
func (b *Bucket) SetJournalTag(tag []byte, size int64) {
	tag = append([]byte(nil), tag...)
	b.SetJournalTagFunc(func() []byte { return tag }, size)
}

// SetJournalTagFunc is SetJournalTag with the tag computed by fn, under
// the bucket's lock, when a journal first needs it: most files never put a
// dirty page on a file tier, and naming one costs the owner system calls.
func (b *Bucket) SetJournalTagFunc(fn func() []byte, size int64) {
	if !b.p.journaling() || b.pageSize <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jsize.Store(size)
	if b.j == nil {
		b.j = &bucketJournal{known: make([]bool, len(b.p.tiers))}
	}
	b.j.tag, b.j.tagFn = nil, fn
}

// tagLocked is the bucket's journal tag, computed on first use.
func (j *bucketJournal) tagLocked() []byte {
	if j.tag == nil && j.tagFn != nil {
		j.tag = append([]byte{}, j.tagFn()...)
		j.tagFn = nil
	}
	return j.tag
}

func (p *Pool) journaling() bool { return p.journals != nil }

// jtouchLocked marks page blob bl for the next journal pass if its state
// may concern a journal: it is on a journaled tier, or a journal holds it.
func (b *Bucket) jtouchLocked(bl *blob) {
	j := b.j
	if j == nil || bl.page < 0 {
		return
	}
	if _, logged := j.logged[bl.page]; !logged && (!bl.dirty || b.p.journals[bl.tier] == nil) {
		return
	}
	if j.touched == nil {
		j.touched = make(map[int64]struct{})
	}
	j.touched[bl.page] = struct{}{}
	b.p.jmark(b)
}

// jmark queues b for the next journal pass.
func (p *Pool) jmark(b *Bucket) {
	p.jmu.Lock()
	p.jpending[b] = struct{}{}
	p.jmu.Unlock()
}

// jsizeChanged queues b if its journals hold pages and the size moved.
func (b *Bucket) jsizeChangedLocked() {
	if j := b.j; j != nil && len(j.logged) > 0 && j.size != b.jsize.Load() {
		b.p.jmark(b)
	}
}

// SyncJournal logs every marked page now and makes the journals durable.
// The journaler calls it every JournalInterval; tests call it directly.
func (p *Pool) SyncJournal() error {
	if !p.journaling() {
		return nil
	}
	p.jsyncMu.Lock()
	defer p.jsyncMu.Unlock()
	p.jmu.Lock()
	pending := p.jpending
	p.jpending = make(map[*Bucket]struct{})
	p.jmu.Unlock()
	var first error
	segs := make(map[*tier.Segment]struct{})
	for b := range pending {
		for more := true; more; {
			var err error
			b.mu.Lock()
			more, err = b.journalLocked(journalBatch, segs)
			b.mu.Unlock()
			if err != nil {
				p.jmark(b) // retry next pass
				first = cmpErr(first, err)
				break
			}
		}
	}
	// The data before the records that point to it. A segment closed
	// meanwhile fails with ErrClosed: its pages left, nothing to keep.
	for sg := range segs {
		if err := sg.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			first = cmpErr(first, err)
		}
	}
	for t, j := range p.journals {
		if j == nil {
			continue
		}
		if j.Size() > compactAt {
			first = cmpErr(first, p.compactJournal(t))
		}
		first = cmpErr(first, j.Sync())
	}
	if first != nil {
		p.jerrors.Add(1)
	}
	return first
}

// compactAt is the journal size past which SyncJournal rewrites it with
// only what it still needs (the pages it holds as dirty).
var compactAt int64 = 16 << 20

// compactJournal rewrites tier t's journal as a snapshot of the buckets'
// journal state (see tier.Journal on how Append runs meanwhile).
func (p *Pool) compactJournal(t int) error {
	j := p.journals[t]
	if err := j.StartCompact(); err != nil {
		return err
	}
	var err error
	for _, b := range p.snapshot() {
		b.mu.Lock()
		err = b.snapshotJournalLocked(t)
		b.mu.Unlock()
		if err != nil {
			break
		}
	}
	return cmpErr(err, j.FinishCompact(err == nil))
}

// snapshotJournalLocked appends what tier t's next journal needs of b.
func (b *Bucket) snapshotJournalLocked(t int) error {
	j := b.j
	if j == nil || b.dead {
		return nil
	}
	recs := []tier.Record{{Kind: tier.RecBucket, Bucket: b.id, Tag: j.tagLocked(), PageSize: b.pageSize}}
	for _, lp := range j.logged {
		if lp.tier == t {
			recs = append(recs, lp.rec)
		}
	}
	if len(recs) == 1 {
		j.known[t] = false // a later page record brings its RecBucket
		return nil
	}
	j.known[t] = true
	recs = append(recs, tier.Record{Kind: tier.RecSize, Bucket: b.id, Size: j.size})
	return b.p.journals[t].AppendNext(recs...)
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// journaler runs SyncJournal every interval until Close.
func (p *Pool) journaler(interval time.Duration) {
	defer close(p.jdone)
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
			p.SyncJournal()
		}
	}
}

// jbatch collects, for one bucket pass, the records per tier journal and
// the changes of the bucket's journal state, applied once the records are
// appended (a failed append leaves the state as it was, and the pages
// marked for the next pass).
type jbatch struct {
	recs  [][]tier.Record
	apply []func()
	segs  map[*tier.Segment]struct{} // the pass's segments to sync, or nil
}

func (jb *jbatch) add(t int, r tier.Record) { jb.recs[t] = append(jb.recs[t], r) }

// journalBatch bounds the pages one journal pass reads under a bucket's
// lock before letting go of it, so that a file with many pages on the
// file tier is not locked for long.
var journalBatch = 32

// journalLocked logs up to limit (0: all) of the bucket's marked pages,
// and its size once none is left; more reports marked pages left.
func (b *Bucket) journalLocked(limit int, segs map[*tier.Segment]struct{}) (more bool, err error) {
	j := b.j
	if j == nil || b.dead {
		return false, nil
	}
	pages := make([]int64, 0, min(len(j.touched), max(limit, 1)))
	for i := range j.touched {
		if limit > 0 && len(pages) == limit {
			more = true
			break
		}
		pages = append(pages, i)
	}
	batch := &jbatch{recs: make([][]tier.Record, len(b.p.tiers)), segs: segs}
	known := append([]bool(nil), j.known...)
	for _, i := range pages {
		if err := b.journalPageLocked(batch, known, i); err != nil {
			return false, err
		}
	}
	size := b.jsize.Load()
	logSize := !more && size != j.size && (len(j.logged) > 0 || len(batch.apply) > 0)
	if logSize {
		for t := range batch.recs {
			if known[t] {
				batch.add(t, tier.Record{Kind: tier.RecSize, Bucket: b.id, Size: size})
			}
		}
	}
	if err := b.appendLocked(batch.recs); err != nil {
		return false, err
	}
	for _, fn := range batch.apply {
		fn()
	}
	for _, i := range pages {
		delete(j.touched, i)
	}
	j.known = known
	if logSize {
		j.size = size
	}
	return more, nil
}

// journalPageLocked adds to batch what the journals must learn of page i.
func (b *Bucket) journalPageLocked(batch *jbatch, known []bool, i int64) error {
	j := b.j
	bl := b.pages[i]
	old, logged := j.logged[i]
	if bl != nil && bl.dirty && b.p.journals[bl.tier] != nil {
		if logged && old.tier == bl.tier && old.rec.Version == bl.version {
			return nil
		}
		rec, err := b.pageRecordLocked(bl)
		if err != nil {
			return err
		}
		if logged && old.tier != bl.tier {
			b.goneLocked(batch, i, old)
		}
		if !known[bl.tier] {
			known[bl.tier] = true
			batch.add(bl.tier, tier.Record{Kind: tier.RecBucket, Bucket: b.id, Tag: j.tagLocked(), PageSize: b.pageSize})
		}
		batch.add(bl.tier, rec)
		if batch.segs != nil {
			batch.segs[b.segs[bl.tier].seg] = struct{}{}
		}
		t := bl.tier
		batch.apply = append(batch.apply, func() {
			if !logged || old.tier != t {
				b.p.tiers[t].jpages.Add(1)
			}
			if j.logged == nil {
				j.logged = make(map[int64]jpage)
			}
			j.logged[i] = jpage{tier: t, rec: rec}
		})
		return nil
	}
	if logged {
		b.goneLocked(batch, i, old)
		batch.apply = append(batch.apply, func() { delete(j.logged, i) })
	}
	return nil
}

// goneLocked logs that page i left old's tier.
func (b *Bucket) goneLocked(batch *jbatch, i int64, old jpage) {
	batch.add(old.tier, tier.Record{Kind: tier.RecGone, Bucket: b.id, Page: i})
	batch.apply = append(batch.apply, func() { b.p.tiers[old.tier].jpages.Add(-1) })
}

// pageRecordLocked reads page bl and describes it for the journal.
func (b *Bucket) pageRecordLocked(bl *blob) (tier.Record, error) {
	bp := b.getBuf()
	defer b.putBuf(bp)
	seg := b.segs[bl.tier].seg
	if bl.st != nil && bl.st.c != nil {
		return tier.Record{}, fmt.Errorf("journal page %d of bucket %s: compressed on tier %s: %w",
			bl.page, b.Name(), b.p.tiers[bl.tier].cfg.Name, ErrBusy)
	}
	if err := seg.ReadAt(*bp, bl.off); err != nil {
		return tier.Record{}, fmt.Errorf("journal page %d of bucket %s: %w", bl.page, b.Name(), err)
	}
	return tier.Record{
		Kind: tier.RecPage, Bucket: b.id, Page: bl.page, Version: bl.version,
		Segment: seg.Name(), Off: bl.off, Len: b.pageSize,
		CRC: crc32.Checksum(*bp, tier.Castagnoli), Size: b.jsize.Load(),
	}, nil
}

// appendLocked appends each tier's records to its journal.
func (b *Bucket) appendLocked(batch [][]tier.Record) error {
	for t, recs := range batch {
		if len(recs) > 0 {
			if err := b.p.journals[t].Append(recs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// journalDropLocked logs, at once, that the bucket is gone (not when the
// whole pool closes: its journals go with it).
func (b *Bucket) journalDropLocked() {
	j := b.j
	if j == nil || b.p.closed.Load() {
		return
	}
	for t, known := range j.known {
		if known {
			b.p.journals[t].Append(tier.Record{Kind: tier.RecDrop, Bucket: b.id})
		}
	}
	for _, lp := range j.logged {
		b.p.tiers[lp.tier].jpages.Add(-1)
	}
	b.j = nil
}

// journalTruncateLocked logs a truncation to size at once.
func (b *Bucket) journalTruncateLocked(size int64) error {
	if b.j == nil {
		return nil
	}
	b.jsize.Store(size)
	if _, err := b.journalLocked(0, nil); err != nil {
		return fmt.Errorf("journal truncate of bucket %s: %w", b.Name(), err)
	}
	return nil
}
