# Checks stores iowarp exported (argv[2:], each named after its source)
# against the source's values (argv[1]/SOURCE.PATH.bin) with zarr-python:
# opened through its consolidated metadata, every array Blosc-compressed,
# values equal; and xarray opens each (consolidated).
import os, sys
import numpy as np
import zarr
import xarray as xr


def check(out, refdir, prefix):
    root = zarr.open_consolidated(out, mode="r")
    names = sorted(f[len(prefix) + 1:-4] for f in os.listdir(refdir) if f.startswith(prefix + ".") and f.endswith(".bin"))
    for name in names:
        z = root[name.replace("~", "/")]
        assert z.compressor is not None and z.compressor.codec_id == "blosc", (name, z.compressor)
        want = open(os.path.join(refdir, "%s.%s.bin" % (prefix, name)), "rb").read()
        got = z[...]
        got = got.astype(got.dtype.newbyteorder("<"))
        assert np.ascontiguousarray(got).tobytes() == want, (out, name)
    assert len(names) >= 4, (out, names)
    ds = xr.open_zarr(out)
    assert len(ds.data_vars) > 0, out


for out in sys.argv[2:]:
    check(out, sys.argv[1], os.path.basename(out))
