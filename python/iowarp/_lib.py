"""Loading libiowarp_py.so (adapters/capi) and calling it through ctypes.

The library is looked up in this order: $IOWARP_LIB; next to this
package (a wheel may carry it); PREFIX/lib/iowarp/ of the PREFIX `make
install` put this package in; <prefix>/lib/iowarp/ for sys.prefix,
/usr/local and /usr; bin/ of a source tree this package sits in
(python/iowarp -> ../../bin).
"""

import ctypes
import errno
import os
import sys
import threading

LIBNAME = "libiowarp_py.so"

_lib = None
_lib_lock = threading.Lock()


class Error(OSError):
    """An error from the daemon or the client library (an OSError with
    errno set: ENOENT for a missing blob, ENOSPC, EINVAL, EPIPE when the
    daemon is gone, ...)."""


class NotFound(Error, KeyError):
    """A blob or bucket that does not exist (also a KeyError)."""

    def __str__(self):
        return OSError.__str__(self)


def candidates():
    env = os.environ.get("IOWARP_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, LIBNAME)]
    # make install: PREFIX/lib/pythonX.Y/dist-packages/iowarp -> PREFIX/lib/iowarp
    out.append(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))), "iowarp", LIBNAME))
    for prefix in dict.fromkeys([sys.prefix, "/usr/local", "/usr"]):
        out.append(os.path.join(prefix, "lib", "iowarp", LIBNAME))
    out.append(os.path.join(os.path.dirname(os.path.dirname(here)), "bin", LIBNAME))
    return out


def _preloaded_shim():
    # Two Go runtimes in one process are not supported: a process running
    # under `iowarp run` (LD_PRELOAD=libiowarp.so) must not load ours too.
    try:
        ctypes.CDLL(None).iowarpGoInit
        return True
    except AttributeError:
        return False


def lib():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        if _preloaded_shim():
            raise Error(errno.ENOTSUP,
                        "libiowarp.so (the LD_PRELOAD shim) is loaded in this process; the client "
                        "library holds a second Go runtime and cannot be loaded with it: run Python "
                        "without `iowarp run` to use iowarp.Bucket (iowarp.omni needs no library)")
        tried = []
        for path in candidates():
            if os.path.exists(path):
                _lib = _declare(ctypes.CDLL(path))
                return _lib
            tried.append(path)
        raise Error(errno.ENOENT, "%s not found (tried %s); build it with `make build` or set "
                    "IOWARP_LIB" % (LIBNAME, ", ".join(tried)))


U64 = ctypes.c_uint64
I64 = ctypes.c_int64
P = ctypes.c_void_p
S = ctypes.c_char_p
E = ctypes.POINTER(ctypes.c_void_p)  # char **err (read as a void* to free it)


def _declare(l):
    sig = {
        "iowarp_connect": [S, S, I64, ctypes.POINTER(U64), E],
        "iowarp_close": [U64, E],
        "iowarp_buckets": [U64, E, E],
        "iowarp_delete_bucket": [U64, S, E],
        "iowarp_bucket": [U64, S, ctypes.POINTER(U64), E],
        "iowarp_bucket_close": [U64, E],
        "iowarp_alloc": [U64, I64, ctypes.POINTER(U64), ctypes.POINTER(P), E],
        "iowarp_buffer_free": [U64, E],
        "iowarp_put": [U64, S, P, ctypes.c_size_t, E],
        "iowarp_partial_put": [U64, S, I64, P, ctypes.c_size_t, E],
        "iowarp_partial_get": [U64, S, I64, P, ctypes.c_size_t, ctypes.POINTER(I64), E],
        "iowarp_put_buffer": [U64, S, U64, I64, E],
        "iowarp_get_buffer": [U64, S, U64, ctypes.POINTER(I64), E],
        "iowarp_partial_get_buffer": [U64, S, I64, U64, I64, I64, ctypes.POINTER(I64), E],
        "iowarp_partial_put_buffer": [U64, S, I64, U64, I64, I64, E],
        "iowarp_delete": [U64, S, E],
        "iowarp_set_tag": [U64, S, S, S, E],
        "iowarp_stat": [U64, S, E, E],
        "iowarp_list": [U64, E, E],
    }
    for name, args in sig.items():
        f = getattr(l, name)
        f.argtypes = args
        f.restype = ctypes.c_int
    l.iowarp_free.argtypes = [P]
    l.iowarp_free.restype = None
    return l


def take_string(l, p):
    """The Python str of a char* the library returned; frees it."""
    if not p:
        return ""
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        l.iowarp_free(p)


def call(name, *args):
    """Calls a library function that takes char **err last; raises Error
    (NotFound for ENOENT) on failure."""
    l = lib()
    err = ctypes.c_void_p()
    rc = getattr(l, name)(*args, ctypes.byref(err))
    if rc != 0:
        msg = take_string(l, err.value) or os.strerror(-rc)
        code = -rc
        if code == errno.ENOENT:
            raise NotFound(code, msg)
        raise Error(code, msg)
    return rc


def call_string(name, *args):
    """call for functions whose output is a char ** before err."""
    out = ctypes.c_void_p()
    call(name, *args, ctypes.byref(out))
    return take_string(lib(), out.value)


def encode(s):
    if isinstance(s, bytes):
        return s
    return str(s).encode("utf-8")
