// Package cte is the runtime module that serves the buffer pool (the
// Context Transfer Engine) to tasks: named buckets of blobs of a
// bufferpool.Pool, with tags, versions, durable puts and metadata queries
// (bufferpool's catalog).
//
// A client opens a bucket (creating it) and gets a handle in its session;
// handles are closed when the client goes. Data of Put and Get goes
// straight between the task's In/Out (the client's shared segment) and the
// pool's tiers: one copy each way (Put: bufferpool writes In into the
// tier's segment; Get: PartialGet reads the tier into Out), no buffer of
// the daemon in between.
//
// # Access
//
// Every task of a session (an ipc connection) is checked against the
// owner, group and mode of the bucket it names, with the uid and gid the
// kernel gave for the connection (SO_PEERCRED), on every request, not
// only at open: a handle grants nothing by itself, so a chmod takes
// effect on the next request of every client. A bucket is created owned
// by the caller (mode 0600 unless open_with says otherwise). Reading
// (get, list, stat, versions, queries) needs r, writing (put, delete,
// tags) needs w, chmod, set_durable and delete_bucket need the owner,
// chown does not exist; root passes every check (bufferpool/meta.go). A bucket the
// caller may not read is left out of buckets and query answers; naming one
// directly fails with runtime.ErrPermission. The daemon's own buckets
// (page buckets of files and OMNI views, names "file:N", "omni:...") are
// not reachable through this module at all. Tasks without a session (in
// the daemon's process) are trusted.
//
// # Durable buckets
//
// open_with's optional bucket flags (BucketFlagDurable) create a durable
// bucket, set_durable makes an existing one durable or plain again:
// every put, partial put, versioned put, tag change and delete of a blob
// of a durable bucket is answered once the pool's blob store has it,
// synced (bufferpool/durable.go). A client sends the flags only when not
// zero, so a daemon without them still serves it plain buckets; the
// bucket_stat reply's last byte (DurableBucket) is sent only for a durable
// bucket and read only if present, so a client without it still stats
// every other bucket.
//
// Safe for concurrent use: the pool locks per bucket.
package cte

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/runtime"
)

// Name is the module's name.
const Name = "cte"

// Module serves a pool.
type Module struct {
	runtime.MethodTable
	pool *bufferpool.Pool
}

var _ runtime.Module = (*Module)(nil)

// New returns the module over pool (which the caller owns and closes).
func New(pool *bufferpool.Pool) *Module {
	m := &Module{pool: pool}
	m.MethodTable = runtime.MethodTable{
		{MOpen, m.open}, {MClose, m.close}, {MPut, m.put}, {MGet, m.get},
		{MPartialPut, m.partialPut}, {MPartialGet, m.partialGet}, {MDelete, m.delete},
		{MList, m.list}, {MStat, m.stat}, {MSetTag, m.setTag}, {MDeleteTag, m.deleteTag},
		{MBuckets, m.buckets}, {MDeleteBucket, m.deleteBucket}, {MStats, m.stats},
		{MOpenWith, m.openWith}, {MChmod, m.chmod}, {MBucketStat, m.bucketStat}, {MQuery, m.query},
		{MPutWith, m.putWith}, {MPutVersion, m.putVersion}, {MGetVersion, m.getVersion},
		{MListVersions, m.listVersions},
		{MSetCompress, m.setCompress}, {MSetDurable, m.setDurable},
	}
	return m
}

func (m *Module) Name() string                  { return Name }
func (m *Module) Methods() []string             { return m.Names() }
func (m *Module) Initialize(*runtime.Env) error { return nil }
func (m *Module) Shutdown() error               { return nil }

