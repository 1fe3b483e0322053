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
	MSetCompress  = "set_compress"  // (ref, codec): codec of blobs moving to slower tiers
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
}

// WriteInfo appends the encoding of i.
func WriteInfo(w *runtime.ArgWriter, i Info) {
	w.String(i.Name).I64(i.Page).I64(i.Size).String(i.Tier).Bool(i.Dirty)
	w.U64(i.Version).U64(i.Reads).F64(i.Score).I64(i.LastUsed.UnixNano())
	w.U32(uint32(len(i.Tags)))
	for k, v := range i.Tags {
		w.String(k).String(v)
	}
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
	return i
}
