"""Write the malformed GRIB corpus (committed; rerun to regenerate) from
a message made with eccodes' regular_ll_sfc_grib2 sample: lengths that
lie, a missing end, damaged sections. Each must fail in iowarp with a
clear error (EIO on a view)."""
import struct

import eccodes

h = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib2")
eccodes.codes_set_values(h, [float(i % 50) for i in range(eccodes.codes_get(h, "numberOfPoints"))])
good = bytearray(eccodes.codes_get_message(h))
eccodes.codes_release(h)
n = len(good)


def mutate(f):
    b = bytearray(good)
    f(b)
    return bytes(b)


def sections(b):
    """Offsets of sections 1..7 of a GRIB2 message."""
    out, off = {}, 16
    while off + 5 <= len(b) and b[off:off + 4] != b"7777":
        ln, num = struct.unpack(">IB", b[off:off + 5])
        out[num] = off
        off += ln
    return out


sec = sections(good)


def set_u32(b, off, v):
    b[off:off + 4] = struct.pack(">I", v)


files = {
    "truncated.grib2": bytes(good[: n // 2]),
    "length-past-end.grib2": mutate(lambda b: b.__setitem__(slice(8, 16), struct.pack(">Q", n * 1000))),
    "no-7777.grib2": mutate(lambda b: b.__setitem__(slice(n - 4, n), b"6666")),
    "edition-3.grib2": mutate(lambda b: b.__setitem__(7, 3)),
    "section3-huge.grib2": mutate(lambda b: set_u32(b, sec[3], 0x7FFFFFF0)),
    "section7-short.grib2": mutate(lambda b: set_u32(b, sec[7], 6)),
    "points-huge.grib2": mutate(lambda b: set_u32(b, sec[3] + 6, 0xFFFFFFF0)),
    "section5-garbage.grib2": mutate(lambda b: b.__setitem__(slice(sec[5] + 5, sec[5] + 21), b"\xff" * 16)),
    "only-junk.grib2": b"GRIX" + bytes(range(256)) * 4,
}

for name, data in files.items():
    with open(name, "wb") as f:
        f.write(data)
