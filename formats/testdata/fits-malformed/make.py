"""Write the malformed FITS corpus (committed; rerun to regenerate): headers
that lie about the data, broken cards, a damaged tile-compressed image.
Each must fail in iowarp with a clear error (EIO on a view)."""
import io

import numpy as np
from astropy.io import fits


def header(*cards):
    cs = [c.ljust(80)[:80] for c in cards] + ["END".ljust(80)]
    b = "".join(cs).encode("ascii")
    return b + b" " * (-len(b) % 2880)


def pad(b):
    return b + b"\0" * (-len(b) % 2880)


files = {
    "truncated-data.fits": header("SIMPLE  =                    T", "BITPIX  =                  -64", "NAXIS   =                    2",
                                  "NAXIS1  =                  100", "NAXIS2  =                  100") + b"\0" * 2880,
    "huge-naxis.fits": header("SIMPLE  =                    T", "BITPIX  =                   16", "NAXIS   =                    2",
                              "NAXIS1  =        1099511627776", "NAXIS2  =        1099511627776"),
    "bad-bitpix.fits": header("SIMPLE  =                    T", "BITPIX  =                   12", "NAXIS   =                    1",
                              "NAXIS1  =                   10") + pad(b"\0" * 20),
    "negative-naxis.fits": header("SIMPLE  =                    T", "BITPIX  =                    8", "NAXIS   =                    1",
                                  "NAXIS1  =                   -5"),
    "no-end.fits": ("SIMPLE  =                    T".ljust(80) + "BITPIX  =                    8".ljust(80)).encode() * 18,
    "garbage-after-simple.fits": b"SIMPLE  =                    T" + bytes(range(256)) * 11,
    "bintable-short.fits": header("SIMPLE  =                    T", "BITPIX  =                    8", "NAXIS   =                    0", "EXTEND  =                    T")
    + header("XTENSION= 'BINTABLE'", "BITPIX  =                    8", "NAXIS   =                    2", "NAXIS1  =                   16",
             "NAXIS2  =              1000000", "PCOUNT  =                    0", "GCOUNT  =                    1", "TFIELDS =                    2",
             "TFORM1  = 'D       '", "TFORM2  = 'D       '") + pad(b"\1" * 64),
    "bintable-missing-tform.fits": header("SIMPLE  =                    T", "BITPIX  =                    8", "NAXIS   =                    0", "EXTEND  =                    T")
    + header("XTENSION= 'BINTABLE'", "BITPIX  =                    8", "NAXIS   =                    2", "NAXIS1  =                    8",
             "NAXIS2  =                    2", "PCOUNT  =                    0", "GCOUNT  =                    1", "TFIELDS =                    2",
             "TFORM1  = 'D       '") + pad(b"\1" * 16),
}

# A tile-compressed image whose compressed bytes are damaged.
buf = io.BytesIO()
img = np.arange(64 * 64, dtype=np.int32).reshape(64, 64)
fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(img, compression_type="RICE_1")]).writeto(buf)
b = bytearray(buf.getvalue())
heap = len(b) - 2880  # the last block holds the heap
for k in range(heap, heap + 600):
    b[k] ^= 0xA5
files["compressed-damaged.fits"] = bytes(b)

for name, data in files.items():
    with open(name, "wb") as f:
        f.write(data)
