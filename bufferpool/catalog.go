package bufferpool

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The catalog answers metadata queries (Pool.Query, Pool.BucketsUnder)
// from two indexes instead of a scan of every blob:
//
//   - the bucket names, sorted: the buckets under a prefix are one binary
//     search and a contiguous run;
//   - the tags of named blobs: key -> values in tag order (tagLess:
//     numbers numerically, before other strings lexically) -> the blobs
//     holding that value, so an equality is one lookup and a range one
//     binary search and a contiguous run.
//
// A query with neither a prefix nor a tag filter (only size or time) is
// the one that walks every named bucket.
//
// catalog.mu is a leaf lock: taken with a bucket's lock held (tags change
// under it), never held while taking one.

// MaxTagKey, MaxTagValue and MaxTags bound a blob's tags.
const (
	MaxTagKey   = 256
	MaxTagValue = 64 << 10
	MaxTags     = 64
)

type catalog struct {
	mu    sync.Mutex
	names []string             // every bucket, sorted
	tags  map[string]*tagIndex // key -> values
}

// tagIndex is the values one tag key has, sorted by tagLess, and the blobs
// holding each.
type tagIndex struct {
	vals []string
	refs map[string]map[blobRef]struct{}
}

type blobRef struct {
	b    *Bucket
	name string
}

// tagLess orders tag values: numbers (strconv.ParseFloat) numerically
// first, then every other string lexically.
func tagCompare(x, y string) int {
	fx, ex := strconv.ParseFloat(x, 64)
	fy, ey := strconv.ParseFloat(y, 64)
	switch {
	case ex == nil && ey == nil:
		if c := cmp.Compare(fx, fy); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	case ex == nil:
		return -1
	case ey == nil:
		return 1
	}
	return strings.Compare(x, y)
}

func (c *catalog) addName(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, found := slices.BinarySearch(c.names, name); !found {
		c.names = slices.Insert(c.names, i, name)
	}
}

func (c *catalog) removeName(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, found := slices.BinarySearch(c.names, name); found {
		c.names = slices.Delete(c.names, i, i+1)
	}
}

// under returns the names equal to prefix or below it (prefix + "/..."),
// all names for "".
func (c *catalog) under(prefix string) []string {
	prefix = strings.TrimSuffix(prefix, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	if prefix == "" {
		return slices.Clone(c.names)
	}
	var out []string
	i, found := slices.BinarySearch(c.names, prefix)
	if found {
		out = append(out, prefix)
		i++
	}
	// Names below prefix sort after prefix+"/" and before prefix+"0"
	// ('0' follows '/'), with names such as prefix+"-x" between prefix
	// and them.
	lo, _ := slices.BinarySearch(c.names, prefix+"/")
	for j := max(i, lo); j < len(c.names) && strings.HasPrefix(c.names[j], prefix+"/"); j++ {
		out = append(out, c.names[j])
	}
	return out
}

func (c *catalog) tag(b *Bucket, bl *blob, key, val string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tags == nil {
		c.tags = make(map[string]*tagIndex)
	}
	ti := c.tags[key]
	if ti == nil {
		ti = &tagIndex{refs: make(map[string]map[blobRef]struct{})}
		c.tags[key] = ti
	}
	set := ti.refs[val]
	if set == nil {
		set = make(map[blobRef]struct{})
		ti.refs[val] = set
		i, _ := slices.BinarySearchFunc(ti.vals, val, tagCompare)
		ti.vals = slices.Insert(ti.vals, i, val)
	}
	set[blobRef{b, bl.name}] = struct{}{}
}

func (c *catalog) untag(b *Bucket, bl *blob, key, val string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.untagLocked(b, bl.name, key, val)
}

func (c *catalog) untagLocked(b *Bucket, name, key, val string) {
	ti := c.tags[key]
	if ti == nil {
		return
	}
	set := ti.refs[val]
	delete(set, blobRef{b, name})
	if len(set) > 0 {
		return
	}
	delete(ti.refs, val)
	if i, found := slices.BinarySearchFunc(ti.vals, val, tagCompare); found {
		ti.vals = slices.Delete(ti.vals, i, i+1)
	}
	if len(ti.vals) == 0 {
		delete(c.tags, key)
	}
}

// untagAll drops bl's tags from the index (bl is leaving its bucket).
func (c *catalog) untagAll(b *Bucket, bl *blob) {
	if len(bl.tags) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range bl.tags {
		c.untagLocked(b, bl.name, k, v)
	}
}

// matches returns the blobs whose tag f.Key satisfies f.
func (c *catalog) matches(f TagFilter) []blobRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	ti := c.tags[f.Key]
	if ti == nil {
		return nil
	}
	var out []blobRef
	if !f.Range {
		for r := range ti.refs[f.Value] {
			out = append(out, r)
		}
		return out
	}
	i := 0
	if f.Min != "" {
		i, _ = slices.BinarySearchFunc(ti.vals, f.Min, tagCompare)
	}
	for ; i < len(ti.vals) && (f.Max == "" || tagCompare(ti.vals[i], f.Max) <= 0); i++ {
		for r := range ti.refs[ti.vals[i]] {
			out = append(out, r)
		}
	}
	return out
}

