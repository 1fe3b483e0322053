# Writes a small HDF5 simulation checkpoint (h5py) for the codec
# benchmarks: what a solver dumps at a restart step.
#   python3 checkpoint.py OUT.h5
import sys

import h5py
import numpy as np

rng = np.random.default_rng(42)
n = 96
x, y, z = np.meshgrid(np.linspace(0, 6.3, n), np.linspace(0, 6.3, n), np.linspace(0, 3.1, n // 2), indexing="ij")
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["step"] = 12000
    f.attrs["time"] = 3.75
    g = f.create_group("fields")
    g.create_dataset("temperature", data=(273.15 + 10 * np.sin(x) * np.cos(y) + 0.01 * rng.standard_normal(x.shape)).astype(np.float32))
    g.create_dataset("pressure", data=(101325 + 50 * np.cos(z) * np.sin(x + y)).astype(np.float64))
    g.create_dataset("velocity", data=np.stack([np.sin(y), np.cos(x), 0.1 * np.sin(z)]).astype(np.float64))
    g.create_dataset("material", data=(x > 3).astype(np.int32) + (z > 1.5).astype(np.int32))
    p = f.create_group("particles")
    m = 200000
    p.create_dataset("id", data=np.arange(m, dtype=np.int64))
    p.create_dataset("position", data=rng.uniform(0, 6.3, (m, 3)))
    p.create_dataset("species", data=rng.integers(0, 4, m, dtype=np.int8))
