package bufferpool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// blockSize is the accounting unit: every blob costs its size rounded up
// to it.
const blockSize = 4096

// maxOffset bounds blob sizes and segment offsets, far below overflow.
const maxOffset = 1 << 60

func roundUp(n int64) int64 { return (n + blockSize - 1) &^ (blockSize - 1) }

// Pool is the Context Transfer Engine: buckets of blobs placed on tiers.
// Safe for concurrent use.
type Pool struct {
	tiers        []*tierState
	placement    string
	promoteReads float64
	swapCost     float64
	interval     time.Duration

	rr     atomic.Uint64 // round-robin cursor
	rngMu  sync.Mutex
	rng    *rand.Rand // guarded by rngMu
	nextID atomic.Uint64

	hits, misses atomic.Uint64
	closed       atomic.Bool
	lease        leaseCounters

	// orgMu serialises organizer passes.
	orgMu sync.Mutex

	// mu is a leaf lock: never held while taking a bucket lock.
	mu      sync.Mutex
	buckets map[string]*Bucket
	cat     catalog   // name and tag indexes (catalog.go)
	st      blobStore // durable named blobs (durable.go)

	// File-tier journal (journal.go): journals per tier (nil entries for
	// tiers without one; nil slice without Config.Journal).
	journals []*tier.Journal
	jsyncMu  sync.Mutex // one journal pass at a time
	jmu      sync.Mutex // leaf: guards jpending
	jpending map[*Bucket]struct{}
	jerrors  atomic.Uint64
	jdone    chan struct{}

	// stale lists the dead daemons' directories Replay has yet to take.
	staleMu sync.Mutex
	stale   []staleDir

	stop chan struct{}
	done chan struct{}
}

// New opens the tiers of cfg (creating KindFile directories) and starts
// the organizer.
func New(cfg Config) (*Pool, error) {
	if len(cfg.Tiers) == 0 {
		return nil, fmt.Errorf("new pool: no tiers: %w", ErrInvalid)
	}
	p := &Pool{
		placement:    cfg.Placement,
		promoteReads: cfg.PromoteReads,
		interval:     cfg.OrganizerInterval,
		buckets:      make(map[string]*Bucket),
	}
	switch p.placement {
	case "":
		p.placement = PlaceMinimizeIOTime
	case PlaceMinimizeIOTime, PlaceRoundRobin, PlaceRandom:
	default:
		return nil, fmt.Errorf("new pool: placement %q: %w", cfg.Placement, ErrInvalid)
	}
	if p.promoteReads == 0 {
		p.promoteReads = 3
	}
	if p.swapCost = cfg.SwapCost; p.swapCost == 0 {
		p.swapCost = 2
	}
	if p.interval == 0 {
		p.interval = 200 * time.Millisecond
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	p.rng = rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32|1))
	seen := make(map[string]bool)
	for i, tc := range cfg.Tiers {
		if tc.Name == "" || seen[tc.Name] {
			p.closeDevices()
			return nil, fmt.Errorf("new pool: tier %d: empty or duplicate name %q: %w", i, tc.Name, ErrInvalid)
		}
		seen[tc.Name] = true
		ts, err := newTierState(i, tc)
		if err != nil {
			p.closeDevices()
			return nil, fmt.Errorf("new pool: %w", err)
		}
		p.tiers = append(p.tiers, ts)
	}
	if err := p.openJournals(cfg); err != nil {
		p.closeDevices()
		return nil, fmt.Errorf("new pool: %w", err)
	}
	if err := p.openStore(); err != nil {
		p.closeDevices()
		return nil, fmt.Errorf("new pool: %w", err)
	}
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	p.jdone = make(chan struct{})
	if p.interval > 0 {
		go p.organizer()
	} else {
		close(p.done)
	}
	if ji := cfg.JournalInterval; p.journaling() && ji >= 0 {
		if ji == 0 {
			ji = 100 * time.Millisecond
		}
		go p.journaler(ji)
	} else {
		close(p.jdone)
	}
	return p, nil
}

// openJournals opens a journal on every file tier (Config.Journal) and
// takes the dead daemons' directories the tiers found: kept, and counted
// against their tier, for Replay; removed at once without a journal.
func (p *Pool) openJournals(cfg Config) error {
	if !cfg.Journal || !slices.ContainsFunc(p.tiers, (*tierState).persistent) {
		p.discardStale()
		return nil
	}
	p.journals = make([]*tier.Journal, len(p.tiers))
	p.jpending = make(map[*Bucket]struct{})
	for t, ts := range p.tiers {
		if !ts.persistent() {
			continue
		}
		j, err := ts.dev.OpenJournal()
		if err != nil {
			return err
		}
		p.journals[t] = j
		for _, s := range ts.dev.Stale() {
			ts.used.Add(s.Bytes)
			p.stale = append(p.stale, staleDir{t: t, s: s})
		}
	}
	return nil
}