// SetTag sets tag key to value on named blob name.
func (b *Bucket) SetTag(name, key, value string) error {
	if err := b.checkNamed("set tag", name, 0); err != nil {
		return err
	}
	if key == "" || len(key) > MaxTagKey || len(value) > MaxTagValue {
		return fmt.Errorf("tag %q of %q: empty key, or key or value too long: %w", key, name, ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bl, err := b.namedLocked("set tag", name)
	if err != nil {
		return err
	}
	old, had := bl.tags[key]
	if had && old == value {
		return nil
	}
	if !had && len(bl.tags) >= MaxTags {
		return fmt.Errorf("blob %q has %d tags: %w", name, len(bl.tags), ErrNoSpace)
	}
	if bl.tags == nil {
		bl.tags = make(map[string]string)
	}
	if had {
		b.p.cat.untag(b, bl, key, old)
	}
	bl.tags[key] = value
	b.p.cat.tag(b, bl, key, value)
	return b.storeBlobMetaLocked(bl)
}

// DeleteTag removes tag key of named blob name (ErrNotFound if unset).
func (b *Bucket) DeleteTag(name, key string) error {
	if err := b.checkNamed("delete tag", name, 0); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	bl, err := b.namedLocked("delete tag", name)
	if err != nil {
		return err
	}
	old, had := bl.tags[key]
	if !had {
		return fmt.Errorf("tag %q of %q in bucket %s: %w", key, name, b.Name(), ErrNotFound)
	}
	delete(bl.tags, key)
	b.p.cat.untag(b, bl, key, old)
	return b.storeBlobMetaLocked(bl)
}

// namedLocked returns the live named blob name.
func (b *Bucket) namedLocked(op, name string) (*blob, error) {
	if err := b.checkLocked(); err != nil {
		return nil, err
	}
	bl := b.named[name]
	if bl == nil {
		return nil, fmt.Errorf("%s %q of bucket %s: %w", op, name, b.Name(), ErrNotFound)
	}
	return bl, nil
}

// TagFilter selects blobs by one tag: Value exactly, or with Range a value
// in [Min, Max] in tag order (numbers numerically; an empty bound is
// open).
type TagFilter struct {
	Key      string
	Value    string
	Range    bool
	Min, Max string
}

func (f TagFilter) match(tags map[string]string) bool {
	v, ok := tags[f.Key]
	if !ok {
		return false
	}
	if !f.Range {
		return v == f.Value
	}
	return (f.Min == "" || tagCompare(v, f.Min) >= 0) && (f.Max == "" || tagCompare(v, f.Max) <= 0)
}

// Query selects named blobs. Every condition set must hold.
type Query struct {
	// Prefix: buckets named Prefix or below it ("sim/run1" selects
	// "sim/run1" and "sim/run1/t", not "sim/run10").
	Prefix string
	Tags   []TagFilter
	// MinSize and MaxSize bound the blob's size (MaxSize 0: no bound).
	MinSize, MaxSize int64
	// ModifiedAfter and ModifiedBefore bound when the bytes last changed
	// (zero: no bound).
	ModifiedAfter, ModifiedBefore time.Time
	// Limit stops after that many results (0: all).
	Limit int
}

// QueryResult is one blob a query selected.
type QueryResult struct {
	Bucket string
	BlobInfo
}

// BucketsUnder lists the buckets named prefix or below it, sorted, from
// the name index ("" lists all).
func (p *Pool) BucketsUnder(prefix string) []string { return p.cat.under(prefix) }

// Query returns the named blobs q selects in the buckets allow accepts
// (nil: all), sorted by bucket then blob. Candidates come from the tag
// index (the filter with fewest matches) or else the name index; the
// other conditions are checked on each candidate.
func (p *Pool) Query(q Query, allow func(*Bucket) bool) ([]QueryResult, error) {
	if q.MinSize < 0 || q.MaxSize < 0 || (q.MaxSize > 0 && q.MinSize > q.MaxSize) {
		return nil, fmt.Errorf("query: sizes %d..%d: %w", q.MinSize, q.MaxSize, ErrInvalid)
	}
	for _, f := range q.Tags {
		if f.Key == "" {
			return nil, fmt.Errorf("query: tag filter without a key: %w", ErrInvalid)
		}
	}
	byBucket := make(map[*Bucket][]string)
	if len(q.Tags) > 0 {
		var best []blobRef
		for i, f := range q.Tags {
			refs := p.cat.matches(f)
			if i == 0 || len(refs) < len(best) {
				best = refs
			}
		}
		for _, r := range best {
			byBucket[r.b] = append(byBucket[r.b], r.name)
		}
	} else {
		for _, n := range p.cat.under(q.Prefix) {
			if b, err := p.LookupBucket(n); err == nil {
				byBucket[b] = nil // every blob
			}
		}
	}
	var out []QueryResult
	now := time.Now().UnixNano()
	for b, names := range byBucket {
		if b.pageSize > 0 || !underPrefix(b.Name(), q.Prefix) || (allow != nil && !allow(b)) {
			continue
		}
		out = append(out, b.query(q, names, now)...)
	}
	slices.SortFunc(out, func(x, y QueryResult) int {
		if c := strings.Compare(x.Bucket, y.Bucket); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// underPrefix reports whether bucket name is prefix or below it.
func underPrefix(name, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || name == prefix || strings.HasPrefix(name, prefix+"/")
}

// query checks the blobs names (nil: all) of b against q.
func (b *Bucket) query(q Query, names []string, now int64) []QueryResult {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.dead {
		return nil
	}
	var out []QueryResult
	check := func(bl *blob) {
		if bl == nil || hiddenName(bl.name) || !q.matchBlob(bl) {
			return
		}
		out = append(out, QueryResult{Bucket: b.Name(), BlobInfo: b.infoLocked(bl, now)})
	}
	if names == nil {
		for _, bl := range b.named {
			check(bl)
		}
		return out
	}
	for _, n := range names {
		check(b.named[n])
	}
	return out
}

func (q Query) matchBlob(bl *blob) bool {
	if bl.size < q.MinSize || (q.MaxSize > 0 && bl.size > q.MaxSize) {
		return false
	}
	if !q.ModifiedAfter.IsZero() && bl.mtime <= q.ModifiedAfter.UnixNano() {
		return false
	}
	if !q.ModifiedBefore.IsZero() && bl.mtime >= q.ModifiedBefore.UnixNano() {
		return false
	}
	for _, f := range q.Tags {
		if !f.match(bl.tags) {
			return false
		}
	}
	return true
}

// hiddenName reports a blob that holds a kept version (versions.go).
func hiddenName(name string) bool { return strings.IndexByte(name, 0) >= 0 }
