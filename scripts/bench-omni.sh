#!/usr/bin/env bash
# bench-omni.sh: a 1 GiB chunked, gzip float32 HDF5 variable read whole
# through /.omni/<file>/<var>/data.npy (numpy.load), cold (blocks decoded
# by the format helpers) and warm (served from the buffer pool), against
# h5py reading the same variable directly, in the same run. Needs root,
# /dev/fuse and /usr/bin/python3 with h5py and numpy; builds bin/iowarp
# if missing (make build). GIB=0.25 makes a smaller file.
# Targets (issue 5): cold >= 0.7x h5py, warm >= 2x faster than h5py.
# The same variable is also written as a FITS image (astropy; read
# through cfitsio in the helpers, against astropy.io.fits reading it
# directly) and as a Zarr store with xarray's default Blosc lz4 + shuffle
# compressor (against zarr-python): FORMATS="fits zarr" (the default)
# picks which besides HDF5, which always runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/iowarp
[ -x "$bin" ] || (cd "$root" && go build -o "$bin" ./cmd/iowarp)
py=/usr/bin/python3
work=$(mktemp -d /tmp/iowarp-bench-omni.XXXXXX)
daemon=
trap 'umount "$work/mnt" 2>/dev/null; [ -n "$daemon" ] && wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/mnt" "$work/backing"
gib=${GIB:-1}
formats=${FORMATS:-fits zarr}

$py - "$work/backing/big.h5" "$gib" <<'EOF'
import sys, time, h5py, numpy as np
path, gib = sys.argv[1], float(sys.argv[2])
nz, ny, nx = int(256 * gib), 1024, 1024
t = time.time()
with h5py.File(path, "w") as f:
    d = f.create_dataset("temperature", (nz, ny, nx), dtype="f4", chunks=(4, 256, 256),
                         compression="gzip", compression_opts=4)
    y = np.linspace(0, 6.28, ny, dtype="f4")[:, None]
    x = np.linspace(0, 6.28, nx, dtype="f4")[None, :]
    rng = np.random.default_rng(1)
    for z in range(0, nz, 8):
        base = 280 + 10 * np.sin(x + z / 50) * np.cos(y)
        noise = np.round(rng.standard_normal((8, ny, nx)).astype("f4"), 1)
        d[z:z + 8] = (base[None] + noise).astype("f4")
import os
print("made %s: %.0f MiB raw, %.0f MiB on disk, %.1fs" % (path, nz * ny * nx * 4 / 2**20, os.path.getsize(path) / 2**20, time.time() - t))
EOF

# The FITS image and the Zarr store of the same values, from the HDF5 file.
$py - "$work/backing" "$formats" <<'EOF'
import os, sys, time, h5py, numpy as np
d, formats = sys.argv[1], sys.argv[2].split()
a = h5py.File(os.path.join(d, "big.h5"))["temperature"]
if "fits" in formats:
    from astropy.io import fits
    t = time.time()
    fits.PrimaryHDU(a[()]).writeto(os.path.join(d, "big.fits"))
    print("made big.fits: %.0f MiB, %.1fs" % (os.path.getsize(os.path.join(d, "big.fits")) / 2**20, time.time() - t))
if "zarr" in formats:
    import zarr, numcodecs
    t = time.time()
    g = zarr.open_group(os.path.join(d, "big.zarr"), mode="w")
    z = g.create_dataset("temperature", shape=a.shape, chunks=(4, 256, 256), dtype="f4",
                         compressor=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    for k in range(0, a.shape[0], 8):
        z[k:k + 8] = a[k:k + 8]
    z.attrs["_ARRAY_DIMENSIONS"] = ["z", "y", "x"]
    print("made big.zarr (blosc lz4, shuffle): %.1fs" % (time.time() - t))
EOF

# RAM tier: every variable's blocks stay resident (one copy per format).
copies=$(( 1 + $(wc -w <<<"$formats") ))
"$bin" mount "$work/mnt" --backing "$work/backing" --ram "$(( $(printf '%.0f' "$(echo "$gib*1024" | bc)") * copies + 512 ))MiB" \
	--control-dir "$work/ctl" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 200); do grep -q " $work/mnt " /proc/self/mountinfo && break; sleep 0.05; done

$py - "$work/mnt" "$formats" <<'EOF'
import os, sys, time, h5py, numpy as np
mnt, formats = sys.argv[1], sys.argv[2].split()
src = os.path.join(mnt, "big.h5")
npy = os.path.join(mnt, ".omni", "big.h5", "temperature", "data.npy")

def timed(f):
    t = time.perf_counter(); a = f(); return time.perf_counter() - t, a

# The backing file is in the OS page cache for both readers (made just now).
back = os.path.join(os.path.dirname(mnt), "backing", "big.h5")
th, want = timed(lambda: h5py.File(back)["temperature"][()])
tc, cold = timed(lambda: np.load(npy))
assert np.array_equal(cold, want), "cold read differs from h5py"
del cold
tw, warm = timed(lambda: np.load(npy))
assert np.array_equal(warm, want), "warm read differs from h5py"
del warm
tm, m = timed(lambda: np.array(np.load(npy, mmap_mode="r")))
assert np.array_equal(m, want)
gib = want.nbytes / 2**30
print("variable: %s float32, %.2f GiB, chunks (4,256,256), gzip 4" % (want.shape, gib))
print("h5py direct:           %6.2fs  %7.0f MiB/s" % (th, want.nbytes / th / 2**20))
print("data.npy cold:         %6.2fs  %7.0f MiB/s  %.2fx h5py (target >= 0.7x)" % (tc, want.nbytes / tc / 2**20, th / tc))
print("data.npy warm:         %6.2fs  %7.0f MiB/s  %.2fx h5py (target >= 2x)" % (tw, want.nbytes / tw / 2**20, th / tw))
print("data.npy warm, mmap:   %6.2fs  %7.0f MiB/s  %.2fx h5py" % (tm, want.nbytes / tm / 2**20, th / tm))


def versus(label, direct, npy):
    """The view's data.npy cold and warm against the format's own reader."""
    td, ref = timed(direct)
    assert np.array_equal(ref, want), label + ": the direct read differs from h5py"
    tc, cold = timed(lambda: np.load(npy))
    assert np.array_equal(cold, want), label + ": cold read differs"
    del cold
    tw, warm = timed(lambda: np.load(npy))
    assert np.array_equal(warm, want), label + ": warm read differs"
    del warm
    print("%-22s %6.2fs  %7.0f MiB/s" % (label + " direct:", td, want.nbytes / td / 2**20))
    print("%-22s %6.2fs  %7.0f MiB/s  %.2fx direct" % (label + " data.npy cold:", tc, want.nbytes / tc / 2**20, td / tc))
    print("%-22s %6.2fs  %7.0f MiB/s  %.2fx direct" % (label + " data.npy warm:", tw, want.nbytes / tw / 2**20, td / tw))


backdir = os.path.dirname(back)
if "fits" in formats:
    from astropy.io import fits
    versus("FITS", lambda: np.array(fits.getdata(os.path.join(backdir, "big.fits"), memmap=False)),
           os.path.join(mnt, ".omni", "big.fits", "PRIMARY", "data", "data.npy"))
if "zarr" in formats:
    import zarr
    versus("Zarr blosc", lambda: zarr.open_group(os.path.join(backdir, "big.zarr"), mode="r")["temperature"][...],
           os.path.join(mnt, ".omni", "big.zarr", "temperature", "data.npy"))
EOF
grep -i "omni\|error" "$work/daemon.log" || true
