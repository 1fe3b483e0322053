package client

import (
	"fmt"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// ErrPermission: the bucket's owner and mode do not allow the call to
// this client's user (the daemon checks the uid of the connection).
var ErrPermission = runtime.ErrPermission

// BucketOptions apply when BucketWith creates the bucket; an existing
// bucket keeps its own.
type BucketOptions struct {
	// Mode is the permission bits (0 = 0600: the owner reads and writes).
	Mode uint32
	// KeepVersions is how many versions of a blob PutVersion keeps, the
	// current one included (0 = the daemon's default, 4).
	KeepVersions int
	// Durable creates a durable bucket: every write to it (Put,
	// PartialPut, PutVersion, tags, Delete) returns once the daemon's
	// durable store has it, synced, and the bucket comes back after a
	// restart, kill -9 included. An existing bucket keeps its own (see
	// Bucket.SetDurable). The daemon needs a file tier.
	Durable bool
}

func (o BucketOptions) flags() uint32 {
	if o.Durable {
		return cte.BucketFlagDurable
	}
	return 0
}

// PutOptions modify a put.
type PutOptions struct {
	// Durable returns once the blob is in the daemon's durable store on
	// its file tier, synced: it survives kill -9 of the daemon and comes
	// back when the daemon restarts.
	Durable bool
}

func (o PutOptions) flags() uint32 {
	if o.Durable {
		return cte.FlagDurable
	}
	return 0
}

// BucketStat describes a bucket (owner, group, mode, versions kept).
type BucketStat = cte.BucketStat

// VersionInfo describes one kept version of a blob.
type VersionInfo = cte.VersionInfo

// Query selects blobs across buckets: by bucket name prefix (a path:
// "sim/run1" selects sim/run1 and sim/run1/..., not sim/run10), tags
// (equality, or a range in which numbers compare numerically), size and
// modification time. Only buckets this client may read are searched.
type Query = cte.Query

// TagFilter is one tag condition of a Query.
type TagFilter = cte.TagFilter

// QueryResult is a blob a Query selected.
type QueryResult struct {
	Bucket string
	BlobInfo
}

// BucketWith opens the bucket called name, creating it with o if absent.
func (c *Client) BucketWith(name string, o BucketOptions) (*Bucket, error) {
	if o.KeepVersions < 0 || o.KeepVersions > 1<<16 {
		return nil, fmt.Errorf("open bucket %q: keep %d versions: %w", name, o.KeepVersions, ErrInvalid)
	}
	args := runtime.NewArgWriter(nil).String(name).U32(o.Mode).U32(uint32(o.KeepVersions))
	if f := o.flags(); f != 0 { // sent only when set: older daemons refuse it
		args.U32(f)
	}
	k, err := c.newCall(cte.Name, cte.MOpenWith, args.Bytes(), nil, errRoom)
	if err != nil {
		return nil, err
	}
	b := &Bucket{c: c, name: name}
	err = k.do(func(res runtime.Result, _ []byte) error { b.handle = res.Value; return nil })
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", name, err)
	}
	return b, nil
}

// PutWith is Put with options (Durable).
func (b *Bucket) PutWith(blob string, data []byte, o PutOptions) error {
	k, err := b.c.newCall(cte.Name, cte.MPutWith, b.args(blob).U32(o.flags()).Bytes(), data, errRoom)
	if err != nil {
		return err
	}
	return k.do(nil)
}

// PutVersion stores data as a new version of blob (the current bytes are
// kept as the previous version) and returns its version number. The
// bucket keeps its last KeepVersions versions.
func (b *Bucket) PutVersion(blob string, data []byte, o PutOptions) (uint64, error) {
	k, err := b.c.newCall(cte.Name, cte.MPutVersion, b.args(blob).U32(o.flags()).Bytes(), data, errRoom)
	if err != nil {
		return 0, err
	}
	var v uint64
	err = k.do(func(res runtime.Result, _ []byte) error { v = res.Value; return nil })
	return v, err
}

// GetVersion returns a copy of version v of blob (0: the current bytes).
func (b *Bucket) GetVersion(blob string, v uint64) ([]byte, error) {
	var data []byte
	err := b.raw(cte.MGetVersion, b.args(blob).U64(v).Bytes(), getGuess, func(out []byte) error {
		data = make([]byte, len(out))
		copyCached(data, out)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// ListVersions describes the kept versions of blob, oldest first, the
// current one last.
func (b *Bucket) ListVersions(blob string) ([]VersionInfo, error) {
	var out []VersionInfo
	err := b.reply(cte.MListVersions, b.args(blob).Bytes(), 64<<10, func(r *runtime.ArgReader) {
		n := r.U32()
		for i := uint32(0); i < n && r.Err() == nil; i++ {
			out = append(out, cte.ReadVersion(r))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Chmod sets the bucket's permission bits (its owner and root only).
func (b *Bucket) Chmod(mode uint32) error {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	return b.simple(cte.MChmod, w.U32(mode).Bytes())
}

// StatBucket describes the bucket.
func (b *Bucket) StatBucket() (BucketStat, error) {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	return b.c.statBucket(w.Bytes())
}

// StatBucket describes bucket name without opening or creating it.
func (c *Client) StatBucket(name string) (BucketStat, error) {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, 0, name)
	return c.statBucket(w.Bytes())
}

func (c *Client) statBucket(args []byte) (BucketStat, error) {
	_, out, err := c.Call(cte.Name, cte.MBucketStat, args, nil, 8<<10)
	if err != nil {
		return BucketStat{}, err
	}
	r := runtime.NewArgReader(out)
	s := cte.ReadBucketStat(r)
	return s, r.Done()
}

// BucketsUnder lists the buckets named prefix or below it ("a/b" lists
// a/b and a/b/..., not a/bc) that this client may read.
func (c *Client) BucketsUnder(prefix string) ([]string, error) {
	_, out, err := c.Call(cte.Name, cte.MBuckets, runtime.NewArgWriter(nil).String(prefix).Bytes(), nil, 1<<20)
	if err != nil {
		return nil, err
	}
	return decodeBuckets(out)
}

// Query returns the blobs q selects, sorted by bucket then blob.
func (c *Client) Query(q Query) ([]QueryResult, error) {
	w := runtime.NewArgWriter(nil)
	cte.WriteQuery(w, q)
	b := &Bucket{c: c}
	var out []QueryResult
	err := b.reply(cte.MQuery, w.Bytes(), 1<<20, func(r *runtime.ArgReader) {
		n := r.U32()
		for i := uint32(0); i < n && r.Err() == nil; i++ {
			bucket := r.String(cte.MaxName)
			out = append(out, QueryResult{Bucket: bucket, BlobInfo: cte.ReadInfo(r)})
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetDurable makes every later write to the bucket durable (on), as
// BucketOptions.Durable does at creation, first storing the blobs it
// holds; off makes them plain again (the copies already stored stay
// until their blobs are written plainly or deleted). The bucket's owner
// and root only.
func (b *Bucket) SetDurable(on bool) error {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	if err := b.simple(cte.MSetDurable, w.Bool(on).Bytes()); err != nil {
		return fmt.Errorf("durable bucket %q (%v): %w", b.name, on, err)
	}
	return nil
}