// wrap maps a pool error onto the runtime's sentinels.
func wrap(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bufferpool.ErrNotFound):
		return fmt.Errorf("%w: %w", runtime.ErrNoEntry, err)
	case errors.Is(err, bufferpool.ErrInvalid), errors.Is(err, bufferpool.ErrNotSupported):
		return fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	case errors.Is(err, bufferpool.ErrNoSpace):
		return fmt.Errorf("%w: %w", runtime.ErrNoSpace, err)
	case errors.Is(err, bufferpool.ErrExist):
		return fmt.Errorf("%w: %w", runtime.ErrExist, err)
	case errors.Is(err, bufferpool.ErrClosed):
		return fmt.Errorf("%w: %w", runtime.ErrShutdown, err)
	case errors.Is(err, bufferpool.ErrPermission):
		return fmt.Errorf("%w: %w", runtime.ErrPermission, err)
	case errors.Is(err, bufferpool.ErrBusy):
		return fmt.Errorf("%w: %w", runtime.ErrTooBusy, err)
	case errors.Is(err, bufferpool.ErrCorrupt):
		// The pool counts it (TierStats.ChecksumErrors); the one log line
		// names the bucket, the blob and the bytes.
		logrus.WithField("module", Name).Errorf("%v: the read fails", err)
		return fmt.Errorf("%w: %w", runtime.ErrCorrupt, err)
	}
	return err
}

// handle is a bucket a session opened.
type handle struct{ b *bufferpool.Bucket }

func (h *handle) Close() error { return nil }

var _ io.Closer = (*handle)(nil)

// Access needs of a request.
const (
	needRead  = bufferpool.AccessRead
	needWrite = bufferpool.AccessWrite
	needOwner = 8 // the owner or root
)

// allowed reports whether the task's caller may use b for need.
func allowed(t *runtime.Task, b *bufferpool.Bucket, need uint32) bool {
	if t.Session == nil {
		return true // the daemon's own tasks
	}
	m := b.Meta()
	if need == needOwner {
		return m.OwnedBy(t.Session.UID)
	}
	return m.Permits(t.Session.UID, t.Session.GID, need)
}

// check fails with ErrPermission unless the caller may use b for need.
func check(t *runtime.Task, b *bufferpool.Bucket, need uint32) error {
	if b.PageSize() > 0 {
		return fmt.Errorf("bucket %s belongs to the file layer: %w", b.Name(), runtime.ErrPermission)
	}
	if !allowed(t, b, need) {
		uid := uint32(0)
		if t.Session != nil {
			uid = t.Session.UID
		}
		m := b.Meta()
		return fmt.Errorf("bucket %s (owner %d, group %d, mode %#o) for uid %d: %w", b.Name(), m.Owner, m.Group,
			m.Mode, uid, runtime.ErrPermission)
	}
	return nil
}

// lookup returns the existing named bucket name, or ErrNoEntry.
func (m *Module) lookup(name string) (*bufferpool.Bucket, error) {
	if err := bufferpool.ValidBucketName(name); err != nil {
		return nil, wrap(err)
	}
	b, err := m.pool.LookupBucket(name)
	return b, wrap(err)
}

// openName returns bucket name, creating it owned by the caller with mode,
// keep (0: defaults) and flags (BucketFlagDurable), and checks that the
// caller may use it at all.
func (m *Module) openName(t *runtime.Task, name string, mode uint32, keep int, flags uint32) (*bufferpool.Bucket, error) {
	if err := bufferpool.ValidBucketName(name); err != nil {
		return nil, wrap(err)
	}
	if mode&^0o777 != 0 || keep < 0 || flags&^BucketFlagDurable != 0 {
		return nil, fmt.Errorf("bucket %s: mode %#o, keep %d, flags %#x: %w", name, mode, keep, flags, runtime.ErrInvalid)
	}
	opts := bufferpool.BucketOptions{Mode: mode, KeepVersions: keep, Durable: flags&BucketFlagDurable != 0}
	if t.Session != nil {
		opts.Owner, opts.Group = t.Session.UID, t.Session.GID
	}
	b, err := m.pool.Bucket(name, opts)
	if err != nil {
		return nil, wrap(err)
	}
	if b.PageSize() > 0 || (!allowed(t, b, needRead) && !allowed(t, b, needWrite)) {
		return nil, check(t, b, needRead)
	}
	return b, nil
}

