#!/usr/bin/env python3
"""Writes the OMNI test fixtures into the directory given as argv[1].

Used by the Go tests of formats/...; needs h5py, netCDF4, numpy (and
ncgen for the NetCDF-3 files). Prints one line per file written.
"""
import os
import subprocess
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(42)


def p(name):
    path = os.path.join(out, name)
    print(path)
    return path


def hdf5():
    import h5py
    with h5py.File(p("grid.h5"), "w") as f:
        f.attrs["title"] = "grid fixture"                     # vlen str
        f.attrs["version"] = np.int32(3)
        f.attrs["fixed"] = np.bytes_("fixed-len")              # fixed str
        f.attrs["names"] = np.array([b"a", b"bb", b"ccc"], dtype="S3")
        f.attrs["vnames"] = np.array(["x", "yy"], dtype=h5py.string_dtype())
        nt, ny, nx = 6, 20, 30
        t = f.create_dataset("time", data=np.arange(nt, dtype="f8") * 30.0)
        t.attrs["units"] = "days since 2024-01-01"
        t.attrs["calendar"] = "standard"
        t.attrs["standard_name"] = "time"
        lat = f.create_dataset("lat", data=np.linspace(-47.5, 47.5, ny).astype("f4"))
        lat.attrs["units"] = "degrees_north"
        lon = f.create_dataset("lon", data=np.arange(nx, dtype="f8") * 12.0)
        lon.attrs["units"] = "degrees_east"
        for d in (t, lat, lon):
            d.make_scale(d.name[1:])
        temp = f.create_dataset("temperature", data=rng.standard_normal((nt, ny, nx)).astype("f4") + 280,
                                chunks=(2, 10, 10), compression="gzip", compression_opts=4,
                                shuffle=True, fletcher32=True)
        temp.attrs["units"] = "K"
        temp.attrs["valid_range"] = np.array([200, 350], dtype="i2")
        temp.attrs["scale_factor"] = np.float64(1.5)
        temp.attrs["_FillValue"] = np.float32(np.nan)
        temp.dims[0].attach_scale(t)
        temp.dims[1].attach_scale(lat)
        temp.dims[2].attach_scale(lon)
        g = f.create_group("entry")
        g.attrs["NX_class"] = np.bytes_("NXentry")
        d = g.create_group("instrument").create_group("detector")
        d.attrs["NX_class"] = "NXdetector"
        d.create_dataset("counts", data=rng.integers(0, 1 << 40, (5, 7), dtype="i8"))
        d.create_dataset("mask", data=rng.integers(0, 2, (5, 7)).astype(bool))
        d.create_dataset("u16", data=np.arange(12, dtype="u2").reshape(3, 4))
        d.create_dataset("i8", data=np.arange(-5, 5, dtype="i1"))
        d.create_dataset("u64", data=np.array([0, 1, 2**63 + 5], dtype="u8"))
        d.create_dataset("big", data=np.arange(10, dtype=">i4"))
        d.create_dataset("scalar", data=np.float64(3.25))
        comp = np.zeros(8, dtype=[("x", "f8"), ("y", "f4"), ("id", "i4"), ("tag", "S6")])
        comp["x"] = rng.standard_normal(8)
        comp["y"] = rng.standard_normal(8)
        comp["id"] = np.arange(8) * 7
        comp["tag"] = [b"p%d" % i for i in range(8)]
        c = f.create_dataset("particles", data=comp)
        c.attrs["description"] = "compound"
        f.create_dataset("series", data=np.arange(17, dtype="i4"), maxshape=(None,), chunks=(4,))
        f.create_dataset("labels", data=np.array(["alpha", "", "gamma δ"], dtype=h5py.string_dtype()))
        f.create_dataset("codes", data=np.array([b"AB", b"CD", b"EF"], dtype="S2"))
        f["link_to_lat"] = h5py.SoftLink("/lat")


