package cte

import (
	"time"

	"github.com/iowarp/iowarp/runtime"
)

// Method names of the cte module, in id order (clients resolve them by
// name through admin.modules; the order is still kept stable).
const (
	MOpen         = "open"          // (name) → Value: handle
	MClose        = "close"         // (handle)
	MPut          = "put"           // (ref, blob) In: data
	MGet          = "get"           // (ref, blob) Out: data, N; ErrShortBuffer: Value = size
	MPartialPut   = "partial_put"   // (ref, blob, off) In: data
	MPartialGet   = "partial_get"   // (ref, blob, off) Out: data, N
	MDelete       = "delete"        // (ref, blob)
	MList         = "list"          // (ref) Out: u32 n, n × BlobInfo
	MStat         = "stat"          // (ref, blob) Out: BlobInfo, tags
	MSetTag       = "set_tag"       // (ref, blob, key, value)
	MDeleteTag    = "delete_tag"    // (ref, blob, key)
	MBuckets      = "buckets"       // () Out: u32 n, n × name
	MDeleteBucket = "delete_bucket" // (name)
	MStats        = "stats"         // () Out: JSON of bufferpool.Stats
	// Added after the first release; clients resolve by name.
	MOpenWith     = "open_with"     // (name, u32 mode, u32 keep versions[, u32 bucket flags]) → Value: handle
	MChmod        = "chmod"         // (ref, u32 mode): owner or root
	MBucketStat   = "bucket_stat"   // (ref) Out: BucketStat
	MQuery        = "query"         // (Query) Out: u32 n, n × (bucket, BlobInfo)
	MPutWith      = "put_with"      // (ref, blob, u32 flags) In: data
	MPutVersion   = "put_version"   // (ref, blob, u32 flags) In: data → Value: version
	MGetVersion   = "get_version"   // (ref, blob, u64 version) Out: data; ErrShortBuffer: Value = size
	MListVersions = "list_versions" // (ref, blob) Out: u32 n, n × VersionInfo
	MSetCompress  = "set_compress"  // (ref, codec): codec of blobs moving to slower tiers
	MSetDurable   = "set_durable"   // (ref, bool): every write durable, or not (owner or root)
)

// Bucket flags (open_with's optional last argument, sent only when not
// zero, so that a daemon older than them still opens plain buckets).
const (
	// BucketFlagDurable: a bucket open_with creates is durable (every
	// write to it returns once the durable store has it, synced).
	BucketFlagDurable uint32 = 1 << iota
)

// Put flags (put_with, put_version).
const (
	// FlagDurable: return once the blob is in the durable store, synced.
	FlagDurable uint32 = 1 << iota
)

// Limits on names and tags.
const (
	MaxName     = 4096
	MaxTagKey   = 256
	MaxTagValue = 64 << 10
	MaxTags     = 64
)

// A bucket reference in arguments: a handle from open, or 0 followed by the
// bucket's name (which is then opened implicitly, creating it).

// WriteRef appends a bucket reference.
func WriteRef(w *runtime.ArgWriter, handle uint64, name string) {
	w.U64(handle)
	if handle == 0 {
		w.String(name)
	}
}

// Info describes one blob as the cte module reports it.
type Info struct {
	Name     string
	Page     int64
	Size     int64
	Tier     string
	Dirty    bool
	Version  uint64
	Reads    uint64
	Score    float64
	LastUsed time.Time
	Tags     map[string]string
	// Modified is when the bytes last changed, Generation the version
	// PutVersion gave them, Durable whether the durable store has them.
	Modified   time.Time
	Generation uint64
	Durable    bool
}

// WriteInfo appends the encoding of i.
func WriteInfo(w *runtime.ArgWriter, i Info) {
	w.String(i.Name).I64(i.Page).I64(i.Size).String(i.Tier).Bool(i.Dirty)
	w.U64(i.Version).U64(i.Reads).F64(i.Score).I64(i.LastUsed.UnixNano())
	w.U32(uint32(len(i.Tags)))
	for k, v := range i.Tags {
		w.String(k).String(v)
	}
	w.I64(unixNano(i.Modified)).U64(i.Generation).Bool(i.Durable)
}

// unixNano encodes a time, the zero time as 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// ReadInfo decodes one Info (check r.Err); the zero Info if it fails.
func ReadInfo(r *runtime.ArgReader) Info {
	if i := readInfo(r); r.Err() == nil {
		return i
	}
	return Info{}
}

func readInfo(r *runtime.ArgReader) Info {
	i := Info{Name: r.String(MaxName), Page: r.I64(), Size: r.I64(), Tier: r.String(MaxName), Dirty: r.Bool(),
		Version: r.U64(), Reads: r.U64(), Score: r.F64()}
	i.LastUsed = time.Unix(0, r.I64())
	n := r.U32()
	if n > MaxTags {
		r.Failf("%d tags, limit %d", n, MaxTags)
		return i
	}
	if n > 0 {
		i.Tags = make(map[string]string, n)
	}
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		k := r.String(MaxTagKey)
		if _, dup := i.Tags[k]; dup {
			r.Failf("tag %q twice", k)
		}
		i.Tags[k] = r.String(MaxTagValue)
	}
	i.Modified = fromUnixNano(r.I64())
	i.Generation = r.U64()
	i.Durable = r.Bool()
	return i
}