// bucket decodes a bucket reference and checks the caller's access.
func (m *Module) bucket(t *runtime.Task, r *runtime.ArgReader, need uint32) (*bufferpool.Bucket, error) {
	h := r.U64()
	if h == 0 {
		name := r.String(MaxName)
		if err := r.Err(); err != nil {
			return nil, err
		}
		b, err := m.openName(t, name, 0, 0, 0)
		if err != nil {
			return nil, err
		}
		return b, check(t, b, need)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if t.Session == nil {
		return nil, fmt.Errorf("bucket handle %d without a session: %w", h, runtime.ErrInvalid)
	}
	c, err := t.Session.Handle(h)
	if err != nil {
		return nil, err
	}
	hb, ok := c.(*handle)
	if !ok {
		return nil, fmt.Errorf("handle %d is not a bucket: %w", h, runtime.ErrInvalid)
	}
	return hb.b, check(t, hb.b, need)
}

// blobArgs decodes (ref, blob), checks access for need and that nothing
// else follows unless more is set.
func (m *Module) blobArgs(t *runtime.Task, need uint32, more bool) (*bufferpool.Bucket, string, *runtime.ArgReader, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r, need)
	if err != nil {
		return nil, "", nil, err
	}
	name := r.String(MaxName)
	err = r.Err()
	if !more {
		err = r.Done()
	}
	if err != nil {
		return nil, "", nil, err
	}
	return b, name, r, nil
}

func (m *Module) open(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	name := r.String(MaxName)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return m.openHandle(t, name, 0, 0, 0)
}

// openWith is open with the options of a bucket it creates; the bucket
// flags are optional (clients send them only when not zero).
func (m *Module) openWith(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	name := r.String(MaxName)
	mode, keep := r.U32(), r.U32()
	var flags uint32
	if r.Err() == nil && r.Len() > 0 {
		flags = r.U32()
	}
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	if keep > 1<<16 {
		return runtime.Result{}, fmt.Errorf("keep %d versions: %w", keep, runtime.ErrInvalid)
	}
	return m.openHandle(t, name, mode, int(keep), flags)
}

func (m *Module) openHandle(t *runtime.Task, name string, mode uint32, keep int, flags uint32) (runtime.Result, error) {
	if t.Session == nil {
		return runtime.Result{}, fmt.Errorf("open needs a session: %w", runtime.ErrInvalid)
	}
	b, err := m.openName(t, name, mode, keep, flags)
	if err != nil {
		return runtime.Result{}, err
	}
	h, err := t.Session.Open(&handle{b})
	return runtime.Result{Value: h}, err
}

func (m *Module) close(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	h := r.U64()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	if t.Session == nil {
		return runtime.Result{}, fmt.Errorf("close needs a session: %w", runtime.ErrInvalid)
	}
	return runtime.Result{}, t.Session.CloseHandle(h)
}

func (m *Module) put(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, needWrite, false)
	if err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{N: 0, Value: uint64(len(t.In))}, wrap(b.Put(name, t.In))
}

// putFlags decodes (ref, blob, flags).
func (m *Module) putFlags(t *runtime.Task) (*bufferpool.Bucket, string, bufferpool.PutOptions, error) {
	b, name, r, err := m.blobArgs(t, needWrite, true)
	if err != nil {
		return nil, "", bufferpool.PutOptions{}, err
	}
	flags := r.U32()
	if err := r.Done(); err != nil {
		return nil, "", bufferpool.PutOptions{}, err
	}
	if flags&^FlagDurable != 0 {
		return nil, "", bufferpool.PutOptions{}, fmt.Errorf("put flags %#x: %w", flags, runtime.ErrInvalid)
	}
	return b, name, bufferpool.PutOptions{Durable: flags&FlagDurable != 0}, nil
}

func (m *Module) putWith(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, o, err := m.putFlags(t)
	if err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{Value: uint64(len(t.In))}, wrap(b.PutWith(name, t.In, o))
}

func (m *Module) putVersion(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, o, err := m.putFlags(t)
	if err != nil {
		return runtime.Result{}, err
	}
	v, err := b.PutVersion(name, t.In, o)
	return runtime.Result{Value: v}, wrap(err)
}

func (m *Module) partialPut(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, needWrite, true)
	if err != nil {
		return runtime.Result{}, err
	}
	off := r.I64()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{Value: uint64(len(t.In))}, wrap(b.PartialPut(name, off, t.In))
}

