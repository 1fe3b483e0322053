"""Copy costs of the Python package, as ratios against baselines measured
in the same run (python3 bench.py; needs a daemon: IOWARP_MOUNT,
IOWARP_CONTROL_DIR, IOWARP_LIB as for the tests). Timings on a shared
machine are noisy: the medians of --rounds runs are printed.

  put: a heap array (one copy here + the daemon's) vs an array built in
       the shared segment (Client.empty: the daemon's copy only)
  get: into a heap array (get(out=...): the daemon's copy + one here) vs
       zero-copy (an array over the segment: the daemon's copy only)
  the baseline of both: one numpy copy of the same bytes
  omni: a hyperslab read through .omni vs netCDF4 reading the backing file
"""

import argparse
import os
import statistics
import time

import numpy as np

import iowarp


def median(fn, rounds):
    ts = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--nc", help="a NetCDF file under the mount, for the omni row")
    ap.add_argument("--var", default="temperature")
    a = ap.parse_args()
    c = iowarp.connect()
    b = iowarp.Bucket("bench-py", client=c)
    n = a.mib << 20
    heap = np.random.default_rng(0).random(n // 8)
    shm = c.empty(heap.shape, heap.dtype)
    shm[:] = heap
    dst = np.empty_like(heap)
    base = median(lambda: np.copyto(dst, heap), a.rounds)
    put_heap = median(lambda: b.put("h", heap), a.rounds)
    put_shm = median(lambda: b.put("s", shm), a.rounds)
    get_out = median(lambda: b.get("h", out=dst), a.rounds)
    get_zc = median(lambda: b.get("h"), a.rounds)
    print("%d MiB, medians of %d: memcpy %.2f ms" % (a.mib, a.rounds, base * 1e3))
    print("put heap   %.2f ms  %.2fx memcpy" % (put_heap * 1e3, put_heap / base))
    print("put shm    %.2f ms  %.2fx memcpy  (%.2fx put heap)" % (put_shm * 1e3, put_shm / base, put_shm / put_heap))
    print("get out=   %.2f ms  %.2fx memcpy" % (get_out * 1e3, get_out / base))
    print("get zero   %.2f ms  %.2fx memcpy  (%.2fx get out=)" % (get_zc * 1e3, get_zc / base, get_zc / get_out))
    b.delete("h")
    b.delete("s")
    c.delete_bucket("bench-py")
    if a.nc:
        import netCDF4

        ds = iowarp.omni.open(a.nc)
        v = ds[a.var]
        src = ds.path
        sel = tuple(slice(0, max(1, s // 2)) for s in v.shape)
        v.read(sel, raw=True)  # the first read stages the blocks into the pool

        def ref():
            with netCDF4.Dataset(src) as f:
                f.set_auto_maskandscale(False)
                f[a.var][sel]

        t_ref = median(ref, a.rounds)
        t_omni = median(lambda: v.read(sel, raw=True), a.rounds)
        print("omni %s%s: %.2f ms, netCDF4 on the backing file %.2f ms: %.2fx" % (
            a.var, [s.stop for s in sel], t_omni * 1e3, t_ref * 1e3, t_omni / t_ref))


if __name__ == "__main__":
    main()
