# Writes Zarr v2 stores with arrays iowarp cannot read beside arrays it
# can, under argv[1]:
#   partial/  arrays with numcodecs filters (Delta, FixedScaleOffset), a
#             unicode array, an array whose .zarray is not JSON, and
#             readable arrays (root and sub-group);
#   bare.zarr a bare-array store (the root is an array, no .zgroup).
# Each array zarr-python reads is dumped to argv[1]/STORE.PATH.bin (~ for
# /; C order, little-endian), as make_v2.py does.
import os, sys
import numpy as np
import numcodecs
import zarr

out = sys.argv[1]


def dump(store, name, a):
    a = a.astype(a.dtype.newbyteorder("<")) if a.dtype.kind in "iuf" else a
    with open(os.path.join(out, "%s.%s.bin" % (store, name.replace("/", "~"))), "wb") as f:
        f.write(np.ascontiguousarray(a).tobytes())


p = os.path.join(out, "partial")
g = zarr.open_group(p, mode="w")
g.attrs["title"] = "partial"
g.create_dataset("ok", data=np.arange(30, dtype="<f8").reshape(5, 6) / 4, chunks=(2, 4), compressor=numcodecs.Zlib(level=1))
g.create_dataset("delta", data=np.arange(50, dtype="<i4") * 7, chunks=(16,), filters=[numcodecs.Delta(dtype="<i4")])
g.create_dataset("fso", data=np.linspace(0, 1, 20), chunks=(8,), filters=[numcodecs.FixedScaleOffset(offset=0, scale=100, dtype="<f8", astype="<i2")])
g.create_dataset("text", data=np.array(["ab", "cde", "f"]), chunks=(2,))
s = g.create_group("sub")
s.create_dataset("ok2", data=(np.arange(12, dtype="<u2") * 5).reshape(3, 4), chunks=(2, 2), compressor=numcodecs.Blosc(cname="zstd", shuffle=2))
g.create_dataset("broken", data=np.arange(4, dtype="<i8"), chunks=(4,))
with open(os.path.join(p, "broken", ".zarray"), "w") as f:
    f.write('{"zarr_format": 2, "shape": [4], "chunks": ')  # cut short

r = zarr.open_group(p, mode="r")
for name in ["ok", "delta", "fso", "text", "sub/ok2"]:
    dump("partial", name, r[name][...])

b = zarr.open_array(os.path.join(out, "bare.zarr"), mode="w", shape=(7, 9), chunks=(3, 4), dtype="<i2", compressor=numcodecs.Blosc(cname="lz4", shuffle=1))
b[...] = (np.arange(63) - 20).reshape(7, 9)
b.attrs["units"] = "m"
dump("bare", "bare", zarr.open_array(os.path.join(out, "bare.zarr"), mode="r")[...])
