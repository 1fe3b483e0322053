"""iowarp: the buffer pool's buckets and blobs (Bucket, Client), OMNI
datasets (iowarp.omni.open), an xarray backend (engine="iowarp") and the
search across datasets (iowarp.search).

    import iowarp
    b = iowarp.Bucket("results")
    b.put("step-1", numpy_array)
    a = b.get("step-1")           # same dtype and shape, zero-copy
    ds = iowarp.omni.open("/iowarp/run/out.nc")
    t = ds["temperature"][0, 10:20, :]
"""

from ._lib import Error, NotFound
from .client import Bucket, Client, connect, default_client
from . import omni
from .search import search

__all__ = ["Bucket", "Client", "connect", "default_client", "Error", "NotFound", "omni", "search"]
__version__ = "0.1.0"
