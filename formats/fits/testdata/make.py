"""Write the FITS fixtures of formats/fits into DIR with astropy, and what
astropy reads back: DIR/NAME.json lists, per HDU, the group the OMNI view
shows, the header cards with values, and each variable (path, dtype,
shape) whose bytes (C order, little-endian, OMNI form) are in
DIR/NAME.PATH.bin (PATH with ~ for /)."""
import json
import os
import sys

import numpy as np
from astropy.io import fits



def omni_form(a):
    a = np.asarray(a)
    if a.dtype.kind == "c":
        part = "<f4" if a.dtype.itemsize == 8 else "<f8"
        a = np.stack([a.real, a.imag], axis=-1).astype(part)
    elif a.dtype.kind == "b":
        a = a.astype("u1")
    elif a.dtype.kind == "S":
        pass
    elif a.dtype.kind == "U":
        a = np.char.encode(a, "ascii")
    else:
        a = a.astype(a.dtype.newbyteorder("<"))
    return np.ascontiguousarray(a)


def dtype_name(a):
    a = np.asarray(a)
    k, n = a.dtype.kind, a.dtype.itemsize
    if k == "b":
        return "bool"
    if k == "c":
        return "float%d" % (n * 4)
    if k in "SU":
        return None  # set from the column format
    return {"i": "int", "u": "uint", "f": "float"}[k] + str(n * 8)


def describe(path, name, out):
    meta = []
    with fits.open(path) as hdul:
        used = set()
        for i, hdu in enumerate(hdul):
            g = hdu.header.get("EXTNAME", "").strip() if i > 0 or "EXTNAME" in hdu.header else ""
            if i == 0 and not g:
                g = "PRIMARY"
            if not g or g in used:
                g = "HDU%d" % i
            used.add(g)
            cards = {}
            for c in hdu.header.cards:
                if c.keyword in ("COMMENT", "HISTORY", "", "CONTINUE") or c.keyword in cards:
                    continue
                v = c.value
                if isinstance(v, bool):
                    v = int(v)
                elif isinstance(v, (int, float, str)):
                    pass
                else:
                    continue
                cards[c.keyword] = v
            entry = {"group": g, "cards": cards, "vars": [],
                     "comment": [str(s) for s in hdu.header.get("COMMENT", [])],
                     "history": [str(s) for s in hdu.header.get("HISTORY", [])]}
            if isinstance(hdu, (fits.PrimaryHDU, fits.ImageHDU, fits.CompImageHDU)):
                if hdu.data is not None:
                    entry["vars"].append(("data", hdu.data, None))
            else:
                for col in hdu.columns:
                    if col.format[-1:] in ("X",) or "P" in col.format or "Q" in col.format:
                        continue
                    data = hdu.data[col.name]
                    dt = None
                    if np.asarray(data).dtype.kind in "SU":
                        w = hdu.columns[col.name].format
                        width = int("".join(ch for ch in str(w) if ch.isdigit()) or 1)
                        data = np.char.encode(np.char.rstrip(np.asarray(data, dtype="U")), "ascii").astype("S%d" % width)
                        dt = "S%d" % width
                    entry["vars"].append((col.name, data, dt))
            vs = []
            for vname, data, dt in entry["vars"]:
                a = omni_form(data)
                p = "/%s/%s" % (g, vname)
                a.tofile(os.path.join(out, "%s.%s.bin" % (name, p[1:].replace("/", "~"))))
                vs.append({"path": p, "dtype": dt or dtype_name(data), "shape": list(a.shape)})
            entry["vars"] = vs
            meta.append(entry)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)


