"""Write the malformed Zarr corpus (committed; rerun to regenerate).

Each store NAME.zarr holds a good array "good" beside what is damaged
(so one damaged array must not fail the others): a Blosc chunk whose
header claims 2 GiB, a zlib chunk cut short, a shape of -5, a chunk of
2^40 elements, a shape of 2^62, a chunk key that is a directory, a
dimension_separator leading out of the array, a .zmetadata whose dtype
and shape lie about the chunks, a dtype that is no NumPy type, groups
nested 80 deep, a .zarray that is not JSON; Zarr v3: a shard index
pointing past the shard, an unknown codec, a bare array whose chunk is
cut short. zarr-python 2.13 writes the v2 stores, the v3 ones are
written from the specification. Run: python3 make.py (in this
directory)."""
import json, os, shutil, struct

import numcodecs
import numpy as np
import zarr

here = os.path.dirname(os.path.abspath(__file__))


def store(name, build):
    p = os.path.join(here, name + ".zarr")
    shutil.rmtree(p, ignore_errors=True)
    g = zarr.open_group(p, mode="w")
    g.create_dataset("good", data=np.arange(24, dtype="<i4").reshape(4, 6), chunks=(2, 3), compressor=numcodecs.Zlib(level=1))
    build(p, g)


def meta(p, rel, change):
    f = os.path.join(p, rel)
    m = json.load(open(f))
    change(m)
    json.dump(m, open(f, "w"), indent=1, sort_keys=True)


def write(p, rel, b):
    f = os.path.join(p, rel)
    os.makedirs(os.path.dirname(f), exist_ok=True)
    with open(f, "wb") as fh:
        fh.write(b)


def blosc_lies(p, g):
    g.create_dataset("bad", data=np.arange(100, dtype="<f8"), chunks=(50,), compressor=numcodecs.Blosc(cname="lz4", shuffle=1))
    c = bytearray(open(os.path.join(p, "bad", "0"), "rb").read())
    struct.pack_into("<I", c, 4, 0x7FFFFFF0)  # nbytes: the decompressed size
    write(p, "bad/0", bytes(c))


def zlib_cut(p, g):
    g.create_dataset("bad", data=np.arange(1000, dtype="<i8"), chunks=(500,), compressor=numcodecs.Zlib(level=1))
    c = open(os.path.join(p, "bad", "1"), "rb").read()
    write(p, "bad/1", c[: len(c) // 2])


def shape_negative(p, g):
    g.create_dataset("bad", data=np.arange(5, dtype="<u2"), chunks=(5,))
    meta(p, "bad/.zarray", lambda m: m.update(shape=[-5]))


def chunk_bomb(p, g):
    g.create_dataset("bad", shape=(10,), chunks=(10,), dtype="<f8", compressor=numcodecs.Zlib(level=1))
    meta(p, "bad/.zarray", lambda m: m.update(shape=[1 << 40], chunks=[1 << 40]))
    write(p, "bad/0", numcodecs.Zlib(level=9).encode(b"\0" * (1 << 20)))


def shape_huge(p, g):
    g.create_dataset("bad", shape=(10,), chunks=(10,), dtype="<f8", compressor=None)
    meta(p, "bad/.zarray", lambda m: m.update(shape=[1 << 62], chunks=[1]))


def chunk_is_dir(p, g):
    g.create_dataset("bad", data=np.arange(8, dtype="<i4"), chunks=(4,), compressor=None)
    os.remove(os.path.join(p, "bad", "0"))
    write(p, "bad/0/x", b"not a chunk")


def separator_escape(p, g):
    g.create_dataset("bad", data=np.arange(16, dtype="u1").reshape(4, 4), chunks=(2, 2), compressor=None)
    meta(p, "bad/.zarray", lambda m: m.update(dimension_separator="/../"))


def zmetadata_lies(p, g):
    g.create_dataset("bad", data=np.arange(30, dtype="<i2"), chunks=(10,), compressor=None)
    zarr.consolidate_metadata(p)
    meta(p, ".zmetadata", lambda m: m["metadata"]["bad/.zarray"].update(dtype="<f8", shape=[300]))


def dtype_bogus(p, g):
    g.create_dataset("bad", data=np.arange(4, dtype="<f4"), chunks=(4,), compressor=None)
    meta(p, "bad/.zarray", lambda m: m.update(dtype="<f3"))


def nested_deep(p, g):
    rel = ""
    for i in range(80):
        rel = os.path.join(rel, "g%d" % i)
        write(p, os.path.join(rel, ".zgroup"), b'{"zarr_format": 2}')


def zarray_not_json(p, g):
    g.create_dataset("bad", data=np.arange(4, dtype="<f4"), chunks=(4,), compressor=None)
    write(p, "bad/.zarray", b'{"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f')


def v3_array(shape, chunks, dtype, codecs, fill=0):
    return json.dumps({"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
                       "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                       "chunk_key_encoding": {"name": "default"}, "fill_value": fill, "codecs": codecs}).encode()


def v3(name, arrays):
    p = os.path.join(here, name + ".zarr")
    shutil.rmtree(p, ignore_errors=True)
    write(p, "zarr.json", b'{"zarr_format": 3, "node_type": "group"}')
    write(p, "good/zarr.json", v3_array([6], [3], "int16", [{"name": "bytes", "configuration": {"endian": "little"}}]))
    write(p, "good/c/0", np.arange(3, dtype="<i2").tobytes())
    write(p, "good/c/1", np.arange(3, 6, dtype="<i2").tobytes())
    for rel, b in arrays.items():
        write(p, rel, b)


store("blosc-header-lies", blosc_lies)
store("zlib-truncated", zlib_cut)
store("shape-negative", shape_negative)
store("chunk-bomb", chunk_bomb)
store("shape-2e62", shape_huge)
store("chunk-is-dir", chunk_is_dir)
store("separator-escape", separator_escape)
store("zmetadata-lies", zmetadata_lies)
store("dtype-bogus", dtype_bogus)
store("nested-80", nested_deep)
store("zarray-not-json", zarray_not_json)

# v3: a 2x2-chunk shard of int32 (4, 4) whose index (at the end, no
# crc32c) points past the shard.
shard = {"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2], "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                                                       "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], "index_location": "end"}}
inner = np.arange(4, dtype="<i4").tobytes()
index = b"".join(struct.pack("<QQ", (1 << 40) + i, 16) for i in range(4))
v3("v3-shard-index-past-end", {"bad/zarr.json": v3_array([4, 4], [4, 4], "int32", [shard]), "bad/c/0/0": inner * 4 + index})
v3("v3-unknown-codec", {"bad/zarr.json": v3_array([4], [4], "float32", [{"name": "bytes"}, {"name": "fancy-codec"}]),
                        "bad/c/0": b"\0" * 16})
p = os.path.join(here, "v3-bare-cut.zarr")
shutil.rmtree(p, ignore_errors=True)
write(p, "zarr.json", v3_array([8], [8], "float64", [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "gzip", "configuration": {"level": 1}}]))
write(p, "c/0", numcodecs.GZip(level=1).encode(np.arange(8, dtype="<f8").tobytes())[:20])
