"""OMNI datasets (HDF5, NetCDF, Zarr, CSV, Parquet and every format a
driver of the daemon reads) as variables, dimensions and attributes, read
lazily through the mount's ``.omni`` tree.

    ds = iowarp.omni.open("/iowarp/run/out.nc")   # or "/iowarp/.omni/NAME"
    v = ds["temperature"]                          # or ds["/group/var"]
    v.shape, v.dtype, v.dims, v.attrs
    block = v[0, 10:20, ::2]                       # reads only that hyperslab

Why the ``.omni`` tree and not an engine in this process: the view engine
lives in the daemon, next to the pool that caches the blocks it reads (a
second reader, Python or ``cat``, gets them from memory), and runs the
format libraries in confined helper processes as the calling user (the
kernel checks this process's permissions on every path). Reading through
the mount keeps all of that, needs no client library at all, and keeps
libhdf5/libnetcdf out of the Python process, where h5py or netCDF4 may have
loaded another build of them.

Copies: a selection is read with one ``readinto`` of
``<var>[start:stop:step,...]/data`` into a new numpy array: the daemon
reads the hyperslab from the file (or its pool cache) and the kernel copies
it into the array, one copy. Negative steps read the forward range and
reverse it in numpy (a view); integer indices drop their axis (a view).
Values: indexing a Variable gives the stored values, as h5py does and as
netCDF4 does with ``set_auto_maskandscale(False)`` (the view's ``data.raw``
where it has one, else ``data``, which then holds them unchanged);
``read(key, raw=False)`` gives them CF-decoded as xarray decodes by default
(the view's ``data``: fill values NaN, scale_factor/add_offset applied, CF
time as datetime64[ns]), with the dtype the view's ``dtype`` file names.
"""

import builtins
import errno
import json
import os
import threading

import numpy as np

_DTYPES = {
    "int8": "i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float32": "<f4", "float64": "<f8", "bool": "?",
}


def numpy_dtype(t):
    """The numpy dtype of an OMNI dtype name (string: object)."""
    if t in _DTYPES:
        return np.dtype(_DTYPES[t])
    if t == "string":
        return np.dtype(object)
    if t.startswith("S") and t[1:].isdigit():
        return np.dtype("S" + t[1:])
    if t == "datetime64[ns]":
        return np.dtype("<M8[ns]")
    raise ValueError("unknown OMNI dtype %r" % t)


def _attr_value(a):
    t, v = a.get("type", ""), a.get("value")
    if a.get("omitted"):
        return None
    if t == "string" or (t.startswith("S") and t[1:].isdigit()):
        if isinstance(v, list):
            return v[0] if len(v) == 1 else list(v)
        return v
    try:
        dt = numpy_dtype(t)
    except ValueError:
        return v
    arr = np.asarray(v if isinstance(v, list) else [v], dtype=dt)
    return arr[0] if arr.size == 1 else arr


def _attrs(lst):
    out = {}
    for a in lst or []:
        out[a["name"]] = _attr_value(a)
    return out


def find_view_root(path, mount=None):
    """The ``.omni`` directory of path: path itself if it is inside a
    ``.omni`` tree, ``MOUNT/.omni/<relative path>`` for a file under an
    iowarp mount, or ``MOUNT/.omni/<path>`` for the name of an assimilated
    dataset (MOUNT: mount, or $IOWARP_MOUNT, or /iowarp)."""
    p = os.path.abspath(os.fspath(path))
    parts = p.split(os.sep)
    if ".omni" in parts:
        return p
    # A file under a mount: the nearest parent with a .omni entry (hidden
    # from readdir, reachable by path; no other file system has it).
    d = os.path.dirname(p)
    while True:
        cand = os.path.join(d, ".omni")
        if os.path.isdir(cand) and os.path.ismount(d):
            return os.path.join(cand, os.path.relpath(p, d))
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    name = os.fspath(path)
    if not os.path.isabs(name):
        for m in [mount, os.environ.get("IOWARP_MOUNT"), "/iowarp"]:
            if m and os.path.isdir(os.path.join(m, ".omni", name)):
                return os.path.join(m, ".omni", name)
    raise FileNotFoundError(errno.ENOENT, "not under an iowarp mount, nor an assimilated dataset "
                            "(put the file under the mount, or `iowarp assimilate` it)", name)


