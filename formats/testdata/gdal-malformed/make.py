"""Write the malformed corpus of formats/gdal (committed; rerun to
regenerate) from small files GDAL writes: a TIFF whose IFD, strip
offsets or sizes lie, a truncated PNG, an ENVI header describing more
than its data file, a damaged HFA and a truncated HDF4 file. Each must
fail in iowarp with a clear error (EIO on a view)."""
import os
import struct
import tempfile

import numpy as np
from osgeo import gdal

gdal.UseExceptions()
tmp = tempfile.mkdtemp()


def made(fmt, name, **kw):
    p = os.path.join(tmp, name)
    ds = gdal.GetDriverByName("MEM").Create("", 64, 48, 1, gdal.GDT_Byte)
    ds.GetRasterBand(1).WriteArray(np.arange(64 * 48, dtype=np.uint8).reshape(48, 64))
    gdal.GetDriverByName(fmt).CreateCopy(p, ds, options=kw.get("options", []))
    return open(p, "rb").read()


tif = bytearray(made("GTiff", "a.tif"))
ifd = struct.unpack("<I", tif[4:8])[0]
files = {}
b = bytearray(tif)
b[4:8] = struct.pack("<I", len(tif) + 4096)
files["tiff-ifd-past-end.tif"] = bytes(b)
# the strip offsets and byte counts entries: move the strips past the end
n = struct.unpack("<H", tif[ifd:ifd + 2])[0]
b = bytearray(tif)
for i in range(n):
    e = ifd + 2 + 12 * i
    tag, typ, cnt, val = struct.unpack("<HHII", b[e:e + 12])
    if tag == 273:  # StripOffsets
        b[e + 8:e + 12] = struct.pack("<I", len(tif) * 10)
    if tag == 256:  # ImageWidth
        pass
files["tiff-strips-past-end.tif"] = bytes(b)
b = bytearray(tif)
for i in range(n):
    e = ifd + 2 + 12 * i
    tag, typ = struct.unpack("<HH", b[e:e + 4])
    if tag in (256, 257):  # width and height: huge
        b[e + 2:e + 4] = struct.pack("<H", 4)  # LONG
        b[e + 8:e + 12] = struct.pack("<I", 0x7FFFFFFF)
files["tiff-huge.tif"] = bytes(b)
files["tiff-truncated.tif"] = bytes(tif[: len(tif) // 3])
png = made("PNG", "a.png")
files["png-truncated.png"] = png[: len(png) // 2]
files["envi-too-big.hdr"] = b"ENVI\nsamples = 100000\nlines = 100000\nbands = 3\nheader offset = 0\nfile type = ENVI Standard\ndata type = 4\ninterleave = bsq\nbyte order = 0\n"
files["envi-too-big"] = b"\0" * 1024
hfa = bytearray(made("HFA", "a.img"))
for k in range(40, min(len(hfa), 400)):
    hfa[k] ^= 0x5A
files["hfa-damaged.img"] = bytes(hfa)
hdf = made("HDF4Image", "a.hdf")
files["hdf4-truncated.hdf"] = hdf[: len(hdf) // 2]

for name, data in files.items():
    with open(name, "wb") as f:
        f.write(data)
