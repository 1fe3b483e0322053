"""For each GRIB file named on the command line, write what cfgrib
(xarray's engine="cfgrib") reads of each message to FILE.NAME.bin
(float32, C order), NAME as formats/grib names it (shortName, or
shortName_typeOfLevel_level when the shortName is not unique in the
file), as make.py does. A message eccodes or cfgrib cannot read, or
whose keys select other than one message, gets no file."""
import os
import sys
import warnings

import eccodes
import numpy as np
import xarray as xr

warnings.simplefilter("ignore")


def messages(path):
    keys = []
    with open(path, "rb") as f:
        while True:
            try:
                h = eccodes.codes_grib_new_from_file(f)
            except Exception:
                break
            if h is None:
                break
            try:
                keys.append({k: eccodes.codes_get(h, k, ktype=str) for k in ("shortName", "typeOfLevel", "level")})
            except Exception:
                keys.append(None)
            finally:
                eccodes.codes_release(h)
    return keys


for path in sys.argv[1:]:
    try:
        keys = messages(path)
    except Exception:
        continue
    short = [k["shortName"] if k else None for k in keys]
    sel = [(k["shortName"], k["typeOfLevel"], k["level"]) if k else None for k in keys]
    for i, k in enumerate(keys):
        if k is None or sel.count(sel[i]) != 1:
            continue  # cfgrib would merge or skip the messages these keys select
        name = short[i] if short.count(short[i]) == 1 else "%s_%s_%s" % (k["shortName"], k["typeOfLevel"], k["level"])
        try:
            ds = xr.open_dataset(path, engine="cfgrib", backend_kwargs={
                "indexpath": "", "filter_by_keys": {"shortName": k["shortName"], "typeOfLevel": k["typeOfLevel"], "level": int(k["level"])}})
            if len(ds.data_vars) != 1:
                ds.close()
                continue
            a = np.ascontiguousarray(ds[list(ds.data_vars)[0]].values.astype("<f4"))
            ds.close()
        except Exception:
            continue
        a.tofile(path + "." + name + ".bin")
