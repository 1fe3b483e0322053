// Command capi is libiowarp_py.so, the C API of the iowarp client
// (-buildmode=c-shared; `make build` puts it in bin/): the buffer pool's
// buckets and blobs over runtime/ipc, for the Python package (python/iowarp,
// through ctypes) and any C program. It is a library of its own, not more
// exports of libiowarp.so: that one is an LD_PRELOAD shim whose
// constructor resolves libc, installs fork handlers and whose symbols
// interpose open/read/write; loading it to call a client API would turn
// the shim on (or half on) in a process that asked for a client.
//
// Every function returns 0 or a negative errno (-ENOENT for a missing
// blob or bucket, -EINVAL, -ENOSPC when the pool is full, -ENOMEM when
// this client's shared segment is, -EEXIST, -ENOBUFS when a buffer is too
// small, -EPIPE when the daemon is gone, -EIO otherwise) and, when err is
// not NULL, sets *err to a message the caller frees with iowarp_free.
// Objects are opaque 64-bit handles (runtime/cgo.Handle), each released
// once by its close or free function. Safe for concurrent use.
//
// Copies: iowarp_put and iowarp_partial_put/get copy between the caller's
// memory and the client's shared segment (one copy in this process), the
// daemon copies between the segment and its tier (one more). Buffers from
// iowarp_alloc live in the shared segment: the *_buffer calls move them
// with the daemon's copy only, so a caller that builds its data there
// (numpy arrays over the segment, python/iowarp) copies nothing itself.
// A buffer's memory stays mapped until its client is closed.
//
// Two Go runtimes in one process are not supported by Go: a program
// preloaded with libiowarp.so must not load this library too.
package main

// #include <stdint.h>
// #include <stdlib.h>
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/cgo"
	"syscall"
	"time"
	"unsafe"

	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/runtime/shm"
)

func main() {}

// errCode is the one translation of the client's errors into errnos.
func errCode(err error) C.int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, shm.ErrNoSpace):
		return -C.int(syscall.ENOMEM) // this client's segment is full (the pool's is ENOSPC)
	case errors.Is(err, client.ErrNotFound):
		return -C.int(syscall.ENOENT)
	case errors.Is(err, client.ErrInvalid):
		return -C.int(syscall.EINVAL)
	case errors.Is(err, client.ErrNoSpace):
		return -C.int(syscall.ENOSPC)
	case errors.Is(err, client.ErrExist):
		return -C.int(syscall.EEXIST)
	case errors.Is(err, client.ErrShortBuffer):
		return -C.int(syscall.ENOBUFS)
	case errors.Is(err, client.ErrDaemonGone), errors.Is(err, client.ErrClosed):
		return -C.int(syscall.EPIPE)
	}
	return -C.int(syscall.EIO)
}

// fail sets *err (when asked for) and returns the errno.
func fail(err error, out **C.char) C.int {
	if err != nil && out != nil {
		*out = C.CString(err.Error())
	}
	return errCode(err)
}

// object looks up a handle of type T.
func object[T any](h C.uint64_t) (v T, err error) {
	if h == 0 {
		return v, fmt.Errorf("null handle: %w", client.ErrInvalid)
	}
	defer func() {
		if recover() != nil { // cgo.Handle.Value panics on a stale handle
			err = fmt.Errorf("stale handle %d: %w", h, client.ErrInvalid)
		}
	}()
	v, ok := cgo.Handle(h).Value().(T)
	if !ok {
		return v, fmt.Errorf("handle of another type: %w", client.ErrInvalid)
	}
	return v, nil
}

func lookup[T any](h C.uint64_t, out **C.char) (T, C.int) {
	v, err := object[T](h)
	if err != nil {
		return v, fail(err, out)
	}
	return v, 0
}

// onBucket runs f on the bucket of handle h and returns f's error as
// the C return (0, or -errno with *err set).
func onBucket(h C.uint64_t, err **C.char, f func(*client.Bucket) error) C.int {
	b, rc := lookup[*client.Bucket](h, err)
	if rc != 0 {
		return rc
	}
	return fail(f(b), err)
}

// onBuffer is onBucket with the shared-segment buffer of handle buf.
func onBuffer(h, buf C.uint64_t, err **C.char, f func(*client.Bucket, *client.Buffer) error) C.int {
	bf, rc := lookup[*client.Buffer](buf, err)
	if rc != 0 {
		return rc
	}
	return onBucket(h, err, func(b *client.Bucket) error { return f(b, bf) })
}

// goBytes is a view of C memory (no copy); nil for n == 0.
func goBytes(p unsafe.Pointer, n C.size_t) []byte {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), int(n))
}

// setJSON marshals v into *out (freed with iowarp_free).
func setJSON(v any, out **C.char, err **C.char) C.int {
	b, e := json.Marshal(v)
	if e != nil {
		return fail(e, err)
	}
	*out = C.CString(string(b))
	return 0
}

// iowarp_free frees a string this library returned.
//
//export iowarp_free
func iowarp_free(p *C.char) { C.free(unsafe.Pointer(p)) }