// BucketStat describes a bucket: owner, group, mode, when it was made,
// how many versions PutVersion keeps, whether it is in the durable store
// (Durable: it, or some of its blobs, come back after a restart) and
// whether it is a durable bucket (DurableBucket: every write to it does).
type BucketStat struct {
	Name          string
	Owner, Group  uint32
	Mode          uint32
	Created       time.Time
	KeepVersions  uint32
	Durable       bool
	DurableBucket bool
}

// WriteBucketStat appends the encoding of s. DurableBucket is an optional
// last byte, written only when true, and read by ReadBucketStat only if it
// is there: a client older than it still decodes the stat of every bucket
// but a durable one, and a daemon older than it sends none.
func WriteBucketStat(w *runtime.ArgWriter, s BucketStat) {
	w.String(s.Name).U32(s.Owner).U32(s.Group).U32(s.Mode).I64(unixNano(s.Created)).U32(s.KeepVersions).Bool(s.Durable)
	if s.DurableBucket {
		w.Bool(true)
	}
}

// ReadBucketStat decodes one BucketStat (check r.Err).
func ReadBucketStat(r *runtime.ArgReader) BucketStat {
	s := BucketStat{Name: r.String(MaxName), Owner: r.U32(), Group: r.U32(), Mode: r.U32()}
	s.Created = fromUnixNano(r.I64())
	s.KeepVersions = r.U32()
	s.Durable = r.Bool()
	if r.Err() == nil && r.Len() > 0 {
		s.DurableBucket = r.Bool()
	}
	if r.Err() != nil {
		return BucketStat{}
	}
	return s
}

// VersionInfo describes one kept version of a blob.
type VersionInfo struct {
	Version  uint64
	Size     int64
	Modified time.Time
	Current  bool
	Durable  bool
}

// WriteVersion appends the encoding of v.
func WriteVersion(w *runtime.ArgWriter, v VersionInfo) {
	w.U64(v.Version).I64(v.Size).I64(unixNano(v.Modified)).Bool(v.Current).Bool(v.Durable)
}

// ReadVersion decodes one VersionInfo (check r.Err).
func ReadVersion(r *runtime.ArgReader) VersionInfo {
	v := VersionInfo{Version: r.U64(), Size: r.I64()}
	v.Modified = fromUnixNano(r.I64())
	v.Current, v.Durable = r.Bool(), r.Bool()
	if r.Err() != nil {
		return VersionInfo{}
	}
	return v
}

// MaxQueryTags bounds the tag filters of one query.
const MaxQueryTags = 16

// TagFilter selects blobs by one tag: Value exactly, or with Range a
// value in [Min, Max] (numbers compare numerically; an empty bound is
// open).
type TagFilter struct {
	Key      string
	Value    string
	Range    bool
	Min, Max string
}

// Query selects named blobs of the buckets the caller may read (see
// bufferpool.Query).
type Query struct {
	Prefix                        string
	Tags                          []TagFilter
	MinSize, MaxSize              int64
	ModifiedAfter, ModifiedBefore time.Time
	Limit                         uint32
}

// WriteQuery appends the encoding of q.
func WriteQuery(w *runtime.ArgWriter, q Query) {
	w.String(q.Prefix).U32(uint32(len(q.Tags)))
	for _, f := range q.Tags {
		w.String(f.Key).String(f.Value).Bool(f.Range).String(f.Min).String(f.Max)
	}
	w.I64(q.MinSize).I64(q.MaxSize).I64(unixNano(q.ModifiedAfter)).I64(unixNano(q.ModifiedBefore)).U32(q.Limit)
}

// ReadQuery decodes a Query (check r.Err).
func ReadQuery(r *runtime.ArgReader) Query {
	q := Query{Prefix: r.String(MaxName)}
	n := r.U32()
	if n > MaxQueryTags {
		r.Failf("%d tag filters, limit %d", n, MaxQueryTags)
		return Query{}
	}
	for j := uint32(0); j < n && r.Err() == nil; j++ {
		q.Tags = append(q.Tags, TagFilter{Key: r.String(MaxTagKey), Value: r.String(MaxTagValue), Range: r.Bool(),
			Min: r.String(MaxTagValue), Max: r.String(MaxTagValue)})
	}
	q.MinSize, q.MaxSize = r.I64(), r.I64()
	q.ModifiedAfter, q.ModifiedBefore = fromUnixNano(r.I64()), fromUnixNano(r.I64())
	q.Limit = r.U32()
	if r.Err() != nil {
		return Query{}
	}
	return q
}
