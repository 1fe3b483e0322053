"""Write the GRIB fixtures of formats/grib into DIR with eccodes, and what
cfgrib (xarray's engine="cfgrib") reads of each message: for a variable
NAME (the OMNI name) DIR/FILE.NAME.bin (float32 values, C order),
DIR/FILE.NAME.lat.bin and .lon.bin (float64 coordinates), and
DIR/FILE.json listing name, shape and the keys that select the message."""
import json
import os
import sys

import eccodes
import numpy as np
import xarray as xr

out = sys.argv[1]
rng = np.random.default_rng(5)


def message(sample, keys, values, missing=None):
    h = eccodes.codes_grib_new_from_samples(sample)
    for k, v in keys.items():
        eccodes.codes_set(h, k, v)
    if missing is not None:
        eccodes.codes_set(h, "bitmapPresent", 1)
        eccodes.codes_set(h, "missingValue", missing)
    eccodes.codes_set_values(h, values.ravel())
    return h


def ll(ni, nj, lat0, lon0, d):
    return {"Ni": ni, "Nj": nj, "numberOfDataPoints": ni * nj, "latitudeOfFirstGridPointInDegrees": lat0, "longitudeOfFirstGridPointInDegrees": lon0,
            "latitudeOfLastGridPointInDegrees": lat0 - (nj - 1) * d, "longitudeOfLastGridPointInDegrees": lon0 + (ni - 1) * d,
            "iDirectionIncrementInDegrees": d, "jDirectionIncrementInDegrees": d}


files = {
    # three parameters on one grid, two levels of t, a field with missing points, a second grid
    "ll.grib2": [
        ("regular_ll_pl_grib2", dict(ll(12, 7, 60.0, -10.0, 2.5), shortName="t", typeOfLevel="isobaricInhPa", level=500), (12, 7), None),
        ("regular_ll_pl_grib2", dict(ll(12, 7, 60.0, -10.0, 2.5), shortName="t", typeOfLevel="isobaricInhPa", level=850), (12, 7), None),
        ("regular_ll_sfc_grib2", dict(ll(12, 7, 60.0, -10.0, 2.5), shortName="2t"), (12, 7), None),
        ("regular_ll_sfc_grib2", dict(ll(12, 7, 60.0, -10.0, 2.5), shortName="msl"), (12, 7), 9999.0),
        ("regular_ll_sfc_grib2", dict(ll(5, 4, 10.0, 100.0, 1.0), shortName="sp"), (5, 4), None),
    ],
    "gg.grib2": [("gg_sfc_grib2", {"shortName": "2t"}, None, None)],
    "ps.grib2": [("polar_stereographic_sfc_grib2", {"shortName": "2t"}, None, None)],
}

for fname, msgs in files.items():
    path = os.path.join(out, fname)
    with open(path, "wb") as f:
        for sample, keys, shape, missing in msgs:
            h = eccodes.codes_grib_new_from_samples(sample)
            for k, v in keys.items():
                eccodes.codes_set(h, k, v)
            n = eccodes.codes_get(h, "numberOfPoints")
            vals = 250 + 30 * rng.standard_normal(n)
            if missing is not None:
                eccodes.codes_set(h, "bitmapPresent", 1)
                eccodes.codes_set(h, "missingValue", missing)
                vals[::5] = missing
            eccodes.codes_set_values(h, vals)
            eccodes.codes_write(h, f)
            eccodes.codes_release(h)

    # Names as formats/grib gives them, then cfgrib's reading of each message.
    keys = []
    with open(path, "rb") as f:
        while True:
            h = eccodes.codes_grib_new_from_file(f)
            if h is None:
                break
            keys.append({k: eccodes.codes_get(h, k, ktype=str) for k in ("shortName", "typeOfLevel", "level")})
            eccodes.codes_release(h)
    short = [k["shortName"] for k in keys]
    longn = ["%s_%s_%s" % (k["shortName"], k["typeOfLevel"], k["level"]) for k in keys]
    meta = []
    for i, k in enumerate(keys):
        name = short[i] if short.count(short[i]) == 1 else longn[i]
        ds = xr.open_dataset(path, engine="cfgrib", backend_kwargs={
            "indexpath": "", "filter_by_keys": {"shortName": k["shortName"], "typeOfLevel": k["typeOfLevel"], "level": int(k["level"])}})
        var = ds[list(ds.data_vars)[0]]
        a = np.ascontiguousarray(var.values.astype("<f4"))
        a.tofile(os.path.join(out, "%s.%s.bin" % (fname, name)))
        np.ascontiguousarray(ds["latitude"].values.astype("<f8")).tofile(os.path.join(out, "%s.%s.lat.bin" % (fname, name)))
        np.ascontiguousarray(ds["longitude"].values.astype("<f8")).tofile(os.path.join(out, "%s.%s.lon.bin" % (fname, name)))
        meta.append({"name": name, "shape": list(a.shape), "units": var.attrs.get("units", ""),
                     "long_name": var.attrs.get("long_name", ""), "dims": list(var.dims)})
        ds.close()
    with open(os.path.join(out, fname + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