// get reads the whole blob into Out; a blob larger than Out fails with
// ErrShortBuffer and its size in Value, before any byte is copied (a
// client that guessed too small asks again with the size). A blob that
// grows between the size check and the read is read again (a few times).
func (m *Module) get(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, needRead, false)
	if err != nil {
		return runtime.Result{}, err
	}
	for try := 0; try < 4; try++ {
		info, err := b.Stat(name)
		if err != nil {
			return runtime.Result{}, wrap(err)
		}
		if info.Size > int64(len(t.Out)) {
			return runtime.Result{Value: uint64(info.Size)}, fmt.Errorf("blob %q has %d bytes, buffer %d: %w",
				name, info.Size, len(t.Out), runtime.ErrShortBuffer)
		}
		n, err := b.PartialGet(name, 0, t.Out)
		if err != nil {
			return runtime.Result{}, wrap(err)
		}
		if n < len(t.Out) {
			return runtime.Result{N: n, Value: uint64(n)}, nil
		}
		// Out is full: the blob may have grown since Stat.
		if info, err = b.Stat(name); err != nil {
			return runtime.Result{}, wrap(err)
		}
		if info.Size <= int64(n) {
			return runtime.Result{N: n, Value: uint64(n)}, nil
		}
	}
	return runtime.Result{}, fmt.Errorf("blob %q keeps changing size: %w", name, runtime.ErrTooBusy)
}

// getVersion copies version v of the blob into Out (ErrShortBuffer with
// the size in Value if it does not fit).
func (m *Module) getVersion(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, needRead, true)
	if err != nil {
		return runtime.Result{}, err
	}
	v := r.U64()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	data, err := b.GetVersion(name, v)
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	if len(data) > len(t.Out) {
		return runtime.Result{Value: uint64(len(data))}, fmt.Errorf("version %d of %q has %d bytes, buffer %d: %w",
			v, name, len(data), len(t.Out), runtime.ErrShortBuffer)
	}
	n := copy(t.Out, data)
	return runtime.Result{N: n, Value: uint64(n)}, nil
}

func (m *Module) listVersions(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, needRead, false)
	if err != nil {
		return runtime.Result{}, err
	}
	vs, err := b.ListVersions(name)
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	w := runtime.NewArgWriter(nil)
	w.U32(uint32(len(vs)))
	for _, v := range vs {
		WriteVersion(w, VersionInfo(v))
	}
	return t.Reply(w.Bytes())
}

func (m *Module) partialGet(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, needRead, true)
	if err != nil {
		return runtime.Result{}, err
	}
	off := r.I64()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	n, err := b.PartialGet(name, off, t.Out)
	return runtime.Result{N: n, Value: uint64(n)}, wrap(err)
}

func (m *Module) delete(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, needWrite, false)
	if err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.Delete(name))
}

func info(bi bufferpool.BlobInfo) Info {
	return Info{Name: bi.Name, Page: bi.Page, Size: bi.Size, Tier: bi.Tier, Dirty: bi.Dirty, Version: bi.Version,
		Reads: bi.Reads, Score: bi.Score, LastUsed: bi.LastUsed, Tags: bi.Tags, Modified: bi.Modified,
		Generation: bi.Generation, Durable: bi.Durable}
}

func (m *Module) list(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r, needRead)
	if err != nil {
		return runtime.Result{}, err
	}
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	infos := b.List()
	w := runtime.NewArgWriter(nil)
	w.U32(uint32(len(infos)))
	for _, bi := range infos {
		WriteInfo(w, info(bi))
	}
	return t.Reply(w.Bytes())
}

func (m *Module) stat(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, needRead, false)
	if err != nil {
		return runtime.Result{}, err
	}
	bi, err := b.Stat(name)
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	w := runtime.NewArgWriter(nil)
	WriteInfo(w, info(bi))
	return t.Reply(w.Bytes())
}

func (m *Module) setTag(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, needWrite, true)
	if err != nil {
		return runtime.Result{}, err
	}
	k, v := r.String(MaxTagKey), r.String(MaxTagValue)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	if k == "" {
		return runtime.Result{}, fmt.Errorf("empty tag key: %w", runtime.ErrInvalid)
	}
	return runtime.Result{}, wrap(b.SetTag(name, k, v))
}

func (m *Module) deleteTag(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, needWrite, true)
	if err != nil {
		return runtime.Result{}, err
	}
	k := r.String(MaxTagKey)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.DeleteTag(name, k))
}

