package bufferpool

// STUB: signatures are the contract; bodies are being written.

// Pool is the Context Transfer Engine: buckets of blobs placed on tiers.
// Safe for concurrent use.
type Pool struct{}

// New opens the tiers of cfg (creating KindFile directories) and starts
// the organizer.
func New(cfg Config) (*Pool, error) { panic("unimplemented") }

// Close stops the organizer, drops every bucket and releases every
// segment (memfds closed, segment files removed). Dirty data is lost:
// callers drain first.
func (p *Pool) Close() error { panic("unimplemented") }

// Bucket returns the bucket called name, creating it with opts if absent.
// An existing bucket keeps its original options.
func (p *Pool) Bucket(name string, opts BucketOptions) (*Bucket, error) { panic("unimplemented") }

// LookupBucket returns an existing bucket or ErrNotFound.
func (p *Pool) LookupBucket(name string) (*Bucket, error) { panic("unimplemented") }

// DeleteBucket drops a bucket and all its blobs (dirty or not).
func (p *Pool) DeleteBucket(name string) error { panic("unimplemented") }

// RenameBucket renames a bucket; ErrExist if newName is taken.
func (p *Pool) RenameBucket(oldName, newName string) error { panic("unimplemented") }

// Buckets lists bucket names.
func (p *Pool) Buckets() []string { panic("unimplemented") }

// Stats returns a snapshot.
func (p *Pool) Stats() Stats { panic("unimplemented") }

// Organize runs one organizer pass now (demote past high watermarks,
// evict clean blobs from the last tier past its high watermark, promote
// hot blobs). Tests call it directly.
func (p *Pool) Organize() { panic("unimplemented") }

// Bucket is a set of blobs. Safe for concurrent use.
type Bucket struct{}

func (b *Bucket) Name() string    { panic("unimplemented") }
func (b *Bucket) PageSize() int64 { panic("unimplemented") }

// --- named blobs (PageSize == 0) ---

// Put creates or replaces blob name with data (dirty).
func (b *Bucket) Put(name string, data []byte) error { panic("unimplemented") }

// Get returns a copy of the blob.
func (b *Bucket) Get(name string) ([]byte, error) { panic("unimplemented") }

// PartialPut writes data at off inside the blob, growing it if needed
// (creating it if absent).
func (b *Bucket) PartialPut(name string, off int64, data []byte) error { panic("unimplemented") }

// PartialGet reads into buf from off; returns bytes read (short at the
// end of the blob).
func (b *Bucket) PartialGet(name string, off int64, buf []byte) (int, error) {
	panic("unimplemented")
}

// Delete removes a blob (named or, for page buckets, the decimal index).
func (b *Bucket) Delete(name string) error { panic("unimplemented") }

// List describes every blob.
func (b *Bucket) List() []BlobInfo { panic("unimplemented") }

// Stat describes one blob.
func (b *Bucket) Stat(name string) (BlobInfo, error) { panic("unimplemented") }

// --- pages (PageSize > 0) ---

// ReadPage copies page i from off into buf (off+len(buf) <= PageSize).
// If the page is not resident and fill is nil it returns found=false and
// copies nothing. If fill is non-nil the page is created from fill (clean)
// and then read: found reports whether it was already resident (a hit).
func (b *Bucket) ReadPage(i, off int64, buf []byte, fill Filler) (found bool, err error) {
	panic("unimplemented")
}

// WritePage writes data at off in page i (off+len(data) <= PageSize) and
// marks it dirty. An absent page is created first: from fill if non-nil,
// else zeroed. Returns the page's new version.
func (b *Bucket) WritePage(i, off int64, data []byte, fill Filler) (version uint64, err error) {
	panic("unimplemented")
}

// PutPage inserts a full page (len(data) == PageSize) as clean if dirty is
// false; replaces an existing page.
func (b *Bucket) PutPage(i int64, data []byte, dirty bool) error { panic("unimplemented") }

// SnapshotPage copies a resident page into buf (PageSize bytes) and returns
// its version and dirty bit; found=false if absent.
func (b *Bucket) SnapshotPage(i int64, buf []byte) (version uint64, dirty, found bool, err error) {
	panic("unimplemented")
}

// MarkClean clears the dirty bit of page i if its version is still
// version (a write since the snapshot keeps it dirty). Reports whether it
// was cleared.
func (b *Bucket) MarkClean(i int64, version uint64) bool { panic("unimplemented") }

// MarkDirty sets the dirty bit again (a failed write-back).
func (b *Bucket) MarkDirty(i int64) { panic("unimplemented") }

// DirtyPages lists indices of dirty pages in ascending order.
func (b *Bucket) DirtyPages() []int64 { panic("unimplemented") }

// HasPage reports whether page i is resident.
func (b *Bucket) HasPage(i int64) bool { panic("unimplemented") }

// DeletePage drops page i (dirty or not) and frees its space.
func (b *Bucket) DeletePage(i int64) { panic("unimplemented") }

// Truncate drops every page at index >= n (ceil(size/PageSize)) and zeroes
// page bytes at and past size inside the last partial page.
func (b *Bucket) Truncate(size int64) error { panic("unimplemented") }

// ZeroRange zeroes [off, off+n) of the resident pages covering it
// (fallocate PUNCH/ZERO semantics for the file layer), marking them dirty.
func (b *Bucket) ZeroRange(off, n int64) error { panic("unimplemented") }

// Resident returns the resident page count and, for the RAM tier, whether
// every page in [0, ceil(size/PageSize)) is resident in the first tier.
func (b *Bucket) Resident(size int64) (pages int64, allInFirstTier bool) { panic("unimplemented") }

// FirstTierFd returns the fd of this bucket's segment in the first tier
// (the memfd for a RAM first tier) and true, or -1,false if none. The
// segment is a sparse image: page i at i*PageSize. Used for kernel
// passthrough and, later, for mapping into the shim. The fd stays owned
// by the bucket.
func (b *Bucket) FirstTierFd() (int, bool) { panic("unimplemented") }

// SetSegmentSize sets the logical size of the first-tier segment (so a
// passthrough reader sees EOF at the file size).
func (b *Bucket) SetSegmentSize(size int64) error { panic("unimplemented") }

// Pin keeps pages of this bucket in the first tier (organizer skips it)
// while the pin count is positive.
func (b *Bucket) Pin()   { panic("unimplemented") }
func (b *Bucket) Unpin() { panic("unimplemented") }
