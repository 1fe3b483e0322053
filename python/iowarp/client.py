"""Buckets and blobs of the daemon's buffer pool (the Context Transfer
Engine) over runtime/ipc, through libiowarp_py.so.

Where the bytes are copied:

- ``Client.empty(shape, dtype)`` returns a numpy array whose memory is in
  the client's shared segment (the memfd the daemon maps). ``put`` and
  ``partial_put`` of such an array copy nothing in this process: the daemon
  copies the segment into its tier, once.
- ``get`` and ``partial_get`` (without ``out``) return arrays in the shared
  segment: the daemon copies its tier into the segment, and that is the one
  copy; the array is a view of it, no copy here. The segment's space is
  held until the array is garbage-collected.
- Any other buffer (bytes, a numpy array of the heap) is copied once into
  the segment by ``put``, and ``get(..., out=array)`` / ``partial_get``
  into ``out`` copy once from the segment into it: two copies in all, one
  here and the daemon's.
- A transfer larger than a quarter of the segment (``segment_size``, 64 MiB
  by default) is made in pieces of that size through the copying calls, and
  so is a get while the segment is full of arrays still alive.

A numpy array put with ``put`` keeps its dtype and shape as tags of the
blob (``numpy.dtype``, ``numpy.shape``), so ``get`` returns it as it was.
Clients and buckets are safe for use from several threads.
"""

import ctypes
import errno
import json
import threading
import weakref

import numpy as np

from . import _lib
from ._lib import Error, NotFound, encode

# The pieces of a read through a full segment.
_SMALL_PIECE = 256 << 10

DTYPE_TAG = "numpy.dtype"
SHAPE_TAG = "numpy.shape"


class _Buffer:
    """Memory in the shared segment, freed when no array refers to it."""

    def __init__(self, client, n):
        self.client = client
        h = ctypes.c_uint64()
        addr = ctypes.c_void_p()
        _lib.call("iowarp_alloc", client._handle(), n, ctypes.byref(h), ctypes.byref(addr))
        self.handle, self.addr, self.size = h.value, addr.value, n
        client._hold(self)

    def free(self):
        if self.handle:
            h, self.handle = self.handle, 0
            try:
                _lib.call("iowarp_buffer_free", h)
            finally:
                self.client._unhold(self)

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def array(self, n=None, dtype=np.uint8, shape=None):
        """A numpy view of the first n bytes (the buffer lives as long as it)."""
        n = self.size if n is None else n
        view = _View(self, n)
        a = np.asarray(view)
        dt = np.dtype(dtype)
        if dt != np.uint8:
            a = a.view(dt)
        if shape is not None:
            a = a.reshape(shape)
        return a


class _View:
    """Exposes a buffer to numpy (__array_interface__); numpy keeps it,
    and so the buffer, as the array's base."""

    def __init__(self, buf, n):
        self.buf = buf
        self.__array_interface__ = {"data": (buf.addr, False), "shape": (n,),
                                    "typestr": "|u1", "version": 3}


def _segment_buffer(a):
    """The _Buffer an array's memory lies in, and the offset in it; None."""
    if not isinstance(a, np.ndarray):
        return None, 0
    base = a
    while base is not None and not isinstance(base, _View):
        base = getattr(base, "base", None)
    if base is None:
        return None, 0
    buf = base.buf
    off = a.__array_interface__["data"][0] - buf.addr
    if off < 0 or off + a.nbytes > buf.size:
        return None, 0
    return buf, off


def _bytes_of(data):
    """(ctypes pointer, nbytes, keepalive) of bytes-like data, C order."""
    if isinstance(data, np.ndarray):
        a = np.ascontiguousarray(data)
        return ctypes.c_void_p(a.ctypes.data), a.nbytes, a
    mv = memoryview(data)
    if not mv.c_contiguous:
        mv = memoryview(mv.tobytes())
    mv = mv.cast("B")
    if mv.nbytes == 0:
        return None, 0, mv
    if mv.readonly:
        b = bytes(mv)
        return ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p), len(b), b
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.cast(arr, ctypes.c_void_p), mv.nbytes, (mv, arr)


