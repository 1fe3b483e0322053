"""For each raster file on the command line, write each band GDAL's Python
bindings read of it (FILE.band_N.bin, C order, little-endian); nothing
for a file or band GDAL refuses."""
import os
import sys

import numpy as np
from osgeo import gdal

gdal.UseExceptions()
gdal.SetConfigOption("GDAL_PAM_ENABLED", "NO")
for path in sys.argv[1:]:
    try:
        ds = gdal.Open(path)
    except Exception:
        continue
    for b in range(1, ds.RasterCount + 1):
        try:
            a = ds.GetRasterBand(b).ReadAsArray()
        except Exception:
            continue
        if a is None:
            continue
        a = a.astype(a.dtype.newbyteorder("<"))
        np.ascontiguousarray(a).tofile("%s.band_%d.bin" % (path, b))
    ds = None
