"""Write the malformed NetCDF corpus (committed; rerun to regenerate).

Classic (CDF-1), 64-bit offset (CDF-2) and CDF-5 files written by
netCDF4-python, then patched where their headers lie: a variable's begin
past the end, a dimension of 2^31-1, a record count of 2^31-2, a name
length of 2^31, an element count of 2^32-1, an unknown type, a header or
data cut short, 2^62 offsets and lengths (CDF-2, CDF-5). NetCDF-4 files
(HDF5 underneath) with a deflated chunk overwritten, its chunk index
pointing past the end, a variable's object header damaged, the file cut
short. Each file's damage and what libnetcdf makes of it: README.md.
Run: python3 make.py (in this directory)."""
import os, struct

import h5py
import netCDF4
import numpy as np


def classic(fmt):
    p = "/tmp/iowarp-nc-base"
    with netCDF4.Dataset(p, "w", format=fmt) as f:
        f.createDimension("time", None)
        f.createDimension("y", 5)
        f.createDimension("x", 7)
        f.createVariable("temp", "f4", ("y", "x"))[:] = np.arange(35, dtype="f4").reshape(5, 7) / 2
        f.createVariable("rec", "i4", ("time",))[:] = np.arange(6) * 3
    b = bytearray(open(p, "rb").read())
    os.remove(p)
    return b


def var_fields(b, name, ndims, wide):
    """Offsets of nc_type, vsize and begin of variable name (no attributes)."""
    n = name.encode()
    i = b.index(struct.pack(">I", len(n)) + n + b"\0" * (-len(n) % 4), 8)
    i += 4 + len(n) + (-len(n) % 4)
    i += 4 + 4 * ndims * (2 if wide else 1)  # dim ids (8 bytes each in CDF-5)
    i += 8 if not wide else 16  # ABSENT attribute list
    return i, i + 4, i + (8 if wide else 4)


def dim_len(b, name, wide):
    n = name.encode()
    i = b.index(struct.pack(">Q" if wide else ">I", len(n)) + n + b"\0" * (-len(n) % 4), 8)
    return i + (8 if wide else 4) + len(n) + (-len(n) % 4)


def put(b, off, fmt, v):
    b = bytearray(b)
    struct.pack_into(fmt, b, off, v)
    return bytes(b)


files = {}
c1 = classic("NETCDF3_CLASSIC")
t_type, t_vsize, t_begin = var_fields(c1, "temp", 2, False)
files["classic-begin-past-end.nc"] = put(c1, t_begin, ">I", 0x7FFFFF00)
files["classic-dim-huge.nc"] = put(c1, dim_len(c1, "x", False), ">I", 0x7FFFFFFF)
files["classic-numrecs-huge.nc"] = put(c1, 4, ">I", 0x7FFFFFFE)
files["classic-name-len-huge.nc"] = put(c1, c1.index(b"temp") - 4, ">I", 0x80000000)
files["classic-nelems-ones.nc"] = put(c1, 12, ">I", 0xFFFFFFFF)  # the dimension count
files["classic-bad-type.nc"] = put(c1, t_type, ">I", 99)
files["classic-truncated-header.nc"] = bytes(c1[: t_type])
files["classic-truncated-data.nc"] = bytes(c1[: len(c1) - 50])

c2 = classic("NETCDF3_64BIT_OFFSET")
files["cdf2-begin-2e62.nc"] = put(c2, var_fields(c2, "temp", 2, False)[2], ">Q", 1 << 62)

c5 = classic("NETCDF3_64BIT_DATA")
files["cdf5-dim-2e62.nc"] = put(c5, dim_len(c5, "x", True), ">Q", 1 << 62)

# NetCDF-4.
p = "/tmp/iowarp-nc4-base"
with netCDF4.Dataset(p, "w", format="NETCDF4") as f:
    f.createDimension("x", 400)
    g = f.createGroup("grp")
    f.createVariable("temp", "f4", ("x",), zlib=True, chunksizes=(100,))[:] = np.sin(np.arange(400) / 9).astype("f4")
    g.createVariable("count", "i2", ("x",))[:] = np.arange(400) % 300
with h5py.File(p, "r") as h:
    ci = h["temp"].id.get_chunk_info(1)
    hdr = h5py.h5o.get_info(h["grp/count"].id).addr
n4 = bytearray(open(p, "rb").read())
os.remove(p)
b = bytearray(n4)
b[ci.byte_offset:ci.byte_offset + ci.size] = bytes((i * 97 + 13) & 0xFF for i in range(ci.size))
files["nc4-chunk-garbage.nc"] = bytes(b)
b = bytearray(n4)
at = b.index(struct.pack("<Q", ci.byte_offset))
b[at:at + 8] = b"\xff" * 7 + b"\x7f"
files["nc4-chunk-past-end.nc"] = bytes(b)
b = bytearray(n4)
b[hdr + 16:hdr + 80] = bytes((i * 31 + 7) & 0xFF for i in range(64))
files["nc4-object-header.nc"] = bytes(b)
files["nc4-truncated.nc"] = bytes(n4[: len(n4) * 3 // 5])

for name, data in sorted(files.items()):
    with open(name, "wb") as fh:
        fh.write(data)