class Client:
    """A connection to the daemon (its ipc socket, or the daemon of mount;
    by default $IOWARP_IPC_SOCKET, $IOWARP_MOUNT, /iowarp, or the daemon
    without a mount)."""

    def __init__(self, socket=None, mount=None, segment_size=0):
        self._lock = threading.Lock()
        self._live = weakref.WeakSet()
        self._closing = False
        h = ctypes.c_uint64()
        _lib.call("iowarp_connect", encode(socket) if socket else None,
                  encode(mount) if mount else None, int(segment_size), ctypes.byref(h))
        self._h = h.value
        self.segment_size = int(segment_size) or 64 << 20

    def _handle(self):
        with self._lock:
            if not self._h or self._closing:
                raise Error(errno.EBADF, "iowarp client is closed")
            return self._h

    def _hold(self, buf):
        with self._lock:
            self._live.add(buf)

    def _unhold(self, buf):
        with self._lock:
            self._live.discard(buf)
            last = self._closing and not self._live
        if last:
            self._close_now()

    def _close_now(self):
        with self._lock:
            h, self._h = self._h, 0
        if h:
            _lib.call("iowarp_close", h)

    def close(self):
        """Hangs up. Arrays still in the shared segment stay valid: the
        connection is closed when the last of them is freed."""
        with self._lock:
            self._closing = True
            busy = bool(self._live)
        if not busy:
            self._close_now()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def piece(self):
        """The largest transfer made through the segment at once."""
        return max(self.segment_size // 4, 1 << 20)

    def empty(self, shape, dtype=np.float64):
        """A new array in the shared segment (uninitialised, like
        numpy.empty: it may hold this client's earlier transfers): put
        copies nothing of it in this process."""
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        return _Buffer(self, max(n, 1)).array(n, dt, shape)

    def buckets(self):
        """Names of the daemon's buckets."""
        return json.loads(_lib.call_string("iowarp_buckets", self._handle()))

    def delete_bucket(self, name):
        """Drops a bucket and its blobs."""
        _lib.call("iowarp_delete_bucket", self._handle(), encode(name))

    def bucket(self, name):
        return Bucket(name, client=self)


_default = None
_default_lock = threading.Lock()


def default_client():
    """The process's shared Client, connected on first use."""
    global _default
    with _default_lock:
        if _default is None or not _default._h:
            _default = Client()
        return _default


def connect(socket=None, mount=None, segment_size=0):
    """A new Client (see Client)."""
    return Client(socket=socket, mount=mount, segment_size=segment_size)


class Bucket:
    """A bucket of blobs, opened (created if absent) in the daemon."""

    def __init__(self, name, client=None):
        self.client = client or default_client()
        self.name = name
        h = ctypes.c_uint64()
        _lib.call("iowarp_bucket", self.client._handle(), encode(name), ctypes.byref(h))
        self._h = h.value

    def __repr__(self):
        return "iowarp.Bucket(%r)" % self.name

    def close(self):
        """Releases the handle (the bucket and its blobs stay)."""
        h, self._h = self._h, 0
        if h:
            _lib.call("iowarp_bucket_close", h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._h and self.client._h:
                self.close()
        except Exception:
            pass

    def _handle(self):
        if not self._h:
            raise Error(errno.EBADF, "bucket %r is closed" % self.name)
        return self._h

    # writes

    def put(self, blob, data):
        """Creates or replaces blob with data (bytes-like or a numpy array;
        an array's dtype and shape are kept as tags)."""
        b = encode(blob)
        buf, off = _segment_buffer(data)
        if buf is not None and buf.client is self.client and off == 0 and data.flags.c_contiguous:
            _lib.call("iowarp_put_buffer", self._handle(), b, buf.handle, data.nbytes)
        else:
            p, n, keep = _bytes_of(data)
            if n <= self.client.piece:
                _lib.call("iowarp_put", self._handle(), b, p, n)
            else:
                _lib.call("iowarp_put", self._handle(), b, None, 0)
                self._partial_put_ptr(b, 0, p.value, n)
            del keep
        if isinstance(data, np.ndarray):
            self.set_tag(blob, DTYPE_TAG, data.dtype.str)
            self.set_tag(blob, SHAPE_TAG, json.dumps(list(data.shape)))

    def partial_put(self, blob, offset, data):
        """Writes data at offset of blob, growing (or creating) it."""
        b = encode(blob)
        buf, off = _segment_buffer(data)
        if buf is not None and buf.client is self.client and data.flags.c_contiguous:
            n, done = data.nbytes, 0
            while done < n:
                k = min(self.client.piece, n - done)
                _lib.call("iowarp_partial_put_buffer", self._handle(), b, int(offset) + done,
                          buf.handle, off + done, k)
                done += k
            return
        p, n, keep = _bytes_of(data)
        self._partial_put_ptr(b, int(offset), p.value if p is not None else None, n)
        del keep

    def _partial_put_ptr(self, b, offset, addr, n):
        done = 0
        while done < n or n == 0:
            k = min(self.client.piece, n - done)
            _lib.call("iowarp_partial_put", self._handle(), b, offset + done,
                      ctypes.c_void_p(addr + done if addr else None), k)
            done += k
            if n == 0:
                break

    # reads

    def get(self, blob, dtype=None, shape=None, out=None):
        """The blob as a numpy array: with the dtype and shape it was put
        with (tags), or those given, or uint8. Zero-copy (an array in the
        shared segment) unless out is given or the blob is larger than a
        quarter of the segment."""
        info = self.stat(blob)
        tags = info.get("tags") or {}
        if dtype is None and DTYPE_TAG in tags:
            dtype = np.dtype(tags[DTYPE_TAG])
            if shape is None and SHAPE_TAG in tags:
                shape = tuple(json.loads(tags[SHAPE_TAG]))
        dt = np.dtype(dtype or np.uint8)
        size = info["size"]
        if out is not None:
            self._read_into(blob, 0, _raw(out))
            return out
        if size > self.client.piece:
            raw = np.empty(size, np.uint8)
            return _shaped(raw[:self._read_into(blob, 0, raw)], dt, shape)
        b = encode(blob)
        while True:
            buf = self._segment_or_none(size)
            if buf is None:  # the segment is full of arrays still alive
                raw = np.empty(size, np.uint8)
                return _shaped(raw[:self._read_into(blob, 0, raw, _SMALL_PIECE)], dt, shape)
            got = ctypes.c_int64()
            try:
                _lib.call("iowarp_get_buffer", self._handle(), b, buf.handle, ctypes.byref(got))
            except Error as e:
                buf.free()
                if e.errno == errno.ENOBUFS and got.value > size:
                    size = got.value  # the blob grew since stat
                    continue
                raise
            return _shaped(buf.array(got.value), dt, shape)

    def partial_get(self, blob, offset, size=None, out=None):
        """Up to size bytes of blob from offset (fewer at its end) as a
        uint8 array in the shared segment (zero-copy), or read into out
        (any C-contiguous array; returns the bytes read)."""
        b = encode(blob)
        if out is not None:
            raw = _raw(out)
            return self._read_into(blob, int(offset), raw[:size] if size is not None else raw)
        if size is None:
            raise ValueError("partial_get needs size or out")
        size = int(size)
        if size > self.client.piece:
            raw = np.empty(size, np.uint8)
            n = self._read_into(blob, int(offset), raw)
            return raw[:n]
        buf = self._segment_or_none(size)
        if buf is None:
            raw = np.empty(size, np.uint8)
            return raw[:self._read_into(blob, int(offset), raw, _SMALL_PIECE)]
        got = ctypes.c_int64()
        try:
            _lib.call("iowarp_partial_get_buffer", self._handle(), b, int(offset), buf.handle,
                      0, size, ctypes.byref(got))
        except Error:
            buf.free()
            raise
        return buf.array(got.value)

    def _segment_or_none(self, size):
        """A segment buffer of size bytes, or None when the segment has no
        room (arrays from earlier gets still hold it): then the copying
        path is taken."""
        try:
            return _Buffer(self.client, max(size, 1))
        except Error as e:
            if e.errno == errno.ENOMEM:  # the segment, not the pool (ENOSPC)
                return None
            raise

    def _read_into(self, blob, offset, raw, piece=None):
        """Reads into a uint8 array in pieces (one copy here each)."""
        if not raw.flags.c_contiguous or not raw.flags.writeable:
            raise ValueError("out must be a writeable C-contiguous array")
        b = encode(blob)
        n, done = raw.nbytes, 0
        addr = raw.ctypes.data
        piece = piece or self.client.piece
        while done < n:
            k = min(piece, n - done)
            got = ctypes.c_int64()
            try:
                _lib.call("iowarp_partial_get", self._handle(), b, offset + done,
                          ctypes.c_void_p(addr + done), k, ctypes.byref(got))
            except Error as e:
                if e.errno == errno.ENOMEM:
                    raise Error(errno.ENOMEM, "%s: the client's shared segment is held by arrays from "
                                "earlier gets (free them, copy them, use out=, or connect with a "
                                "larger segment_size)" % e) from None
                raise
            done += got.value
            if got.value < k:
                break
        return done

    # metadata

    def delete(self, blob):
        """Removes a blob (and its tags)."""
        _lib.call("iowarp_delete", self._handle(), encode(blob))

    def set_tag(self, blob, key, value):
        _lib.call("iowarp_set_tag", self._handle(), encode(blob), encode(key), encode(value))

    def tags(self, blob):
        return self.stat(blob).get("tags") or {}

    def stat(self, blob):
        """A dict: name, size, tier, dirty, version, reads, last_used, tags."""
        return json.loads(_lib.call_string("iowarp_stat", self._handle(), encode(blob)))

    def list(self):
        """Descriptions (as stat) of every blob."""
        return json.loads(_lib.call_string("iowarp_list", self._handle()))

    def keys(self):
        return [i["name"] for i in self.list()]

    def __contains__(self, blob):
        try:
            self.stat(blob)
            return True
        except NotFound:
            return False


def _shaped(a, dt, shape):
    if dt != a.dtype:
        if a.nbytes % dt.itemsize:
            raise Error(errno.EINVAL, "blob of %d bytes is not a whole number of %s" % (a.nbytes, dt))
        a = a.view(dt)
    if shape is not None:
        a = a.reshape(shape)
    return a


def _raw(out):
    """The bytes of out, which reads write into (no copy of it)."""
    if not isinstance(out, np.ndarray) or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous numpy array")
    return out.reshape(-1).view(np.uint8)