// iowarp_connect connects to the daemon: socket (the ipc socket) or, if
// NULL or empty, the daemon of mount (NULL: $IOWARP_MOUNT or /iowarp);
// segment is the shared segment's size (0: 64 MiB).
//
//export iowarp_connect
func iowarp_connect(socket, mount *C.char, segment C.int64_t, out *C.uint64_t, err **C.char) C.int {
	o := client.Options{SegmentSize: int64(segment)}
	if socket != nil {
		o.Socket = C.GoString(socket)
	}
	if mount != nil {
		o.Mount = C.GoString(mount)
	}
	c, e := client.Connect(o)
	if e != nil {
		return fail(e, err)
	}
	*out = C.uint64_t(cgo.NewHandle(c))
	return 0
}

// iowarp_close hangs up and releases the client's handle; its buffers'
// memory is unmapped.
//
//export iowarp_close
func iowarp_close(h C.uint64_t, err **C.char) C.int {
	c, rc := lookup[*client.Client](h, err)
	if rc != 0 {
		return rc
	}
	cgo.Handle(h).Delete()
	return fail(c.Close(), err)
}

// iowarp_buckets sets *out to a JSON array of the daemon's bucket names.
//
//export iowarp_buckets
func iowarp_buckets(h C.uint64_t, out **C.char, err **C.char) C.int {
	c, rc := lookup[*client.Client](h, err)
	if rc != 0 {
		return rc
	}
	names, e := c.Buckets()
	if e != nil {
		return fail(e, err)
	}
	return setJSON(names, out, err)
}

// iowarp_delete_bucket drops a bucket and its blobs.
//
//export iowarp_delete_bucket
func iowarp_delete_bucket(h C.uint64_t, name *C.char, err **C.char) C.int {
	c, rc := lookup[*client.Client](h, err)
	if rc != 0 {
		return rc
	}
	return fail(c.DeleteBucket(C.GoString(name)), err)
}

// iowarp_bucket opens (creating it if absent) the bucket name.
//
//export iowarp_bucket
func iowarp_bucket(h C.uint64_t, name *C.char, out *C.uint64_t, err **C.char) C.int {
	c, rc := lookup[*client.Client](h, err)
	if rc != 0 {
		return rc
	}
	b, e := c.Bucket(C.GoString(name))
	if e != nil {
		return fail(e, err)
	}
	*out = C.uint64_t(cgo.NewHandle(b))
	return 0
}

// iowarp_bucket_close releases a bucket's handle (its blobs stay).
//
//export iowarp_bucket_close
func iowarp_bucket_close(h C.uint64_t, err **C.char) C.int {
	b, rc := lookup[*client.Bucket](h, err)
	if rc != 0 {
		return rc
	}
	cgo.Handle(h).Delete()
	return fail(b.Close(), err)
}

// iowarp_alloc allocates n bytes in the client's shared segment, not
// zeroed, and returns its handle and address (valid until
// iowarp_buffer_free, or the client's close).
//
//export iowarp_alloc
func iowarp_alloc(h C.uint64_t, n C.int64_t, out *C.uint64_t, addr *unsafe.Pointer, err **C.char) C.int {
	c, rc := lookup[*client.Client](h, err)
	if rc != 0 {
		return rc
	}
	if n <= 0 || int64(n) > 1<<40 {
		return fail(fmt.Errorf("alloc of %d bytes: %w", n, client.ErrInvalid), err)
	}
	// Not zeroed (the bytes are stale contents of this client's own
	// segment): every caller fills it, or has the daemon fill it.
	b, e := c.IPC().AllocUninit(int(n))
	if e != nil {
		return fail(e, err)
	}
	*out = C.uint64_t(cgo.NewHandle(b))
	*addr = unsafe.Pointer(unsafe.SliceData(b.Bytes()))
	return 0
}

// iowarp_buffer_free returns a buffer to the segment.
//
//export iowarp_buffer_free
func iowarp_buffer_free(h C.uint64_t, err **C.char) C.int {
	b, rc := lookup[*client.Buffer](h, err)
	if rc != 0 {
		return rc
	}
	cgo.Handle(h).Delete()
	b.Free()
	return 0
}

// iowarp_put creates or replaces blob with n bytes at p.
//
//export iowarp_put
func iowarp_put(h C.uint64_t, blob *C.char, p unsafe.Pointer, n C.size_t, err **C.char) C.int {
	return onBucket(h, err, func(b *client.Bucket) error { return b.Put(C.GoString(blob), goBytes(p, n)) })
}

// iowarp_partial_put writes n bytes at p to off of blob.
//
//export iowarp_partial_put
func iowarp_partial_put(h C.uint64_t, blob *C.char, off C.int64_t, p unsafe.Pointer, n C.size_t, err **C.char) C.int {
	return onBucket(h, err, func(b *client.Bucket) error { return b.PartialPut(C.GoString(blob), int64(off), goBytes(p, n)) })
}

// iowarp_partial_get reads up to n bytes from off of blob into p and sets
// *got to the bytes read.
//
//export iowarp_partial_get
func iowarp_partial_get(h C.uint64_t, blob *C.char, off C.int64_t, p unsafe.Pointer, n C.size_t, got *C.int64_t, err **C.char) C.int {
	return onBucket(h, err, func(b *client.Bucket) error {
		k, e := b.PartialGet(C.GoString(blob), int64(off), goBytes(p, n))
		*got = C.int64_t(k)
		return e
	})
}