def main(out):
    rng = np.random.default_rng(3)
    # 1. images: uint16 by BZERO, 3-D float32 with BUNIT, scaled int16 with
    # BLANK, int8 by BZERO -128, float64, a tile-compressed image.
    u16 = rng.integers(0, 65535, size=(20, 30)).astype(np.uint16)
    prim = fits.PrimaryHDU(u16)
    prim.header["OBSERVER"] = ("Edwin Hubble", "who")
    prim.header["EXPTIME"] = 12.5
    prim.header["NCOMBINE"] = 7
    prim.header["SIMULATE"] = True
    prim.header["LONGSTR"] = "x" * 100 + " the end"
    prim.header.add_comment("first comment")
    prim.header.add_comment("second comment")
    prim.header.add_history("made by make.py")
    cube = fits.ImageHDU(rng.standard_normal((4, 5, 6)).astype(">f4"), name="CUBE")
    cube.header["BUNIT"] = "Jy/beam"
    scaled = fits.ImageHDU(rng.integers(-1000, 1000, size=(8, 9)).astype(">i2"), name="SCALED")
    scaled.data[0, 0] = -32768
    scaled.header["BLANK"] = -32768
    scaled.header["BSCALE"] = 0.5
    scaled.header["BZERO"] = 10.0
    i8 = fits.ImageHDU(rng.integers(-128, 127, size=(5, 5)).astype(np.int8), name="SIGNED8")
    f64 = fits.ImageHDU(rng.standard_normal((3, 7)), name="CUBE")  # duplicate EXTNAME
    comp = fits.CompImageHDU(rng.integers(0, 1000, size=(64, 48)).astype(np.int32), name="COMP", compression_type="RICE_1")
    fits.HDUList([prim, cube, scaled, i8, f64, comp]).writeto(os.path.join(out, "images.fits"), overwrite=True)
    # astropy reads scaled images after applying BSCALE/BZERO; write the
    # scaled file raw, then let astropy read it as users do.
    describe(os.path.join(out, "images.fits"), "images", out)

    # 2. tables: a binary table of every column type, an ASCII table.
    n = 11
    cols = [
        fits.Column(name="flag", format="L", array=rng.integers(0, 2, n).astype(bool)),
        fits.Column(name="b", format="B", array=rng.integers(0, 255, n).astype(np.uint8)),
        fits.Column(name="i", format="I", array=rng.integers(-30000, 30000, n).astype(np.int16)),
        fits.Column(name="u", format="I", bzero=32768, array=rng.integers(0, 65535, n).astype(np.uint16)),
        fits.Column(name="j", format="J", unit="count", array=rng.integers(-2**31, 2**31 - 1, n).astype(np.int32)),
        fits.Column(name="k", format="K", array=rng.integers(-2**62, 2**62, n).astype(np.int64)),
        fits.Column(name="e", format="E", unit="km/s", array=rng.standard_normal(n).astype(np.float32)),
        fits.Column(name="d", format="D", array=rng.standard_normal(n)),
        fits.Column(name="name", format="10A", array=np.array(["star%d" % i * (i % 3) for i in range(n)])),
        fits.Column(name="c", format="C", array=(rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)),
        fits.Column(name="m", format="M", array=rng.standard_normal(n) + 1j),
        fits.Column(name="vec", format="3E", array=rng.standard_normal((n, 3)).astype(np.float32)),
        fits.Column(name="mat", format="6J", dim="(3,2)", array=rng.integers(0, 100, (n, 2, 3)).astype(np.int32)),
        fits.Column(name="bits", format="4X", array=np.zeros((n, 4), dtype=bool)),
        fits.Column(name="vla", format="PE()", array=[np.arange(i, dtype=np.float32) for i in range(n)]),
    ]
    bt = fits.BinTableHDU.from_columns(cols, name="EVENTS")
    at = fits.TableHDU.from_columns([
        fits.Column(name="x", format="F10.4", array=rng.standard_normal(5)),
        fits.Column(name="n", format="I6", array=np.arange(5)),
        fits.Column(name="s", format="A5", array=np.array(["a", "bb", "ccc", "", "eeeee"])),
    ], name="ASCII")
    fits.HDUList([fits.PrimaryHDU(), bt, at]).writeto(os.path.join(out, "tables.fits"), overwrite=True)
    describe(os.path.join(out, "tables.fits"), "tables", out)


if __name__ == "__main__":
    main(sys.argv[1])
