"""Write the malformed NumPy corpus (committed; rerun to regenerate).

Each file is a .npy or .npz that numpy.load refuses or that lies about
its size; every one must fail in iowarp with a clear error (EIO on a view).
"""
import io
import struct
import zipfile

import numpy as np


def npy(dict_, data=b"", ver=1):
    d = dict_.encode("latin1")
    if ver == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d + data
    return b"\x93NUMPY" + bytes([ver, 0]) + struct.pack("<I", len(d)) + d + data


good = io.BytesIO()
np.save(good, np.arange(12, dtype="<f8").reshape(3, 4))
good = good.getvalue()

files = {
    "truncated-data.npy": good[:-9],
    "truncated-header.npy": good[:40],
    "huge-shape.npy": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", b"\0" * 64),
    "overflow-shape.npy": npy("{'descr': '<i2', 'fortran_order': False, 'shape': (9223372036854775807, 9223372036854775807), }"),
    "header-past-end.npy": b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{'descr'",
    "bad-version.npy": b"\x93NUMPY\x09\x00" + good[8:],
    "unterminated-dict.npy": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4"),
    "unknown-key.npy": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1}", b"\0" * 8),
    "missing-shape.npy": npy("{'descr': '<f8', 'fortran_order': False}", b"\0" * 8),
    "bad-descr.npy": npy("{'descr': '<q8', 'fortran_order': False, 'shape': (1,), }", b"\0" * 8),
    "object.npy": npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", b"\x80\x04N."),
    "structured.npy": npy("{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (1,), }", b"\0" * 12),
    "negative-shape.npy": npy("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", b"\0" * 8),
    "bad-unicode.npy": npy("{'descr': '<U1', 'fortran_order': False, 'shape': (2,), }", struct.pack("<II", 0x41, 0xD800)),
    "not-zip.npz": b"PK\x03\x04" + b"\xff" * 60,
}

zb = io.BytesIO()
with zipfile.ZipFile(zb, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("a.npy", good)
b = bytearray(zb.getvalue())
i = b.index(b"a.npy") + 5
for k in range(i + 10, i + 40):  # corrupt the deflate stream
    b[k] ^= 0x5A
files["corrupt-deflate.npz"] = bytes(b)

zb = io.BytesIO()
with zipfile.ZipFile(zb, "w", zipfile.ZIP_STORED) as z:
    z.writestr("a.npy", good[:-16])
files["truncated-member.npz"] = zb.getvalue()

for name, data in files.items():
    with open(name, "wb") as f:
        f.write(data)