// closeDevices closes the journals and devices: instance directories of
// file tiers are removed, stale ones not replayed are left for the next.
func (p *Pool) closeDevices() error {
	var first error
	for _, j := range p.journals {
		if j != nil {
			first = cmpErr(first, j.Close())
		}
	}
	for _, ts := range p.tiers {
		first = cmpErr(first, ts.dev.Close())
	}
	return first
}

// Close stops the organizer, drops every bucket and releases every
// segment (memfds closed, segment files removed). Dirty data is lost:
// callers drain first.
func (p *Pool) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	close(p.stop)
	<-p.done
	<-p.jdone
	p.mu.Lock()
	buckets := p.buckets
	p.buckets = make(map[string]*Bucket)
	p.mu.Unlock()
	var first error
	for _, b := range buckets {
		if err := b.drop(); err != nil && first == nil {
			first = err
		}
	}
	first = cmpErr(first, p.st.close())
	return cmpErr(first, p.closeDevices())
}

// Bucket returns the bucket called name, creating it with opts if absent.
// An existing bucket keeps its original options.
func (p *Pool) Bucket(name string, opts BucketOptions) (*Bucket, error) {
	if name == "" || opts.PageSize < 0 || !ValidCompress(opts.Compress) || (opts.Durable && opts.PageSize > 0) {
		return nil, fmt.Errorf("bucket %q (page size %d, compress %q): %w", name, opts.PageSize, opts.Compress, ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, fmt.Errorf("bucket %q: %w", name, ErrClosed)
	}
	if b := p.buckets[name]; b != nil {
		return b, nil
	}
	b := newBucket(p, p.nextID.Add(1), name, opts)
	b.SetCompress(opts.Compress) // validated above
	if opts.Durable {
		// Recorded before anyone can see it: a durable bucket that was
		// returned comes back after a restart, empty or not. The commit
		// is made under p.mu; creating a durable bucket is rare.
		if err := b.recordDurable(); err != nil {
			return nil, fmt.Errorf("durable bucket %q: %w", name, err)
		}
	}
	p.buckets[name] = b
	p.cat.addName(name)
	return b, nil
}

// LookupBucket returns an existing bucket or ErrNotFound.
func (p *Pool) LookupBucket(name string) (*Bucket, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, fmt.Errorf("bucket %q: %w", name, ErrClosed)
	}
	if b := p.buckets[name]; b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("bucket %q: %w", name, ErrNotFound)
}

// DeleteBucket drops a bucket and all its blobs (dirty or not).
func (p *Pool) DeleteBucket(name string) error {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return fmt.Errorf("delete bucket %q: %w", name, ErrClosed)
	}
	b := p.buckets[name]
	delete(p.buckets, name)
	if b != nil {
		p.cat.removeName(name) // under mu: a new bucket of that name stays indexed
	}
	p.mu.Unlock()
	if b == nil {
		return fmt.Errorf("delete bucket %q: %w", name, ErrNotFound)
	}
	if err := b.drop(); err != nil {
		return fmt.Errorf("delete bucket %q: %w", name, err)
	}
	return nil
}

// RenameBucket renames a bucket; ErrExist if newName is taken.
func (p *Pool) RenameBucket(oldName, newName string) error {
	if newName == "" {
		return fmt.Errorf("rename bucket %q to %q: %w", oldName, newName, ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return fmt.Errorf("rename bucket %q: %w", oldName, ErrClosed)
	}
	b := p.buckets[oldName]
	if b == nil {
		return fmt.Errorf("rename bucket %q: %w", oldName, ErrNotFound)
	}
	if oldName == newName {
		return nil
	}
	if p.buckets[newName] != nil {
		return fmt.Errorf("rename bucket %q to %q: %w", oldName, newName, ErrExist)
	}
	if b.storedFlag.Load() {
		return fmt.Errorf("rename bucket %q: it is in the durable store: %w", oldName, ErrNotSupported)
	}
	delete(p.buckets, oldName)
	p.buckets[newName] = b
	p.cat.removeName(oldName)
	p.cat.addName(newName)
	b.name.Store(&newName)
	return nil
}

// Buckets lists bucket names.
func (p *Pool) Buckets() []string {
	p.mu.Lock()
	names := make([]string, 0, len(p.buckets))
	for n := range p.buckets {
		names = append(names, n)
	}
	p.mu.Unlock()
	slices.Sort(names)
	return names
}

// snapshot returns the current buckets.
func (p *Pool) snapshot() []*Bucket {
	p.mu.Lock()
	defer p.mu.Unlock()
	bs := make([]*Bucket, 0, len(p.buckets))
	for _, b := range p.buckets {
		bs = append(bs, b)
	}
	return bs
}

// Stats returns a snapshot.
func (p *Pool) Stats() Stats {
	s := Stats{Hits: p.hits.Load(), Misses: p.misses.Load(), LeaseStats: p.lease.stats()}
	p.mu.Lock()
	s.Buckets = int64(len(p.buckets))
	p.mu.Unlock()
	for _, t := range p.tiers {
		ts := t.stats()
		s.DirtyBytes += ts.Dirty
		s.Tiers = append(s.Tiers, ts)
	}
	return s
}

// organizer runs Organize every interval until Close.
func (p *Pool) organizer() {
	defer close(p.done)
	tk := time.NewTicker(p.interval)
	defer tk.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tk.C:
			p.Organize()
		}
	}
}