// iowarp_put_buffer stores the first n bytes of a buffer as blob.
//
//export iowarp_put_buffer
func iowarp_put_buffer(h C.uint64_t, blob *C.char, buf C.uint64_t, n C.int64_t, err **C.char) C.int {
	return onBuffer(h, buf, err, func(b *client.Bucket, bf *client.Buffer) error {
		if n < 0 || int(n) > bf.Len() {
			return fmt.Errorf("put of %d bytes of a %d-byte buffer: %w", n, bf.Len(), client.ErrInvalid)
		}
		return b.PutBuffer(C.GoString(blob), bf, int(n))
	})
}

// iowarp_get_buffer reads blob into a buffer and sets *got to its size;
// -ENOBUFS with *got set to the size needed when it does not fit.
//
//export iowarp_get_buffer
func iowarp_get_buffer(h C.uint64_t, blob *C.char, buf C.uint64_t, got *C.int64_t, err **C.char) C.int {
	return onBuffer(h, buf, err, func(b *client.Bucket, bf *client.Buffer) error {
		k, e := b.GetBuffer(C.GoString(blob), bf)
		if need := client.NeededSize(e); need > 0 {
			k = need
		}
		*got = C.int64_t(k)
		return e
	})
}

// iowarp_partial_get_buffer reads up to n bytes from off of blob into a
// buffer at bufoff and sets *got to the bytes read.
//
//export iowarp_partial_get_buffer
func iowarp_partial_get_buffer(h C.uint64_t, blob *C.char, off C.int64_t, buf C.uint64_t, bufoff, n C.int64_t, got *C.int64_t, err **C.char) C.int {
	return onBuffer(h, buf, err, func(b *client.Bucket, bf *client.Buffer) error {
		k, e := b.PartialGetBuffer(C.GoString(blob), int64(off), bf, int(bufoff), int(n))
		*got = C.int64_t(k)
		return e
	})
}

// iowarp_partial_put_buffer writes n bytes of a buffer from bufoff at off
// of blob.
//
//export iowarp_partial_put_buffer
func iowarp_partial_put_buffer(h C.uint64_t, blob *C.char, off C.int64_t, buf C.uint64_t, bufoff, n C.int64_t, err **C.char) C.int {
	return onBuffer(h, buf, err, func(b *client.Bucket, bf *client.Buffer) error {
		return b.PartialPutBuffer(C.GoString(blob), int64(off), bf, int(bufoff), int(n))
	})
}

// iowarp_delete removes a blob.
//
//export iowarp_delete
func iowarp_delete(h C.uint64_t, blob *C.char, err **C.char) C.int {
	return onBucket(h, err, func(b *client.Bucket) error { return b.Delete(C.GoString(blob)) })
}

// iowarp_set_tag sets a tag on a blob.
//
//export iowarp_set_tag
func iowarp_set_tag(h C.uint64_t, blob, key, value *C.char, err **C.char) C.int {
	return onBucket(h, err, func(b *client.Bucket) error { return b.SetTag(C.GoString(blob), C.GoString(key), C.GoString(value)) })
}

// info is a blob's description as JSON.
type info struct {
	Name     string            `json:"name"`
	Size     int64             `json:"size"`
	Tier     string            `json:"tier"`
	Dirty    bool              `json:"dirty"`
	Version  uint64            `json:"version"`
	Reads    uint64            `json:"reads"`
	LastUsed string            `json:"last_used,omitempty"`
	Tags     map[string]string `json:"tags,omitempty"`
}

func infoOf(i client.BlobInfo) info {
	out := info{Name: i.Name, Size: i.Size, Tier: i.Tier, Dirty: i.Dirty, Version: i.Version, Reads: i.Reads, Tags: i.Tags}
	if !i.LastUsed.IsZero() {
		out.LastUsed = i.LastUsed.UTC().Format(time.RFC3339Nano)
	}
	return out
}

// iowarp_stat sets *out to a JSON object describing blob (name, size,
// tier, dirty, version, reads, last_used, tags).
//
//export iowarp_stat
func iowarp_stat(h C.uint64_t, blob *C.char, out **C.char, err **C.char) C.int {
	b, rc := lookup[*client.Bucket](h, err)
	if rc != 0 {
		return rc
	}
	i, e := b.Stat(C.GoString(blob))
	if e != nil {
		return fail(e, err)
	}
	return setJSON(infoOf(i), out, err)
}

// iowarp_list sets *out to a JSON array of every blob's description.
//
//export iowarp_list
func iowarp_list(h C.uint64_t, out **C.char, err **C.char) C.int {
	b, rc := lookup[*client.Bucket](h, err)
	if rc != 0 {
		return rc
	}
	l, e := b.List()
	if e != nil {
		return fail(e, err)
	}
	infos := make([]info, len(l))
	for i := range l {
		infos[i] = infoOf(l[i])
	}
	return setJSON(infos, out, err)
}