// setCompress sets the codec the bucket's blobs get when they move to a
// slower tier (bufferpool.Codecs; "" or "none": none).
func (m *Module) setCompress(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r, needWrite)
	if err != nil {
		return runtime.Result{}, err
	}
	codec := r.String(16)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.SetCompress(codec))
}

// setDurable makes every later write to the bucket durable, or plain
// again (Bucket.SetDurable): the owner's (and root's) to change, as the
// mode is, since it changes what every writer's calls promise.
func (m *Module) setDurable(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r, needOwner)
	if err != nil {
		return runtime.Result{}, err
	}
	on := r.Bool()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.SetDurable(on))
}

// readable reports whether b is a named bucket the caller may read.
func readable(t *runtime.Task, b *bufferpool.Bucket) bool {
	return b.PageSize() == 0 && bufferpool.ValidBucketName(b.Name()) == nil && allowed(t, b, needRead)
}

// buckets lists the named buckets the caller may read, or with a prefix
// argument those named it or below it (the name index).
func (m *Module) buckets(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	prefix := ""
	if len(t.Args) != 0 {
		r := runtime.NewArgReader(t.Args)
		prefix = r.String(MaxName)
		if err := r.Done(); err != nil {
			return runtime.Result{}, err
		}
	}
	var names []string
	for _, n := range m.pool.BucketsUnder(prefix) {
		if b, err := m.pool.LookupBucket(n); err == nil && readable(t, b) {
			names = append(names, n)
		}
	}
	w := runtime.NewArgWriter(nil)
	w.U32(uint32(len(names)))
	for _, n := range names {
		w.String(n)
	}
	return t.Reply(w.Bytes())
}

func (m *Module) deleteBucket(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	name := r.String(MaxName)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	b, err := m.lookup(name)
	if err != nil {
		return runtime.Result{}, err
	}
	if err := check(t, b, needOwner); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(m.pool.DeleteBucket(name))
}

func (m *Module) chmod(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r, needOwner)
	if err != nil {
		return runtime.Result{}, err
	}
	mode := r.U32()
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.Chmod(mode))
}

// bucketStat describes a bucket; by name it never creates one, and any
// caller may see who owns a named bucket (as stat(2) of a file in a
// readable directory shows it).
func (m *Module) bucketStat(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	var b *bufferpool.Bucket
	var err error
	if r := runtime.NewArgReader(t.Args); r.U64() == 0 {
		name := r.String(MaxName)
		if err := r.Done(); err != nil {
			return runtime.Result{}, err
		}
		if b, err = m.lookup(name); err == nil && b.PageSize() > 0 {
			err = check(t, b, needRead)
		}
	} else {
		r = runtime.NewArgReader(t.Args)
		if b, err = m.bucket(t, r, 0); err == nil {
			err = r.Done()
		}
	}
	if err != nil {
		return runtime.Result{}, err
	}
	meta := b.Meta()
	w := runtime.NewArgWriter(nil)
	WriteBucketStat(w, BucketStat{Name: b.Name(), Owner: meta.Owner, Group: meta.Group, Mode: meta.Mode,
		Created: meta.Created, KeepVersions: uint32(meta.KeepVersions), Durable: b.Stored(), DurableBucket: meta.Durable})
	return t.Reply(w.Bytes())
}

func (m *Module) query(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	q := ReadQuery(r)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	pq := bufferpool.Query{Prefix: q.Prefix, MinSize: q.MinSize, MaxSize: q.MaxSize,
		ModifiedAfter: q.ModifiedAfter, ModifiedBefore: q.ModifiedBefore, Limit: int(q.Limit)}
	for _, f := range q.Tags {
		pq.Tags = append(pq.Tags, bufferpool.TagFilter(f))
	}
	res, err := m.pool.Query(pq, func(b *bufferpool.Bucket) bool { return readable(t, b) })
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	w := runtime.NewArgWriter(nil)
	w.U32(uint32(len(res)))
	for _, qr := range res {
		w.String(qr.Bucket)
		WriteInfo(w, info(qr.BlobInfo))
	}
	return t.Reply(w.Bytes())
}

func (m *Module) stats(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, err := json.Marshal(m.pool.Stats())
	if err != nil {
		return runtime.Result{}, fmt.Errorf("%w: %w", runtime.ErrInternal, err)
	}
	return t.Reply(b)
}
