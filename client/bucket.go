package client

import (
	"errors"
	"fmt"

	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/modules/cte"
)

// errRoom is output space given to calls that return no data, for the
// daemon's error message.
const errRoom = 256

// getGuess is the output buffer a Get of unknown size starts with; a
// larger blob costs a second round trip with the exact size.
const getGuess = 256 << 10

// BlobInfo describes a blob: size, tier, dirty, version, reads, tags.
type BlobInfo = cte.Info

// Bucket is an open bucket of the daemon's buffer pool (a handle in this
// client's session). Safe for concurrent use.
type Bucket struct {
	c      *Client
	name   string
	handle uint64
}

// BucketOption is an option of Client.Bucket.
type BucketOption func(*Bucket) error

// Compress makes the bucket's blobs compressed with codec ("zstd", "s2",
// "lz4"; "none" for none) when the daemon moves them to a slower tier
// (RAM stays uncompressed); a blob whose first 64 KiB do not shrink is
// stored as it is. It is Bucket.SetCompress at open.
func Compress(codec string) BucketOption {
	return func(b *Bucket) error { return b.SetCompress(codec) }
}

// Durable makes the bucket durable (Bucket.SetDurable(true) at open):
// every write to it returns once the daemon's durable store has it,
// synced, whether the bucket was just created or not.
func Durable() BucketOption {
	return func(b *Bucket) error { return b.SetDurable(true) }
}

// SetCompress sets the codec of the bucket's blobs on slower tiers, for
// the blobs that move there from now on (see Compress).
func (b *Bucket) SetCompress(codec string) error {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	if err := b.simple(cte.MSetCompress, w.String(codec).Bytes()); err != nil {
		return fmt.Errorf("compress bucket %q with %q: %w", b.name, codec, err)
	}
	return nil
}

// Bucket opens the bucket called name, creating it if absent, and
// applies opts (Compress, Durable).
func (c *Client) Bucket(name string, opts ...BucketOption) (*Bucket, error) {
	k, err := c.newCall(cte.Name, cte.MOpen, runtime.NewArgWriter(nil).String(name).Bytes(), nil, errRoom)
	if err != nil {
		return nil, err
	}
	b := &Bucket{c: c, name: name}
	err = k.do(func(res runtime.Result, _ []byte) error { b.handle = res.Value; return nil })
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", name, err)
	}
	for _, o := range opts {
		if err := o(b); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.name }

// Close releases the handle (the bucket and its blobs stay).
func (b *Bucket) Close() error {
	return b.simple(cte.MClose, runtime.NewArgWriter(nil).U64(b.handle).Bytes())
}

func (b *Bucket) args(blob string) *runtime.ArgWriter {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	return w.String(blob)
}

func (b *Bucket) simple(method string, args []byte) error {
	k, err := b.c.newCall(cte.Name, method, args, nil, errRoom)
	if err != nil {
		return err
	}
	return k.do(nil)
}

// Put creates or replaces blob with data.
func (b *Bucket) Put(blob string, data []byte) error {
	t, err := b.PutAsync(blob, data)
	if err != nil {
		return err
	}
	return t.Wait()
}

// PartialPut writes data at off of blob, growing (or creating) it.
func (b *Bucket) PartialPut(blob string, off int64, data []byte) error {
	t, err := b.PartialPutAsync(blob, off, data)
	if err != nil {
		return err
	}
	return t.Wait()
}

// Get returns a copy of the blob.
func (b *Bucket) Get(blob string) ([]byte, error) {
	t, err := b.GetAsync(blob)
	if err != nil {
		return nil, err
	}
	if err := t.Wait(); err != nil {
		return nil, err
	}
	return t.Data(), nil
}

// PartialGet reads into buf from off of blob and returns the bytes read
// (fewer at the end of the blob).
func (b *Bucket) PartialGet(blob string, off int64, buf []byte) (int, error) {
	t, err := b.PartialGetAsync(blob, off, buf)
	if err != nil {
		return 0, err
	}
	err = t.Wait()
	return t.N(), err
}

// Delete removes a blob (and its tags).
func (b *Bucket) Delete(blob string) error { return b.simple(cte.MDelete, b.args(blob).Bytes()) }

// SetTag sets a tag (key/value metadata) on a blob.
func (b *Bucket) SetTag(blob, key, value string) error {
	return b.simple(cte.MSetTag, b.args(blob).String(key).String(value).Bytes())
}

// DeleteTag removes a tag from a blob.
func (b *Bucket) DeleteTag(blob, key string) error {
	return b.simple(cte.MDeleteTag, b.args(blob).String(key).Bytes())
}

// Tags returns a blob's tags.
func (b *Bucket) Tags(blob string) (map[string]string, error) {
	i, err := b.Stat(blob)
	return i.Tags, err
}

// Stat describes one blob, tags included.
func (b *Bucket) Stat(blob string) (BlobInfo, error) {
	var info BlobInfo
	err := b.reply(cte.MStat, b.args(blob).Bytes(), 64<<10, func(r *runtime.ArgReader) {
		info = cte.ReadInfo(r)
	})
	if err != nil {
		return BlobInfo{}, err
	}
	return info, nil
}