// tierState is one tier's device and accounting. The counters are atomic:
// capacity is reserved with compare-and-swap, so used never exceeds it.
type tierState struct {
	idx       int
	cfg       TierConfig
	dev       *tier.Device
	capacity  int64
	high, low int64 // watermarks in bytes

	used atomic.Int64 // bytes reserved by blobs
	// ceiling, when above 0, holds used below capacity: Shed sets it
	// under memory pressure, Unshed clears it.
	ceiling atomic.Int64
	blobs   atomic.Int64
	dirty   atomic.Int64 // bytes of dirty blobs
	promo   atomic.Uint64
	swaps   atomic.Uint64
	demo    atomic.Uint64
	evicts  atomic.Uint64
	jpages  atomic.Int64  // pages its journal holds as dirty
	stored  atomic.Int64  // bytes of durable copies in the blob store (part of used)
	sc      storeCounters // checksums and compression (stored.go)
}

func newTierState(idx int, tc TierConfig) (*tierState, error) {
	if tc.Capacity <= 0 {
		return nil, fmt.Errorf("tier %s: capacity %d: %w", tc.Name, tc.Capacity, ErrInvalid)
	}
	hi, lo := tc.HighWatermark, tc.LowWatermark
	if hi == 0 {
		hi = 0.9
	}
	if lo == 0 {
		lo = 0.7
	}
	if hi < 0 || hi > 1 || lo < 0 || lo > hi {
		return nil, fmt.Errorf("tier %s: watermarks %v/%v: %w", tc.Name, hi, lo, ErrInvalid)
	}
	dev, err := tier.Open(tc.Kind, tc.Name, tc.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &tierState{
		idx: idx, cfg: tc, dev: dev, capacity: tc.Capacity,
		high: int64(hi * float64(tc.Capacity)),
		low:  int64(lo * float64(tc.Capacity)),
	}, nil
}

// persistent reports whether the tier's bytes outlive the daemon (its
// kind's traits): dirty pages there are journaled.
func (t *tierState) persistent() bool { return t.dev.Traits().Persistent }

// memory reports whether the tier is memory the kernel cannot page out:
// it is shed under memory pressure.
func (t *tierState) memory() bool { return t.dev.Traits().Memory }

// limit is the capacity new reservations may fill: the capacity, or the
// memory-pressure ceiling if one is set.
func (t *tierState) limit() int64 {
	if c := t.ceiling.Load(); c > 0 && c < t.capacity {
		return c
	}
	return t.capacity
}

// reserve takes n bytes of capacity if they are free (below limit).
func (t *tierState) reserve(n int64) bool {
	limit := t.limit()
	for {
		u := t.used.Load()
		if u+n > limit {
			return false
		}
		if t.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (t *tierState) release(n int64) { t.used.Add(-n) }

func (t *tierState) stats() TierStats {
	return TierStats{
		Name: t.cfg.Name, Kind: t.cfg.Kind, Capacity: t.capacity,
		Used: t.used.Load(), Blobs: t.blobs.Load(), Dirty: t.dirty.Load(),
		Promoted: t.promo.Load(), Swapped: t.swaps.Load(), Demoted: t.demo.Load(), Evicted: t.evicts.Load(),
		HighWater: t.high, Ceiling: t.ceiling.Load(), Journaled: t.jpages.Load(), Stored: t.stored.Load(),
		Checksummed: t.sc.summed.Load(), ChecksumErrors: t.sc.corrupt.Load(),
		Compressed: t.sc.compressed.Load(), CompressedBytes: t.sc.logical.Load(), SavedBytes: t.sc.saved.Load(),
	}
}
