# Writes a Zarr v3 store by hand, from the v3 specification (zarr-python
# 2.13 cannot write v3): zarr.json groups and arrays; codecs bytes
# (little and big endian), transpose, blosc, zstd, gzip, crc32c and
# sharding_indexed (index at the end with crc32c, or at the start); chunk
# keys default ("c/0/1", and "c.0") and v2 ("0.1"); chunks and shards
# never written; a rank-0 array. Each array's expected values (numpy,
# fill where nothing was written) go to argv[1]/v3.PATH.bin (~ for /).
import itertools, json, os, struct, sys
import numpy as np
import numcodecs

out = sys.argv[1]
root = os.path.join(out, "v3")

_T = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _T[(c ^ x) & 0xFF] ^ (c >> 8)
    return struct.pack("<I", c ^ 0xFFFFFFFF)


def write(path, b):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b)


def node(path, doc):
    write(os.path.join(root, path, "zarr.json"), json.dumps(doc, indent=2).encode())


def ref(path, a):
    write(os.path.join(out, "v3." + path.replace("/", "~") + ".bin"), np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tobytes())


def blocks(shape, chunks):
    return itertools.product(*[range(-(-s // c)) for s, c in zip(shape, chunks)])


def piece(a, idx, chunks, fill):
    """Chunk idx of a, padded with fill to the full chunk shape, and
    whether any of it lies inside a."""
    buf = np.full(chunks, fill, dtype=a.dtype)
    src = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, a.shape))
    if any(s.start >= s.stop for s in src):
        return buf, False
    dst = tuple(slice(0, s.stop - s.start) for s in src)
    buf[dst] = a[src]
    return buf, True


def array_doc(a, chunks, codecs, fill, key=None, dims=None, dtype=None):
    d = {
        "zarr_format": 3, "node_type": "array", "shape": list(a.shape),
        "data_type": dtype or a.dtype.name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
        "chunk_key_encoding": key or {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill, "codecs": codecs, "attributes": {"units": "m"},
    }
    if dims:
        d["dimension_names"] = dims
    return d


def key_default(idx, sep="/"):
    return sep.join(["c"] + [str(i) for i in idx])


node("", {"zarr_format": 3, "node_type": "group", "attributes": {"title": "v3 by hand", "n": 3}})

# plain: float64, bytes + blosc zstd shuffle, one chunk never written (NaN).
a = (np.arange(7 * 13) / 4.0).reshape(7, 13)
node("plain", array_doc(a, (3, 5), [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5, "shuffle": "shuffle", "typesize": 8, "blocksize": 0}},
], "NaN", dims=["y", "x"]))
blosc = numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
for idx in blocks(a.shape, (3, 5)):
    if idx == (1, 1):
        a[3:6, 5:10] = np.nan
        continue
    buf, _ = piece(a, idx, (3, 5), np.nan)
    write(os.path.join(root, "plain", key_default(idx)), blosc.encode(buf.astype("<f8")))
ref("plain", a)

# tr: int32, transpose [1, 0], big-endian bytes, gzip, crc32c, v2 keys.
b = (np.arange(6 * 10, dtype="i4").reshape(6, 10) - 20) * 1001
node("tr", array_doc(b, (4, 3), [
    {"name": "transpose", "configuration": {"order": [1, 0]}},
    {"name": "bytes", "configuration": {"endian": "big"}},
    {"name": "gzip", "configuration": {"level": 5}},
    {"name": "crc32c"},
], 0, key={"name": "v2", "configuration": {"separator": "."}}))
gz = numcodecs.GZip(level=5)
for idx in blocks(b.shape, (4, 3)):
    buf, _ = piece(b, idx, (4, 3), 0)
    raw = gz.encode(np.transpose(buf, (1, 0)).astype(">i4").tobytes())
    write(os.path.join(root, "tr", ".".join(map(str, idx))), raw + crc32c(raw))
ref("tr", b)

node("grp", {"zarr_format": 3, "node_type": "group", "attributes": {}})


def shards(path, a, shard, inner, inner_codecs, enc, index_codecs, at_end, fill, keyf, skip_shard):
    node(path, array_doc(a, shard, [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(inner), "codecs": inner_codecs,
        "index_codecs": index_codecs, "index_location": "end" if at_end else "start"}}], fill,
        key={"name": "default", "configuration": {"separator": keyf}}))
    per = [s // i for s, i in zip(shard, inner)]
    n = int(np.prod(per))
    crc = any(c["name"] == "crc32c" for c in index_codecs)
    index_size = 16 * n + (4 if crc else 0)
    expect = np.array(a)
    for sidx in blocks(a.shape, shard):
        if sidx == skip_shard:
            region = tuple(slice(i * s, (i + 1) * s) for i, s in zip(sidx, shard))
            expect[region] = fill
            continue
        body, entries = b"", []
        for lidx in itertools.product(*[range(p) for p in per]):
            gidx = tuple(s * p + l for s, p, l in zip(sidx, per, lidx))
            buf, inside = piece(a, gidx, inner, fill)
            if not inside or np.all(buf == fill):
                entries.append((2**64 - 1, 2**64 - 1))
                continue
            enc_b = enc(buf)
            off = len(body) + (0 if at_end else index_size)
            entries.append((off, len(enc_b)))
            body += enc_b
        index = np.array(entries, dtype="<u8").tobytes()
        if crc:
            index += crc32c(index)
        data = body + index if at_end else index + body
        write(os.path.join(root, path, key_default(sidx, keyf)), data)
    ref(path, expect)


# grp/sharded: uint16 shards (4, 6) of inner chunks (2, 3): zstd inner
# chunks, index at the end with crc32c, inner chunks of only fill value
# left out, shard (1, 1) never written.
c = ((np.arange(10 * 14).reshape(10, 14) * 7) % 1000).astype("<u2")
c[0:2, 0:3] = 9
zstd = numcodecs.Zstd(level=3)
shards("grp/sharded", c, (4, 6), (2, 3),
       [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
       lambda buf: zstd.encode(buf.astype("<u2").tobytes()),
       [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}], True, 9, "/", (1, 1))

# grp/start: float32, index at the start, inner chunks blosc lz4
# bitshuffle, "." separator.
d = np.sin(np.arange(50) / 3).astype("<f4")
bl = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE)
shards("grp/start", d, (20,), (5,),
       [{"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}}],
       lambda buf: bl.encode(buf.astype("<f4")),
       [{"name": "bytes", "configuration": {"endian": "little"}}], False, 0.0, ".", None)

# scalar: rank 0, key "c".
e = np.array(3.25)
node("scalar", array_doc(e, (), [{"name": "bytes", "configuration": {"endian": "little"}}], 0.0))
write(os.path.join(root, "scalar", "c"), e.astype("<f8").tobytes())
ref("scalar", e)