// List describes every blob of the bucket.
func (b *Bucket) List() ([]BlobInfo, error) {
	w := runtime.NewArgWriter(nil)
	cte.WriteRef(w, b.handle, b.name)
	var out []BlobInfo
	err := b.reply(cte.MList, w.Bytes(), 1<<20, func(r *runtime.ArgReader) { out = readList(r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readList decodes the reply of cte.list (check r.Err).
func readList(r *runtime.ArgReader) []BlobInfo {
	n := r.U32()
	var out []BlobInfo
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		out = append(out, cte.ReadInfo(r))
	}
	return out
}

// reply runs a method whose answer is an encoded message, growing the
// output buffer once if the daemon says it is too small.
func (b *Bucket) reply(method string, args []byte, guess int, decode func(*runtime.ArgReader)) error {
	return b.raw(method, args, guess, func(out []byte) error {
		r := runtime.NewArgReader(out)
		decode(r)
		return r.Done()
	})
}

// raw runs a method and hands its output to use before the buffer is
// freed, growing the output buffer once if the daemon says it is too
// small.
func (b *Bucket) raw(method string, args []byte, guess int, use func(out []byte) error) error {
	for try := 0; ; try++ {
		k, err := b.c.newCall(cte.Name, method, args, nil, guess)
		if err != nil {
			return err
		}
		res, err := b.c.c.Do(k.m, k.args, k.in, k.out)
		if err == nil {
			err = use(k.out.Bytes()[:res.N])
		}
		k.buf.Free()
		if errors.Is(err, ErrShortBuffer) && try == 0 && res.Value > 0 && res.Value < 1<<31 {
			guess = int(res.Value)
			continue
		}
		return err
	}
}

type shortError struct {
	need uint64
	err  error
}

func (e *shortError) Error() string { return e.err.Error() }
func (e *shortError) Unwrap() error { return e.err }

// NeededSize returns the buffer size an ErrShortBuffer error asked for
// (GetBuffer into a buffer too small), or 0.
func NeededSize(err error) int {
	var s *shortError
	if errors.As(err, &s) {
		return int(s.need)
	}
	return 0
}

// PutBuffer stores the first n bytes of buf (a buffer from Alloc) as blob
// without copying them in this process.
func (b *Bucket) PutBuffer(blob string, buf *Buffer, n int) error {
	k, err := b.c.newCall(cte.Name, cte.MPut, b.args(blob).Bytes(), nil, errRoom)
	if err != nil {
		return err
	}
	k.in = buf.Slice(0, n)
	return k.do(nil)
}

// GetBuffer reads blob into buf (a buffer from Alloc) and returns its
// size; ErrShortBuffer if it does not fit.
func (b *Bucket) GetBuffer(blob string, buf *Buffer) (int, error) {
	k, err := b.c.newCall(cte.Name, cte.MGet, b.args(blob).Bytes(), nil, 0)
	if err != nil {
		return 0, err
	}
	k.out = buf.All()
	res, err := b.c.c.Do(k.m, k.args, k.in, k.out)
	k.buf.Free()
	if errors.Is(err, ErrShortBuffer) {
		return 0, &shortError{need: res.Value, err: err}
	}
	return res.N, err
}

// PartialGetBuffer reads up to n bytes of blob from off into buf (a
// buffer from Alloc) at bufOff, and returns the bytes read (fewer at the
// end of the blob). The daemon writes them straight into buf: no copy in
// this process.
func (b *Bucket) PartialGetBuffer(blob string, off int64, buf *Buffer, bufOff, n int) (int, error) {
	if bufOff < 0 || n < 0 || bufOff > buf.Len()-n {
		return 0, fmt.Errorf("partial get: %d bytes at %d of a %d-byte buffer: %w", n, bufOff, buf.Len(), ErrInvalid)
	}
	k, err := b.c.newCall(cte.Name, cte.MPartialGet, b.args(blob).I64(off).Bytes(), nil, 0)
	if err != nil {
		return 0, err
	}
	k.out = buf.Slice(bufOff, n)
	res, err := b.c.c.Do(k.m, k.args, k.in, k.out)
	k.buf.Free()
	if err != nil {
		return 0, err
	}
	if res.N > n {
		return 0, fmt.Errorf("partial get: daemon returned %d bytes for %d: %w", res.N, n, runtime.ErrInternal)
	}
	return res.N, nil
}

// PartialPutBuffer writes n bytes of buf (a buffer from Alloc) from
// bufOff at off of blob, growing (or creating) it, without copying them
// in this process.
func (b *Bucket) PartialPutBuffer(blob string, off int64, buf *Buffer, bufOff, n int) error {
	if bufOff < 0 || n < 0 || bufOff > buf.Len()-n {
		return fmt.Errorf("partial put: %d bytes at %d of a %d-byte buffer: %w", n, bufOff, buf.Len(), ErrInvalid)
	}
	k, err := b.c.newCall(cte.Name, cte.MPartialPut, b.args(blob).I64(off).Bytes(), nil, errRoom)
	if err != nil {
		return err
	}
	k.in = buf.Slice(bufOff, n)
	return k.do(nil)
}
