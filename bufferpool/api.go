package bufferpool

// This file is the contract between the buffer pool and its callers
// (bufferpool/files, later runtime/ipc). Implementation lives in the
// other files of the package.

import (
	"errors"
	"time"

	"github.com/iowarp/iowarp/bufferpool/tier"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoSpace: no tier has room for the blob, even after evicting
	// every clean blob that could be evicted. Dirty blobs are never
	// evicted: the caller must drain (write back) and retry, or fail.
	ErrNoSpace = errors.New("bufferpool: no space in any tier")
	// ErrNotFound: the bucket or blob does not exist.
	ErrNotFound = errors.New("bufferpool: not found")
	// ErrExist: the bucket already exists (RenameBucket target).
	ErrExist = errors.New("bufferpool: already exists")
	// ErrInvalid: a bad argument (offset past a blob, bad name, bad config).
	ErrInvalid = errors.New("bufferpool: invalid argument")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("bufferpool: closed")
	// ErrPermission: the caller may not do this to the bucket (its owner
	// and mode, meta.go).
	ErrPermission = errors.New("bufferpool: permission denied")
	// ErrNotSupported: the pool cannot do it as configured (a durable
	// put without a file tier).
	ErrNotSupported = errors.New("bufferpool: not supported")
	// ErrBusy: the object is in a use that excludes the request (a
	// segment passed through to the kernel cannot be mapped by shims).
	ErrBusy = errors.New("bufferpool: busy")
)

// The built-in tier kinds. A kind is a registration in bufferpool/tier
// (tier.Register); its traits, not its name, decide what the pool does
// with a tier of it (journal, shed under memory pressure).
const (
	KindRAM  = tier.KindRAM  // memfd per bucket (shared memory)
	KindFile = tier.KindFile // one sparse file per bucket in a directory (NVMe/SSD)
)

// Placement policies (data placement engine).
const (
	PlaceMinimizeIOTime = "minimize_io_time" // fastest tier with room (default)
	PlaceRoundRobin     = "round_robin"
	PlaceRandom         = "random"
)

// TierConfig describes one tier. Tiers are given fastest first.
type TierConfig struct {
	Name     string // unique, e.g. "ram", "nvme0"
	Kind     string // a registered tier kind: KindRAM, KindFile, ...
	Dir      string // kinds with a directory (file): where the segment files go
	Capacity int64  // bytes; enforced: resident bytes never exceed it
	// HighWatermark and LowWatermark are fractions of Capacity (0..1).
	// Past High the organizer demotes the coldest blobs until use is
	// below Low. Zero values mean 0.9 and 0.7.
	HighWatermark float64
	LowWatermark  float64
}

// Config configures a Pool.
type Config struct {
	Tiers     []TierConfig
	Placement string // one of the Place* constants; "" = PlaceMinimizeIOTime
	// OrganizerInterval is how often the organizer runs; 0 = 200ms,
	// negative disables it (tests drive it with Organize).
	OrganizerInterval time.Duration
	// PromoteReads: a blob on a slower tier read at least this many
	// times (decayed) is promoted when the faster tier has room. 0 = 3.
	PromoteReads float64
	// SwapCost: a hot blob is swapped into a faster tier that is at its
	// low watermark, demoting the coldest blobs there, only when its
	// score times its size exceeds theirs by SwapCost times the bytes
	// the swap copies (organizer.go). 0 = 2 (a read and a write per byte
	// moved); a negative value disables swaps.
	SwapCost float64
	// Seed for PlaceRandom (0 = time based).
	Seed int64
	// Journal keeps a journal on every file tier of the dirty pages of
	// tagged buckets there (Bucket.SetJournalTag), for Replay after a
	// crash. Without it the files of dead daemons are removed at New.
	Journal bool
	// JournalInterval is how often marked pages are journaled and the
	// journals synced; 0 = 100ms, negative: only by SyncJournal.
	JournalInterval time.Duration
}

// BucketOptions are fixed when a bucket is created.
type BucketOptions struct {
	// PageSize > 0 makes a page bucket: blobs are addressed by page
	// index, every page is PageSize bytes, and in every tier page i sits
	// at offset i*PageSize of the bucket's segment (a sparse image of
	// the file). PageSize == 0 makes a named-blob bucket whose blobs are
	// placed in the segment by an extent allocator.
	PageSize int64
	// Owner, Group and Mode (permission bits; 0 = DefaultBucketMode) of
	// a named bucket (meta.go).
	Owner, Group uint32
	Mode         uint32
	// KeepVersions is how many versions of a blob PutVersion keeps, the
	// current one included (0 = DefaultKeepVersions).
	KeepVersions int
	// Compress is the codec blobs get when they move to a slower tier
	// (one of Codecs; "" is none); Bucket.SetCompress changes it later.
	Compress string
	// Durable makes a durable named bucket (durable.go): the bucket is
	// recorded in the blob store when it is created, and every write to
	// it (Put, PartialPut, PutVersion, tags, Delete, Chmod) returns once
	// the store has it, synced. Needs a file tier (ErrNotSupported).
	// Bucket.SetDurable changes it later.
	Durable bool
}

