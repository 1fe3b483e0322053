"""Write the NumPy fixtures of formats/numpy into DIR.

For every array NAME it writes DIR/NAME.npy (or a member of an .npz) and
DIR/NAME.want: the array as the OMNI views must show it, C order,
little-endian (float16 widened to float32; complex as (..., 2) real and
imaginary parts; datetime64 as int64), with DIR/NAME.shape holding the
OMNI shape ("2,3") and DIR/NAME.dtype the OMNI dtype. 'U' arrays write
their strings, one per line, to NAME.want.
"""
import os
import sys

import numpy as np

out = None  # the output directory (main, or set by an importer)


def want(a):
    """The OMNI form of a (an ndarray)."""
    if a.dtype.kind == "f" and a.dtype.itemsize == 2:
        return a.astype("<f4"), "float32"
    if a.dtype.kind == "c":
        part = "<f4" if a.dtype.itemsize == 8 else "<f8"
        w = np.stack([a.real, a.imag], axis=-1).astype(part)
        return w, "float32" if part == "<f4" else "float64"
    if a.dtype.kind in "Mm":
        return a.astype(a.dtype.newbyteorder("<")).view("<i8"), "int64"
    if a.dtype.kind == "b":
        return a, "bool"
    if a.dtype.kind == "S":
        return a, "S%d" % a.dtype.itemsize
    le = a.dtype.newbyteorder("<")
    names = {"i": "int", "u": "uint", "f": "float"}
    return a.astype(le), "%s%d" % (names[a.dtype.kind], a.dtype.itemsize * 8)


def record(name, a):
    if a.dtype.kind == "U":
        with open(os.path.join(out, name + ".want"), "w") as f:
            f.write("\n".join(str(s) for s in a.ravel(order="C")))
        shape, dt = a.shape, "string"
    else:
        w, dt = want(a)
        np.ascontiguousarray(w).tofile(os.path.join(out, name + ".want"))
        shape = w.shape
    with open(os.path.join(out, name + ".shape"), "w") as f:
        f.write(",".join(str(n) for n in shape))
    with open(os.path.join(out, name + ".dtype"), "w") as f:
        f.write(dt)


def main():
    rng = np.random.default_rng(7)
    arrays = {}
    for order in "<>":
        for kind in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]:
            dt = np.dtype(order + kind)
            if dt.kind in "iu":
                info = np.iinfo(dt)
                a = rng.integers(info.min, info.max, size=(5, 7), dtype=dt.newbyteorder("="), endpoint=True).astype(dt)
            elif dt.kind == "f":
                a = (rng.standard_normal((5, 7)) * 100).astype(dt)
                a[0, 0], a[0, 1] = np.inf, np.nan
            else:
                a = (rng.standard_normal((5, 7)) + 1j * rng.standard_normal((5, 7))).astype(dt)
            tag = ("le" if order == "<" else "be") + "_" + kind
            arrays[tag] = a
            arrays[tag + "_F"] = np.asfortranarray(a)
    arrays["bool"] = rng.integers(0, 2, size=(3, 4, 5)).astype(bool)
    arrays["bool_F"] = np.asfortranarray(arrays["bool"])
    arrays["f8_3d_F"] = np.asfortranarray(rng.standard_normal((4, 3, 6)))
    arrays["scalar"] = np.array(3.25)
    arrays["empty"] = np.zeros((0, 3), dtype="<i4")
    arrays["vector"] = np.arange(1000, dtype=">u2")
    arrays["half_special"] = np.array([0, -0.0, 6e-8, 1e-5, 65504, -np.inf, np.nan, 1 / 3], dtype="<f2")
    arrays["datetime"] = np.array(["2024-01-01T00:00", "NaT", "1969-12-31T23:59:59.5"], dtype="datetime64[ns]")
    arrays["timedelta"] = np.array([1, 2, -3], dtype=">m8[s]")
    arrays["bytes"] = np.array([b"ab", b"", b"xyz\x01"], dtype="S4")
    arrays["unicode"] = np.array([["héllo", "", "ω≈"], ["a", "bb", "\U0001f600"]], dtype="<U5")
    arrays["unicode_be"] = arrays["unicode"].astype(">U5")

    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
        record(name, a)

    # Header versions 2.0 and 3.0 (written as numpy.lib.format does).
    from numpy.lib import format as npformat

    for ver in [(2, 0), (3, 0)]:
        name = "v%d" % ver[0]
        a = rng.standard_normal((3, 2)).astype(">f4")
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            npformat.write_array(f, a, version=ver)
        record(name, a)

    # Archives: stored and compressed, a key with a "/".
    members = {"temp": rng.standard_normal((4, 5)), "idx": np.arange(7, dtype="<i8"),
               "z": (np.arange(6) * (1 + 2j)).reshape(2, 3).astype(">c8"),
               "grid/lat": np.linspace(-90, 90, 5, dtype="<f4"),
               "fort": np.asfortranarray(rng.integers(0, 99, size=(6, 4)).astype(">i4"))}
    np.savez(os.path.join(out, "arch.npz"), **members)
    np.savez_compressed(os.path.join(out, "archz.npz"), **members)
    for k, a in members.items():
        record("arch." + k.replace("/", "~"), a)


if __name__ == "__main__":
    out = sys.argv[1]
    main()
