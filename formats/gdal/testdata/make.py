"""Write the GDAL fixtures of formats/gdal into DIR: a two-band GeoTIFF
source (GDAL's Python bindings), translated by `gdal_translate` to ENVI,
HFA, PCIDSK, PNG, BMP and HDF4Image; then what GDAL reads of each file:
DIR/FILE.json (gdalinfo -json: size, geotransform, bands with type,
noData, description) and DIR/FILE.bandN.bin (each band, C order,
little-endian); of the HDF4 file also the multidimensional arrays
(gdal.OpenEx with OF_MULTIDIM_RASTER): DIR/FILE.md.json and
DIR/FILE.md.NAME.bin."""
import json
import os
import subprocess
import sys

import numpy as np
from osgeo import gdal

gdal.UseExceptions()
out = sys.argv[1]
rng = np.random.default_rng(11)
ny, nx = 23, 37

src = os.path.join(out, "src.tif")
ds = gdal.GetDriverByName("GTiff").Create(src, nx, ny, 2, gdal.GDT_Int16)
ds.SetGeoTransform([-20.0, 0.5, 0.0, 60.0, 0.0, -0.25])
ds.SetProjection('GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433],AUTHORITY["EPSG","4326"]]')
for b in (1, 2):
    band = ds.GetRasterBand(b)
    band.WriteArray(rng.integers(-3000, 3000, size=(ny, nx)).astype(np.int16))
    band.SetNoDataValue(-9999)
    band.SetDescription("band%d of the source" % b)
ds.SetMetadataItem("SOURCE", "formats/gdal make.py")
ds = None

targets = {
    "gtiff.tif": ["-of", "GTiff", "-co", "TILED=YES", "-co", "BLOCKXSIZE=16", "-co", "BLOCKYSIZE=16", "-co", "COMPRESS=DEFLATE"],
    "float.tif": ["-of", "GTiff", "-ot", "Float32", "-scale", "-3000", "3000", "-1", "1"],
    "envi.bin": ["-of", "ENVI"],
    "hfa.img": ["-of", "HFA"],
    "pcidsk.pix": ["-of", "PCIDSK", "-ot", "UInt16", "-scale", "-3000", "3000", "0", "60000"],
    "png.png": ["-of", "PNG", "-ot", "Byte", "-scale", "-3000", "3000", "0", "255"],
    "bmp.bmp": ["-of", "BMP", "-ot", "Byte", "-scale", "-3000", "3000", "0", "255", "-b", "1"],
    "hdf4.hdf": ["-of", "HDF4Image", "-ot", "Float64"],
}
for name, opts in targets.items():
    subprocess.run(["gdal_translate", "-q"] + opts + [src, os.path.join(out, name)], check=True)
os.remove(src)

for name in targets:
    path = os.path.join(out, name)
    info = json.loads(subprocess.run(["gdalinfo", "-json", path], check=True, capture_output=True).stdout)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(info, f)
    ds = gdal.Open(path)
    for b in range(1, ds.RasterCount + 1):
        a = ds.GetRasterBand(b).ReadAsArray()
        a = a.astype(a.dtype.newbyteorder("<"))
        np.ascontiguousarray(a).tofile(os.path.join(out, "%s.band%d.bin" % (name, b)))
    ds = None

# The HDF4 file through GDAL's multidimensional API.
path = os.path.join(out, "hdf4.hdf")
ds = gdal.OpenEx(path, gdal.OF_MULTIDIM_RASTER)
meta = []


def walk(g, prefix):
    for an in g.GetMDArrayNames() or []:
        arr = g.OpenMDArray(an)
        a = arr.ReadAsArray()
        p = prefix + "/" + an
        np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<"))).tofile(os.path.join(out, "hdf4.hdf.md.%s.bin" % p[1:].replace("/", "~")))
        meta.append({"path": p, "shape": list(a.shape), "dims": [d.GetName() for d in arr.GetDimensions()]})
    for gn in g.GetGroupNames() or []:
        walk(g.OpenGroup(gn), prefix + "/" + gn)


walk(ds.GetRootGroup(), "")
with open(path + ".md.json", "w") as f:
    json.dump(meta, f)
