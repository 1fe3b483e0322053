// Package cte is the runtime module that serves the buffer pool (the
// Context Transfer Engine) to tasks: buckets and blobs of a
// bufferpool.Pool, plus per-blob tags (small key/value metadata kept by
// the module, dropped with the blob).
//
// A client opens a bucket (creating it) and gets a handle in its session;
// handles are closed when the client goes. Data of Put and Get goes
// straight between the task's In/Out (the client's shared segment) and the
// pool's tiers: one copy each way (Put: bufferpool writes In into the
// tier's segment; Get: PartialGet reads the tier into Out), no buffer of
// the daemon in between.
//
// Safe for concurrent use: the pool locks per bucket, and tags are under
// the module's tagMu, a leaf lock.
package cte

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

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

	tagMu sync.Mutex
	tags  map[blobKey]map[string]string
}

type blobKey struct{ bucket, blob string }

var _ runtime.Module = (*Module)(nil)

// New returns the module over pool (which the caller owns and closes).
func New(pool *bufferpool.Pool) *Module {
	m := &Module{pool: pool, tags: map[blobKey]map[string]string{}}
	m.MethodTable = runtime.MethodTable{
		{MOpen, m.open}, {MClose, m.close}, {MPut, m.put}, {MGet, m.get},
		{MPartialPut, m.partialPut}, {MPartialGet, m.partialGet}, {MDelete, m.delete},
		{MList, m.list}, {MStat, m.stat}, {MSetTag, m.setTag}, {MDeleteTag, m.deleteTag},
		{MBuckets, m.buckets}, {MDeleteBucket, m.deleteBucket}, {MStats, m.stats},
		{MSetCompress, m.setCompress},
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
	case errors.Is(err, bufferpool.ErrInvalid):
		return fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	case errors.Is(err, bufferpool.ErrNoSpace):
		return fmt.Errorf("%w: %w", runtime.ErrNoSpace, err)
	case errors.Is(err, bufferpool.ErrExist):
		return fmt.Errorf("%w: %w", runtime.ErrExist, err)
	case errors.Is(err, bufferpool.ErrClosed):
		return fmt.Errorf("%w: %w", runtime.ErrShutdown, err)
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

// bucket decodes a bucket reference.
func (m *Module) bucket(t *runtime.Task, r *runtime.ArgReader) (*bufferpool.Bucket, error) {
	h := r.U64()
	if h == 0 {
		name := r.String(MaxName)
		if err := r.Err(); err != nil {
			return nil, err
		}
		b, err := m.pool.Bucket(name, bufferpool.BucketOptions{})
		return b, wrap(err)
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
	return hb.b, nil
}

// blobArgs decodes (ref, blob) and checks that nothing else follows
// unless more is set.
func (m *Module) blobArgs(t *runtime.Task, more bool) (*bufferpool.Bucket, string, *runtime.ArgReader, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r)
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
	if t.Session == nil {
		return runtime.Result{}, fmt.Errorf("open needs a session: %w", runtime.ErrInvalid)
	}
	b, err := m.pool.Bucket(name, bufferpool.BucketOptions{})
	if err != nil {
		return runtime.Result{}, wrap(err)
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
	b, name, _, err := m.blobArgs(t, false)
	if err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{N: 0, Value: uint64(len(t.In))}, wrap(b.Put(name, t.In))
}

func (m *Module) partialPut(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, true)
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
	b, name, _, err := m.blobArgs(t, false)
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

func (m *Module) partialGet(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, true)
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
	b, name, _, err := m.blobArgs(t, false)
	if err != nil {
		return runtime.Result{}, err
	}
	if err := b.Delete(name); err != nil {
		return runtime.Result{}, wrap(err)
	}
	m.tagMu.Lock()
	delete(m.tags, blobKey{b.Name(), name})
	m.tagMu.Unlock()
	return runtime.Result{}, nil
}

func (m *Module) info(bucket string, bi bufferpool.BlobInfo) Info {
	i := Info{Name: bi.Name, Page: bi.Page, Size: bi.Size, Tier: bi.Tier, Dirty: bi.Dirty, Version: bi.Version,
		Reads: bi.Reads, Score: bi.Score, LastUsed: bi.LastUsed}
	m.tagMu.Lock()
	if tags := m.tags[blobKey{bucket, bi.Name}]; len(tags) > 0 {
		i.Tags = make(map[string]string, len(tags))
		for k, v := range tags {
			i.Tags[k] = v
		}
	}
	m.tagMu.Unlock()
	return i
}

func (m *Module) list(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r)
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
		WriteInfo(w, m.info(b.Name(), bi))
	}
	return t.Reply(w.Bytes())
}

func (m *Module) stat(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, _, err := m.blobArgs(t, false)
	if err != nil {
		return runtime.Result{}, err
	}
	bi, err := b.Stat(name)
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	w := runtime.NewArgWriter(nil)
	WriteInfo(w, m.info(b.Name(), bi))
	return t.Reply(w.Bytes())
}

func (m *Module) setTag(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, true)
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
	if _, err := b.Stat(name); err != nil {
		return runtime.Result{}, wrap(err)
	}
	m.tagMu.Lock()
	defer m.tagMu.Unlock()
	key := blobKey{b.Name(), name}
	tags := m.tags[key]
	if tags == nil {
		tags = map[string]string{}
		m.tags[key] = tags
	}
	if _, ok := tags[k]; !ok && len(tags) >= MaxTags {
		return runtime.Result{}, fmt.Errorf("blob %q has %d tags: %w", name, len(tags), runtime.ErrNoSpace)
	}
	tags[k] = v
	return runtime.Result{}, nil
}

func (m *Module) deleteTag(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, name, r, err := m.blobArgs(t, true)
	if err != nil {
		return runtime.Result{}, err
	}
	k := r.String(MaxTagKey)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	m.tagMu.Lock()
	defer m.tagMu.Unlock()
	tags := m.tags[blobKey{b.Name(), name}]
	if _, ok := tags[k]; !ok {
		return runtime.Result{}, fmt.Errorf("tag %q of %q: %w", k, name, runtime.ErrNoEntry)
	}
	delete(tags, k)
	return runtime.Result{}, nil
}

// setCompress sets the codec the bucket's blobs get when they move to a
// slower tier (bufferpool.Codecs; "" or "none": none).
func (m *Module) setCompress(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	b, err := m.bucket(t, r)
	if err != nil {
		return runtime.Result{}, err
	}
	codec := r.String(16)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{}, wrap(b.SetCompress(codec))
}

func (m *Module) buckets(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	if len(t.Args) != 0 {
		return runtime.Result{}, fmt.Errorf("buckets takes no arguments: %w", runtime.ErrBadArgs)
	}
	names := m.pool.Buckets()
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
	if err := m.pool.DeleteBucket(name); err != nil {
		return runtime.Result{}, wrap(err)
	}
	m.tagMu.Lock()
	for k := range m.tags {
		if k.bucket == name {
			delete(m.tags, k)
		}
	}
	m.tagMu.Unlock()
	return runtime.Result{}, nil
}

func (m *Module) stats(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, err := json.Marshal(m.pool.Stats())
	if err != nil {
		return runtime.Result{}, fmt.Errorf("%w: %w", runtime.ErrInternal, err)
	}
	return t.Reply(b)
}
