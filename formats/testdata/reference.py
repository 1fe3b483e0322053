"""What the reference readers read of files that may be malformed.

reference.py JOBS.json: JOBS is a list of [format, path, out.json]; for
each, a forked child opens path with the reference library (h5py for
hdf5, netCDF4 for netcdf, zarr for zarr) and writes to out.json, for every
numeric variable it reads whole, {path: {"shape": [...], "hex": stored
values, little-endian, C order}}. A child that crashes or passes 10 s
(libhdf5 on a crafted file) is killed: the file reads as {} (nothing).
The libraries are imported once, before the forks.
"""
import json, os, signal, sys, time
import numpy as np, h5py, netCDF4, zarr


def put(out, path, a):
    a = np.asarray(a)
    if a.dtype.kind not in "biuf" or a.dtype.fields:
        return
    out[path] = {"shape": list(a.shape), "hex": a.astype(a.dtype.newbyteorder("<")).tobytes().hex()}


def read_hdf5(p, out):
    with h5py.File(p, "r") as f:
        def visit(name, o):
            if isinstance(o, h5py.Dataset):
                try:
                    put(out, "/" + name, o[()])
                except Exception:
                    pass
        f.visititems(visit)


def read_netcdf(p, out):
    with netCDF4.Dataset(p) as f:
        f.set_auto_maskandscale(False)
        f.set_always_mask(False)
        f.set_auto_chartostring(False)
        def walk(g, prefix):
            for n, v in g.variables.items():
                try:
                    put(out, prefix + "/" + n, np.asarray(v[...]))
                except Exception:
                    pass
            for n, c in g.groups.items():
                walk(c, prefix + "/" + n)
        walk(f, "")


def read_zarr(p, out):
    g = zarr.open(p, mode="r")
    if isinstance(g, zarr.Array):
        put(out, "/", g[...])
        return
    def walk(g, prefix):
        for n, a in g.arrays():
            try:
                put(out, prefix + "/" + n, a[...])
            except Exception:
                pass
        for n, c in g.groups():
            walk(c, prefix + "/" + n)
    walk(g, "")


READERS = {"hdf5": read_hdf5, "netcdf": read_netcdf, "zarr": read_zarr}

def child(fmt, path, dst):
    signal.alarm(10)
    out = {}
    try:
        READERS[fmt](path, out)
    except Exception:
        pass
    with open(dst + ".tmp", "w") as fh:
        json.dump(out, fh)
    os.rename(dst + ".tmp", dst)
    os._exit(0)


# Four children at a time: a hanging one costs its 10 s, not everyone's.
running = {}
jobs = json.load(open(sys.argv[1]))
while jobs or running:
    while jobs and len(running) < 4:
        fmt, path, dst = jobs.pop(0)
        pid = os.fork()
        if pid == 0:
            child(fmt, path, dst)
        running[pid] = dst
    pid, _ = os.wait()
    dst = running.pop(pid, None)
    if dst is not None and not os.path.exists(dst):
        with open(dst, "w") as fh:
            fh.write("{}")