def netcdf4():
    import netCDF4
    with netCDF4.Dataset(p("climate.nc"), "w", format="NETCDF4") as ds:
        ds.title = "climate fixture"
        ds.Conventions = "CF-1.8"
        ds.createDimension("time", None)
        ds.createDimension("lat", 18)
        ds.createDimension("lon", 24)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2024-01-01 00:00:00"
        t.calendar = "standard"
        t.standard_name = "time"
        t[:] = np.arange(0, 365, 7, dtype="f8")
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat.standard_name = "latitude"
        lat[:] = np.linspace(-85, 85, 18)
        lon = ds.createVariable("lon", "f4", ("lon",))
        lon.units = "degrees_east"
        lon[:] = np.arange(24) * 15.0
        v = ds.createVariable("temperature", "f4", ("time", "lat", "lon"), zlib=True, complevel=3,
                              chunksizes=(4, 9, 12), fill_value=-999.0)
        v.units = "K"
        v.standard_name = "air_temperature"
        v.valid_range = np.array([150, 350], dtype="i4")
        v[:] = rng.standard_normal((len(t), 18, 24)).astype("f4") + 280
        s = ds.createVariable("station", str, ("lat",))
        s[:] = np.array(["st%d" % i for i in range(18)], dtype=object)
        g = ds.createGroup("forecast")
        g.model = "toy"
        g.createDimension("step", 5)
        h = g.createVariable("precip", "f8", ("step", "lat"))
        h[:] = rng.random((5, 18))
        u = g.createVariable("count", "u2", ("step",))
        u[:] = np.arange(5, dtype="u2")
        g.createGroup("deeper").createVariable("flag", "i1", ())


CDL = """netcdf classic {
dimensions:
    time = UNLIMITED ; // (3 currently)
    x = 4 ;
    nchar = 5 ;
variables:
    double time(time) ;
        time:units = "hours since 2000-01-01" ;
    float x(x) ;
    short values(time, x) ;
        values:long_name = "some data" ;
        values:scale_factor = 0.5 ;
        values:flags = 1b, 2b ;
    char name(x, nchar) ;
    int scalar ;
// global attributes:
    :title = "classic fixture" ;
data:
    time = 0, 6, 12 ;
    x = 0.5, 1.5, 2.5, 3.5 ;
    values = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 ;
    name = "ab", "cde", "fghij", "k" ;
    scalar = 42 ;
}
"""


def netcdf3():
    cdl = os.path.join(out, "classic.cdl")
    with open(cdl, "w") as fh:
        fh.write(CDL)
    for kind, name in (("classic", "classic.nc"), ("64-bit offset", "offset64.nc"), ("cdf5", "cdf5.nc")):
        subprocess.run(["ncgen", "-k", kind, "-o", p(name), cdl], check=True)


def tables():
    n = 50
    with open(p("table.csv"), "w") as fh:
        fh.write("id,value,name,flag\n")
        for i in range(n):
            fh.write("%d,%r,item%d,%s\n" % (i, i * 0.25 - 3, i, "true" if i % 3 == 0 else "false"))
    import json
    with open(p("table.jsonl"), "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": i, "value": i * 0.5, "name": "row%d" % i}) + "\n")


def malformed():
    import h5py
    src = os.path.join(out, "grid.h5")
    data = open(src, "rb").read()
    with open(p("truncated.h5"), "wb") as fh:
        fh.write(data[: len(data) // 3])
    with open(p("random.h5"), "wb") as fh:
        fh.write(b"\x89HDF\r\n\x1a\n" + np.random.default_rng(7).bytes(64 << 10))
    nc = bytearray(open(os.path.join(out, "classic.nc"), "rb").read())
    # CDF-1 header: magic(4) numrecs(4) NC_DIMENSION(4) ndims(4), then
    # the first dimension: name length, name padded to 4, size.
    nc[4:8] = (0x7FFFFFFF).to_bytes(4, "big")          # numrecs: a lie
    nc[16:20] = (0x7FFFFFF0).to_bytes(4, "big")        # name length past the end
    with open(p("lying.nc"), "wb") as fh:
        fh.write(nc)


hdf5()
netcdf4()
netcdf3()
tables()
malformed()
