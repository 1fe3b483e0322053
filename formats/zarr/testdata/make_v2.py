# Writes Zarr v2 stores with zarr-python (every Blosc cname and shuffle
# mode, consolidated or not, and xarray's default to_zarr) under argv[1],
# and for each array ARRAY of store STORE the file STORE/../STORE.ARRAY.bin
# holding zarr-python's own read of it (C order, little-endian).
import os, sys
import numpy as np
import numcodecs
import zarr

out = sys.argv[1]
rng = np.random.default_rng(3)
temp = (15 + 8 * np.sin(np.arange(7 * 13 * 11) / 17)).reshape(7, 13, 11)
data = {
    "temp": (temp.astype("<f8"), (4, 7, 11), "C"),
    "counts": ((np.arange(9 * 31) % 250).astype("<i2").reshape(9, 31), (5, 16), "C"),
    "flags": (rng.integers(0, 3, 1001).astype("u1"), (400,), "C"),
    "big": (np.linspace(-1, 1, 77).astype(">f4"), (40,), "C"),
    "fort": (np.arange(6 * 10, dtype="<i8").reshape(6, 10) * 3, (4, 6), "F"),
}


def dump(store, root):
    def visit(name, node):
        if isinstance(node, zarr.Array):
            a = node[...]
            a = a.astype(a.dtype.newbyteorder("<"))
            with open(os.path.join(out, "%s.%s.bin" % (store, name.replace("/", "~"))), "wb") as f:
                f.write(np.ascontiguousarray(a).tobytes())
    root.visititems(visit)


cnames = [c for c in ["blosclz", "lz4", "lz4hc", "zlib", "zstd", "snappy"] if c in numcodecs.blosc.list_compressors()]
for cname in cnames:
    for shuffle in (0, 1, 2):
        name = "%s_%d" % (cname, shuffle)
        path = os.path.join(out, name)
        comp = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle)
        root = zarr.open_group(path, mode="w")
        root.attrs["title"] = name
        sub = root.create_group("sub")
        for i, (k, (a, chunks, order)) in enumerate(data.items()):
            g = sub if i % 2 else root
            z = g.create_dataset(k, shape=a.shape, chunks=chunks, dtype=a.dtype, compressor=comp, order=order, fill_value=0)
            z[...] = a
        # an array with chunks never written: zarr-python reads fill_value
        z = root.create_dataset("sparse", shape=(20,), chunks=(5,), dtype="<f4", compressor=comp, fill_value=-7.5)
        z[5:10] = np.arange(5)
        if shuffle == 1:
            zarr.consolidate_metadata(path)
        dump(name, zarr.open_group(path, mode="r"))

# xarray's default to_zarr: Blosc lz4 with shuffle, consolidated.
import xarray as xr
ds = xr.Dataset(
    {"t2m": (("time", "lat", "lon"), temp.astype("float32"), {"units": "K"})},
    coords={"time": np.arange(7), "lat": np.linspace(-60, 60, 13), "lon": np.linspace(0, 300, 11)},
)
ds.to_zarr(os.path.join(out, "xarray"), mode="w")
dump("xarray", zarr.open_group(os.path.join(out, "xarray"), mode="r"))
