"""The xarray backend: ``xarray.open_dataset(path, engine="iowarp")``
opens any dataset the daemon's drivers read (through iowarp.omni), lazily:
each variable is a LazilyIndexedArray over a BackendArray whose reads are
hyperslab reads of only the selection (no dask needed; with ``chunks=``
xarray wraps the same arrays in dask).

Values: the backend hands xarray the raw values (``data.raw`` where the
views decode CF themselves, else ``data``) and the file's attributes, and
xarray decodes them as it does for netCDF4 (``mask_and_scale``,
``decode_times`` and the other decoders apply as with any engine).
"""

import os

import numpy as np
from xarray import Dataset as XDataset
from xarray import Variable as XVariable
from xarray import conventions
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from . import omni


class IowarpBackendArray(BackendArray):
    """One OMNI variable; xarray indexes it with basic indexing (ints and
    slices) and does the rest (outer, vectorized) in numpy."""

    def __init__(self, var):
        self.var = var
        self.shape = var.shape
        self.dtype = var.dtype

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC,
                                                  self._getitem)

    def _getitem(self, key):
        return self.var.read(tuple(key), raw=True)


def _dims(v):
    """Dimension names, one per axis (phony_dim_N for unnamed axes, as
    netCDF4 and h5netcdf name them by size)."""
    return tuple(d if d else "phony_dim_%d" % n for d, n in zip(v.dims or ("",) * v.ndim, v.shape))


class IowarpBackendEntrypoint(BackendEntrypoint):
    """engine="iowarp"."""

    description = "Open any dataset an iowarp daemon reads, through its .omni views"
    url = "https://github.com/iowarp/iowarp"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "mask_and_scale",
                               "decode_times", "concat_characters", "decode_coords",
                               "use_cftime", "decode_timedelta")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None, mask_and_scale=True,
                     decode_times=True, concat_characters=True, decode_coords=True, use_cftime=None,
                     decode_timedelta=None, mount=None):
        ds = omni.open(filename_or_obj, mount=mount)
        g = ds.group(group) if group else ds.root
        drop = {drop_variables} if isinstance(drop_variables, str) else set(drop_variables or ())
        variables = {}
        for name, v in g.variables.items():
            if name in drop:
                continue
            data = indexing.LazilyIndexedArray(IowarpBackendArray(v))
            enc = {"source": ds.path, "original_shape": v.shape, "dtype": v.dtype}
            if v.chunks:
                enc["chunksizes"] = v.chunks
            variables[name] = XVariable(_dims(v), data, attrs=dict(v.attrs), encoding=enc)
        variables, attrs, coord_names = conventions.decode_cf_variables(
            variables, dict(g.attrs), concat_characters=concat_characters,
            mask_and_scale=mask_and_scale, decode_times=decode_times, decode_coords=decode_coords,
            drop_variables=None, use_cftime=use_cftime, decode_timedelta=decode_timedelta)
        out = XDataset(variables, attrs=attrs)
        out = out.set_coords(coord_names.intersection(variables))
        out.set_close(ds.close)
        out.encoding["source"] = ds.path
        return out

    def guess_can_open(self, filename_or_obj):
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        try:
            root = omni.find_view_root(filename_or_obj)
        except (OSError, ValueError):
            return False
        return os.path.exists(os.path.join(root, "schema.json"))