// Filler produces the initial contents of a page that is not resident
// (stage-in). buf is PageSize bytes, zeroed. Returning an error aborts the
// operation and inserts nothing. It is called with the bucket locked:
// it must not call back into the same bucket.
type Filler func(buf []byte) error

// BlobInfo describes one blob.
type BlobInfo struct {
	Name     string // named buckets; page buckets: decimal page index
	Page     int64  // page buckets: the page index; -1 otherwise
	Size     int64  // bytes of the blob (PageSize for pages)
	Tier     string // name of the tier holding it
	Dirty    bool
	Version  uint64  // bumped on every write
	Reads    uint64  // lifetime reads
	Score    float64 // organizer score: higher is hotter
	LastUsed time.Time
	// Named blobs: when the bytes last changed, the version PutVersion
	// gave them (0: never versioned), whether a copy is in the durable
	// store (durable.go), and the tags.
	Modified   time.Time
	Generation uint64
	Durable    bool
	Tags       map[string]string
}

// TierStats is a snapshot of one tier.
type TierStats struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
	Blobs    int64  `json:"blobs"`
	Dirty    int64  `json:"dirty_bytes"`
	Promoted uint64 `json:"promoted"`
	// Swapped counts the promotions into this tier that demoted colder
	// blobs to make room (part of Promoted).
	Swapped   uint64 `json:"swapped"`
	Demoted   uint64 `json:"demoted"`
	Evicted   uint64 `json:"evicted"`
	HighWater int64  `json:"high_watermark_bytes"`
	// Ceiling > 0: memory pressure holds the tier below this many bytes
	// (Pool.Shed) until it passes (Pool.Unshed).
	Ceiling int64 `json:"pressure_ceiling_bytes,omitempty"`
	// Journaled is the pages this tier's journal holds as dirty: what a
	// restart after kill -9 would write back.
	Journaled int64 `json:"journaled_pages"`
	// Stored is the bytes the durable copies of named blobs take in the
	// blob store on this tier (part of Used; durable.go).
	Stored int64 `json:"stored_bytes,omitempty"`
	// Checksummed counts the blobs stored here with checksums (moved
	// here from a faster tier: stored.go); ChecksumErrors the blobs whose
	// bytes here failed them (ErrCorrupt; each counted once, every read
	// of one fails).
	Checksummed    int64  `json:"checksummed_blobs"`
	ChecksumErrors uint64 `json:"checksum_errors"`
	// Compressed counts the blobs stored here compressed, CompressedBytes
	// their logical bytes and SavedBytes the capacity that leaves free:
	// they take CompressedBytes-SavedBytes.
	Compressed      int64 `json:"compressed_blobs"`
	CompressedBytes int64 `json:"compressed_logical_bytes"`
	SavedBytes      int64 `json:"compression_saved_bytes"`
}

// Ratio is the compression ratio of the tier's compressed blobs (logical
// bytes over the bytes they take); 1 when none is.
func (t TierStats) Ratio() float64 {
	if t.CompressedBytes <= t.SavedBytes || t.Compressed == 0 {
		return 1
	}
	return float64(t.CompressedBytes) / float64(t.CompressedBytes-t.SavedBytes)
}

// Stats is a snapshot of the pool.
type Stats struct {
	Tiers      []TierStats `json:"tiers"`
	Buckets    int64       `json:"buckets"`
	DirtyBytes int64       `json:"dirty_bytes"`
	Hits       uint64      `json:"hits"`   // reads served by a resident blob
	Misses     uint64      `json:"misses"` // reads that needed a Filler
	LeaseStats
}

// LeaseStats counts the shim leases of first-tier capacity (lease.go).
type LeaseStats struct {
	// LeaseBytes is the first-tier capacity reserved for leases now
	// (part of the first tier's Used): what shims may still fill with new
	// pages before they ask for more.
	LeaseBytes int64 `json:"shim_lease_bytes"`
	// LeaseRefills counts the refills that reserved capacity.
	LeaseRefills uint64 `json:"shim_lease_refills"`
	// LeasesReturned counts the leases given back with capacity left
	// (the last read-write map of a file released, a client's death
	// included; the file dropped), LeaseReturnedBytes that capacity.
	LeasesReturned     uint64 `json:"shim_leases_returned"`
	LeaseReturnedBytes uint64 `json:"shim_lease_returned_bytes"`
	// ShimPagesAdopted counts the pages shims created that became
	// blobs; ShimPagesDropped those a shim created past its lease.
	ShimPagesAdopted uint64 `json:"shim_pages_adopted"`
	ShimPagesDropped uint64 `json:"shim_pages_dropped"`
}