class Dataset:
    """An OMNI dataset: its root group, plus lookups by path."""

    def __init__(self, root_dir):
        self.view_root = root_dir
        try:
            with builtins.open(os.path.join(root_dir, "schema.json"), "rb") as f:
                self.schema = json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no OMNI view (not a dataset the drivers read?)",
                                    root_dir) from None
        self.path = self.schema.get("path", "")
        self.format = self.schema.get("format", "")
        self.root = Group(self, self.schema["root"])
        self._lock = threading.Lock()

    def __repr__(self):
        return "<iowarp.omni.Dataset %s (%s): %s>" % (self.path, self.format, ", ".join(self.root.variables))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Nothing is held open between reads; for symmetry with h5py."""

    @property
    def variables(self):
        return self.root.variables

    @property
    def groups(self):
        return self.root.groups

    @property
    def dims(self):
        return self.root.dims

    @property
    def attrs(self):
        return self.root.attrs

    def group(self, path):
        """The group at path ("/a/b" or "a/b"; "" or "/" is the root)."""
        g = self.root
        for part in [p for p in path.split("/") if p]:
            if part not in g.groups:
                raise KeyError("no group %r in %s" % (path, self.path))
            g = g.groups[part]
        return g

    def __getitem__(self, key):
        if "/" in key.strip("/"):
            gpath, name = key.strip("/").rsplit("/", 1)
            return self.group(gpath)[name]
        return self.root[key.strip("/")]

    def __contains__(self, key):
        try:
            self[key]
            return True
        except KeyError:
            return False

    def walk(self):
        """Every variable of every group, depth first."""
        stack = [self.root]
        while stack:
            g = stack.pop()
            yield from g.variables.values()
            stack.extend(reversed(list(g.groups.values())))

    def has_raw(self, v):
        """Whether v's view has data.raw: the views list it only for a
        variable whose CF decoding changes its values."""
        with self._lock:
            if v._raw is None:
                v._raw = os.path.exists(os.path.join(v.view_dir(), "data.raw"))
            return v._raw

    def decoded_dtype(self, v):
        """The dtype of v's decoded values (its view's dtype file)."""
        with self._lock:
            if v._decoded is None:
                with builtins.open(os.path.join(v.view_dir(), "dtype")) as f:
                    v._decoded = numpy_dtype(f.read().strip())
            return v._decoded


class Group:
    """A group: variables, subgroups, dimensions (name -> size), attrs."""

    def __init__(self, ds, g):
        self.dataset = ds
        self.name = g.get("name", "")
        self.path = g.get("path", "/")
        self.attrs = _attrs(g.get("attrs"))
        self.dims = {d["name"]: d["size"] for d in g.get("dims") or []}
        self.coords = {d["name"]: d["coord"] for d in g.get("dims") or [] if d.get("coord")}
        self.unlimited = {d["name"] for d in g.get("dims") or [] if d.get("unlimited")}
        self.variables = {v["name"]: Variable(ds, self, v) for v in g.get("variables") or []}
        self.groups = {c["name"]: Group(ds, c) for c in g.get("groups") or []}

    def __repr__(self):
        return "<iowarp.omni.Group %s>" % self.path

    def __getitem__(self, name):
        if name in self.variables:
            return self.variables[name]
        if name in self.groups:
            return self.groups[name]
        raise KeyError("no variable %r in group %s" % (name, self.path))


class Variable:
    """An N-D array, read lazily: indexing reads only the selection."""

    def __init__(self, ds, group, v):
        self.dataset = ds
        self.group = group
        self.name = v["name"]
        self.path = v["path"]
        self.omni_dtype = v["dtype"]
        self.dtype = numpy_dtype(v["dtype"])
        self.shape = tuple(v.get("shape") or ())
        self.dims = tuple(v.get("dims") or ())
        self.chunks = tuple(v.get("chunks") or ()) or None
        self.filters = list(v.get("filters") or [])
        self.attrs = _attrs(v.get("attrs"))
        self._raw = None      # whether the view has data.raw (Dataset.has_raw)
        self._decoded = None  # the decoded dtype (Dataset.decoded_dtype)

    def __repr__(self):
        return "<iowarp.omni.Variable %s %s %s %s>" % (self.path, self.dtype, self.dims, self.shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a scalar variable")
        return self.shape[0]

    def view_dir(self, sel=""):
        """The view directory of this variable (or of a selection)."""
        return os.path.join(self.dataset.view_root, self.path.lstrip("/") + sel)

    def __getitem__(self, key):
        return self.read(key)

    def __array__(self, dtype=None):
        a = self.read()
        return a.astype(dtype) if dtype is not None else a

    def read(self, key=(), raw=True):
        """The selection key (ints, slices, Ellipsis, as numpy's basic
        indexing) as a numpy array: the stored values, or with raw=False
        the values CF-decoded as xarray decodes them by default."""
        axes, drop, flip = _normalize(key, self.shape)
        out_shape = tuple(len(range(*a)) for a in axes)
        if any(n == 0 for n in out_shape):
            a = np.empty(out_shape, self._dtype(raw))
        else:
            a = self._read(axes, out_shape, raw)
        if flip:
            a = a[tuple(slice(None, None, -1) if f else slice(None) for f in flip)]
        if drop:
            a = a[tuple(0 if d else slice(None) for d in drop)]
        return a

    def _dtype(self, raw):
        if raw or self.omni_dtype == "string":
            return self.dtype
        return self.dataset.decoded_dtype(self)

    def _read(self, axes, out_shape, raw):
        whole = all(a == (0, n, 1) for a, n in zip(axes, self.shape))
        sel = "" if whole else "[" + ",".join("%d:%d:%d" % a for a in axes) + "]"
        name = "data.raw" if raw and self.dataset.has_raw(self) else "data"
        dtype = self._dtype(raw)
        path = os.path.join(self.view_dir(sel), name)
        if self.omni_dtype == "string":
            # Variable-length strings: the view holds the selection as
            # fixed-width strings of the width its dtype file names.
            with builtins.open(os.path.join(self.view_dir(sel), "dtype")) as f:
                width = f.read().strip()
            with builtins.open(path, "rb") as f:
                return _fixed_strings(f.read(), width, out_shape)
        a = np.empty(out_shape, dtype)
        mv = memoryview(a.reshape(-1).view(np.uint8)) if a.nbytes else memoryview(b"")
        with builtins.open(path, "rb", buffering=0) as f:
            done = 0
            while done < a.nbytes:
                n = f.readinto(mv[done:])
                if not n:
                    raise OSError(errno.EIO, "short read of %s: %d of %d bytes" % (path, done, a.nbytes))
                done += n
        return a


def _normalize(key, shape):
    """Basic indexing -> per axis (start, stop, step>0), axes to drop (an
    integer index) and axes to reverse (a negative step)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1:]
    if len(key) > len(shape):
        raise IndexError("too many indices: %d for %d dimensions" % (len(key), len(shape)))
    key = key + (slice(None),) * (len(shape) - len(key))
    axes, drop, flip = [], [], []
    for k, n in zip(key, shape):
        if isinstance(k, (int, np.integer)):
            i = int(k)
            if i < -n or i >= n:
                raise IndexError("index %d out of range for an axis of %d" % (i, n))
            i %= n
            axes.append((i, i + 1, 1))
            drop.append(True)
            flip.append(False)
        elif isinstance(k, slice):
            start, stop, step = k.indices(n)
            r = range(start, stop, step)
            if step < 0:
                if len(r):
                    axes.append((r[-1], r[0] + 1, -step))
                else:
                    axes.append((0, 0, 1))
                flip.append(True)
            else:
                axes.append((start, max(stop, start), step) if len(r) else (0, 0, 1))
                flip.append(False)
            drop.append(False)
        else:
            raise TypeError("only integers, slices and Ellipsis index a variable, not %r" % (k,))
    return axes, (drop if any(drop) else None), (flip if any(flip) else None)


def _fixed_strings(b, width, shape):
    """Fixed-width strings (NUL-padded UTF-8) as an object array of str."""
    if not (width.startswith("S") and width[1:].isdigit()) or int(width[1:]) <= 0:
        raise OSError(errno.EIO, "string view of dtype %r" % width)
    n = int(width[1:])
    count = int(np.prod(shape, dtype=np.int64))
    if len(b) != n * count:
        raise OSError(errno.EIO, "string data: %d bytes for %d strings of %d" % (len(b), count, n))
    raw = np.frombuffer(b, dtype="S%d" % n)
    a = np.empty(count, dtype=object)
    a[:] = [x.decode("utf-8", "replace") for x in raw]
    return a.reshape(shape)


def open(path, mount=None):  # noqa: A001 (the module's verb, as h5py.File)
    """Opens the dataset at path (see find_view_root)."""
    return Dataset(find_view_root(path, mount))
