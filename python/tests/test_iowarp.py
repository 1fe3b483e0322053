"""Tests of the iowarp Python package against a real daemon and mount
(python/python_test.go starts them and runs this file under /usr/bin/python3).

Environment: IOWARP_MOUNT (the mount), IOWARP_TEST_BACKING (its backing
directory), IOWARP_CONTROL_DIR (the daemon's sockets), IOWARP_LIB.
"""

import importlib.metadata
import os
import unittest

import numpy as np

import iowarp
import iowarp.client
from iowarp import _lib

MOUNT = os.environ["IOWARP_MOUNT"]
BACKING = os.environ["IOWARP_TEST_BACKING"]


class Calls:
    """Records the library functions called (to see which path a put took)."""

    def __enter__(self):
        self.names = []
        self.orig = _lib.call

        def rec(name, *args):
            self.names.append(name)
            return self.orig(name, *args)

        _lib.call = rec
        return self

    def __exit__(self, *exc):
        _lib.call = self.orig


class TestBucket(unittest.TestCase):
    def setUp(self):
        self.c = iowarp.connect(segment_size=16 << 20)
        self.b = iowarp.Bucket("pytest-%s" % self.id().rsplit(".", 1)[1], client=self.c)

    def tearDown(self):
        self.b.close()
        self.c.delete_bucket(self.b.name)
        self.c.close()

    def test_put_get_array(self):
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        self.b.put("a", a)
        g = self.b.get("a")
        self.assertEqual(g.dtype, a.dtype)
        self.assertEqual(g.shape, a.shape)
        np.testing.assert_array_equal(g, a)
        # The array lies in the shared segment: the daemon's copy was the
        # only one.
        buf, off = iowarp.client._segment_buffer(g)
        self.assertIsNotNone(buf)
        self.assertEqual(off, 0)
        self.assertEqual(self.b.stat("a")["size"], a.nbytes)
        self.assertEqual(self.b.tags("a")["numpy.dtype"], "<f4")

    def test_bytes_and_views(self):
        self.b.put("b", b"hello world")
        self.assertEqual(self.b.get("b").tobytes(), b"hello world")
        self.b.put("m", memoryview(bytearray(b"xyz")))
        self.assertEqual(bytes(self.b.get("m")), b"xyz")
        self.b.put("e", b"")
        self.assertEqual(self.b.get("e").size, 0)
        # A strided array is put in C order.
        a = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::2]
        self.b.put("s", a)
        np.testing.assert_array_equal(self.b.get("s"), a)

    def test_zero_copy_put(self):
        a = self.c.empty((1000,), np.int32)
        a[:] = np.arange(1000)
        with Calls() as calls:
            self.b.put("z", a)
        self.assertIn("iowarp_put_buffer", calls.names)
        self.assertNotIn("iowarp_put", calls.names)
        with Calls() as calls:
            self.b.partial_put("z", 8, a[:4])
        self.assertEqual(calls.names, ["iowarp_partial_put_buffer"])
        want = np.arange(1000, dtype=np.int32)
        want[2:6] = [0, 1, 2, 3]
        np.testing.assert_array_equal(self.b.get("z"), want)
        # A heap array takes the copying call.
        with Calls() as calls:
            self.b.put("h", np.ones(10))
        self.assertIn("iowarp_put", calls.names)

    def test_partial(self):
        self.b.put("p", np.arange(100, dtype=np.uint8))
        got = self.b.partial_get("p", 10, 5)
        np.testing.assert_array_equal(got, np.arange(10, 15, dtype=np.uint8))
        self.assertIsNotNone(iowarp.client._segment_buffer(got)[0])
        self.assertEqual(self.b.partial_get("p", 98, 10).tolist(), [98, 99])
        out = np.zeros(4, np.uint8)
        self.assertEqual(self.b.partial_get("p", 0, out=out), 4)
        self.assertEqual(out.tolist(), [0, 1, 2, 3])
        self.b.partial_put("p", 120, b"\x07\x08")
        info = self.b.stat("p")
        self.assertEqual(info["size"], 122)
        self.assertEqual(self.b.partial_get("p", 118, 4, ).tolist(), [0, 0, 7, 8])
        self.b.partial_put("new", 0, b"abc")
        self.assertEqual(bytes(self.b.get("new", dtype=np.uint8)), b"abc")
        with self.assertRaises(ValueError):
            self.b.partial_get("p", 0, out=np.zeros((4, 4), np.uint8)[:, ::2])

    def test_large_in_pieces(self):
        # Larger than a quarter of the segment: put and get in pieces.
        a = np.random.default_rng(1).random(3 << 20)  # 24 MiB
        self.assertGreater(a.nbytes, self.c.piece)
        self.b.put("big", a)
        np.testing.assert_array_equal(self.b.get("big"), a)
        part = self.b.partial_get("big", 8 << 20, 12 << 20)
        np.testing.assert_array_equal(part, a.view(np.uint8)[8 << 20:20 << 20])

    def test_segment_full(self):
        # Arrays held from gets fill the 16 MiB segment; later gets copy
        # into the heap instead of failing.
        a = np.arange(3 << 17, dtype=np.float64)  # 3 MiB
        self.b.put("f", a)
        held = [self.b.get("f") for _ in range(8)]
        for g in held:
            np.testing.assert_array_equal(g, a)
        self.assertIsNone(iowarp.client._segment_buffer(held[-1])[0])
        self.assertIsNotNone(iowarp.client._segment_buffer(held[0])[0])
        del held
        self.assertIsNotNone(iowarp.client._segment_buffer(self.b.get("f"))[0])

    def test_missing_and_delete(self):
        with self.assertRaises(KeyError):
            self.b.get("nope")
        with self.assertRaises(iowarp.NotFound) as cm:
            self.b.stat("nope")
        self.assertEqual(cm.exception.errno, 2)
        self.b.put("d", b"1")
        self.assertIn("d", self.b)
        self.assertEqual(self.b.keys(), ["d"])
        self.b.delete("d")
        self.assertNotIn("d", self.b)
        self.assertEqual(self.b.list(), [])
        self.assertIn(self.b.name, self.c.buckets())

    def test_array_outlives_close(self):
        c = iowarp.connect()
        b = iowarp.Bucket("pytest-outlive", client=c)
        b.put("x", np.arange(10.0))
        g = b.get("x")
        b.close()
        c.close()  # deferred while g holds segment memory
        np.testing.assert_array_equal(g, np.arange(10.0))
        with self.assertRaises(iowarp.Error):
            iowarp.Bucket("pytest-outlive", client=c)
        del g  # the last buffer: the connection closes now
        self.assertEqual(c._h, 0)
        iowarp.connect().delete_bucket("pytest-outlive")

    def test_default_client(self):
        b = iowarp.Bucket("pytest-default")
        b.put("k", b"v")
        self.assertEqual(bytes(iowarp.Bucket("pytest-default").get("k")), b"v")
        iowarp.default_client().delete_bucket("pytest-default")


def _make_files():
    import h5py
    import netCDF4

    nc = os.path.join(BACKING, "climate.nc")
    if not os.path.exists(nc):
        d = netCDF4.Dataset(nc, "w")
        d.createDimension("time", 6)
        d.createDimension("lat", 7)
        d.createDimension("lon", 9)
        t = d.createVariable("time", "f8", ("time",))
        t.units = "days since 2024-01-01"
        t.calendar = "standard"
        t[:] = np.arange(6) * 30
        la = d.createVariable("lat", "f4", ("lat",))
        la.units, la.standard_name = "degrees_north", "latitude"
        la[:] = np.linspace(-30, 30, 7)
        lo = d.createVariable("lon", "f4", ("lon",))
        lo.units, lo.standard_name = "degrees_east", "longitude"
        lo[:] = np.arange(9) * 40.0
        v = d.createVariable("temperature", "i2", ("time", "lat", "lon"), fill_value=-9999)
        v.units, v.long_name = "K", "air temperature"
        v.scale_factor, v.add_offset = 0.01, 273.15
        raw = (np.arange(6 * 7 * 9).reshape(6, 7, 9) * 7 % 3000).astype("i2")
        raw[0, 0, :3] = -9999
        v.set_auto_maskandscale(False)
        v[:] = raw
        p = d.createVariable("precip", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=(1, 7, 9))
        p.units = "mm"
        p[:] = np.random.default_rng(2).random((6, 7, 9)).astype("f4")
        st = d.createVariable("station", str, ("lat",))
        st.long_name = "station name"
        for i in range(7):
            st[i] = "st-%d" % i if i != 3 else "Zürich"
        g = d.createGroup("ocean")
        g.createDimension("depth", 4)
        dp = g.createVariable("depth", "f8", ("depth",))
        dp[:] = [0, 10, 50, 100]
        s = g.createVariable("salinity", "f8", ("depth", "lat"))
        s.units = "psu"
        s[:] = np.arange(28.0).reshape(4, 7)
        d.title = "synthetic climate"
        d.history = "made by test_iowarp.py"
        d.close()
    h5 = os.path.join(BACKING, "lab.h5")
    if not os.path.exists(h5):
        with h5py.File(h5, "w") as f:
            f.attrs["experiment"] = "run 7"
            f.attrs["scale"] = np.array([1.5, 2.5])
            x = f.create_dataset("x", data=np.arange(5 * 6 * 4, dtype="<i4").reshape(5, 6, 4),
                                 chunks=(2, 3, 4), compression="gzip")
            x.attrs["units"] = "counts"
            f.create_dataset("u8", data=np.arange(10, dtype="u1"))
            f.create_dataset("flag", data=np.array([True, False, True]))
            g = f.create_group("sub")
            g.create_dataset("y", data=np.linspace(0, 1, 11))
            g.create_dataset("names", data=np.array([b"ab", b"cd", b"ef"], dtype="S2"))
    return nc, h5


SELECTIONS = [
    (), (0,), (-1,), (slice(None),), (slice(1, 4),), (slice(None, None, 2),),
    (slice(None, None, -1),), (slice(4, 0, -2),), (2, slice(1, 5), 3), (Ellipsis, 1),
    (slice(1, 3), Ellipsis), (slice(3, 3),), (slice(5, 1),), (1, -1, slice(None, None, 3)),
]


class TestOmni(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nc, cls.h5 = _make_files()

    def test_netcdf_values(self):
        import netCDF4

        ds = iowarp.omni.open(os.path.join(MOUNT, "climate.nc"))
        self.assertEqual(ds.format, "netcdf4")
        self.assertEqual(ds.dims, {"time": 6, "lat": 7, "lon": 9})
        self.assertEqual(ds.attrs["title"], "synthetic climate")
        ref = netCDF4.Dataset(self.nc)
        ref.set_auto_maskandscale(False)
        for name in ["time", "lat", "lon", "temperature", "precip"]:
            v, r = ds[name], ref[name]
            self.assertEqual(v.shape, r.shape, name)
            self.assertEqual(v.dims, r.dimensions, name)
            self.assertEqual(v.dtype, r.dtype, name)
            for k in r.ncattrs():
                np.testing.assert_array_equal(v.attrs[k], r.getncattr(k), "%s.%s" % (name, k))
            for sel in SELECTIONS:
                sel = sel[:v.ndim] if sel and sel[0] is not Ellipsis else sel
                want = np.asarray(r[:])[sel] if sel else np.asarray(r[:])
                got = v[sel] if sel else v[...]
                self.assertEqual(got.shape, want.shape, (name, sel))
                np.testing.assert_array_equal(got, want, "%s%r" % (name, sel))
        self.assertEqual(ds["station"].dtype, object)
        self.assertEqual(list(ds["station"][2:5]), ["st-2", "Zürich", "st-4"])
        # raw=False: the values decoded as xarray decodes them by default.
        import xarray as xr
        with xr.open_dataset(self.nc) as xref:
            for name in ["time", "temperature", "precip"]:
                want = xref[name].values
                got = ds[name].read((), raw=False)
                self.assertEqual(got.dtype, want.dtype, name)
                np.testing.assert_array_equal(got, want, name)
                sel = (1, slice(2, 5)) if want.ndim > 1 else (slice(2, 5),)
                np.testing.assert_array_equal(ds[name].read(sel, raw=False), want[sel], name)
        self.assertEqual(ds["station"][-1], "st-6")
        sal = ds["/ocean/salinity"]
        np.testing.assert_array_equal(sal[1:3, ::3], ref["ocean"]["salinity"][1:3, ::3])
        self.assertEqual(ds.group("ocean").dims, {"depth": 4})
        self.assertEqual([v.path for v in ds.walk()][-2:], ["/ocean/depth", "/ocean/salinity"])
        ref.close()

    def test_hdf5_values(self):
        import h5py

        ds = iowarp.omni.open(os.path.join(MOUNT, "lab.h5"))
        with h5py.File(self.h5, "r") as f:
            self.assertEqual(ds.attrs["experiment"], "run 7")
            np.testing.assert_array_equal(ds.attrs["scale"], f.attrs["scale"])
            x = ds["x"]
            self.assertEqual(x.chunks, (2, 3, 4))
            self.assertEqual(x.attrs["units"], "counts")
            for sel in SELECTIONS:
                want = f["x"][()][sel] if sel else f["x"][()]
                np.testing.assert_array_equal(x[sel] if sel else x[...], want, repr(sel))
            np.testing.assert_array_equal(ds["u8"][::3], f["u8"][::3])
            np.testing.assert_array_equal(ds["flag"][...], f["flag"][()])
            np.testing.assert_array_equal(ds["sub/y"][2:9:2], f["sub/y"][2:9:2])
            np.testing.assert_array_equal(ds["/sub/names"][...], f["sub/names"][()])
            np.testing.assert_array_equal(np.asarray(ds["x"]), f["x"][()])
        with self.assertRaises(IndexError):
            ds["x"][5]
        with self.assertRaises(TypeError):
            ds["x"][[1, 2]]

    def test_open_errors(self):
        with self.assertRaises(FileNotFoundError) as cm:
            iowarp.omni.open("/tmp")
        self.assertIn("iowarp mount", str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            iowarp.omni.open(os.path.join(MOUNT, "no-such.nc"))
        with self.assertRaises(KeyError):
            iowarp.omni.open(os.path.join(MOUNT, "lab.h5"))["nope"]

    def test_assimilated(self):
        # A file outside the mount, assimilated by name: opened by name.
        import shutil
        import subprocess
        import tempfile

        import netCDF4
        import xarray as xr

        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        out = os.path.join(tmp, "outside.nc")
        with netCDF4.Dataset(out, "w") as d:
            d.createDimension("x", 6)
            v = d.createVariable("wind", "f4", ("x",))
            v.units = "m s-1"
            v[:] = np.arange(6) * 1.5
        subprocess.run([os.environ["IOWARP_TEST_BIN"], "assimilate", out, "--name", "pyoutside"],
                       check=True, capture_output=True)
        ds = iowarp.omni.open("pyoutside")
        self.assertEqual(ds.path, out)
        np.testing.assert_array_equal(ds["wind"][::2], [0, 3, 6])
        x = xr.open_dataset("pyoutside", engine="iowarp")
        np.testing.assert_array_equal(x["wind"].values, np.arange(6) * 1.5)
        self.assertEqual(x["wind"].attrs["units"], "m s-1")
        hits = iowarp.search("wind")
        self.assertEqual([(h["dataset"], h["variable"]) for h in hits], [("pyoutside", "/wind")])
        self.assertEqual(hits[0]["path"], os.path.join(MOUNT, ".omni", "pyoutside", "wind"))

    def test_view_path(self):
        ds = iowarp.omni.open(os.path.join(MOUNT, ".omni", "lab.h5"))
        self.assertEqual(ds.path, os.path.join(BACKING, "lab.h5"))
        self.assertEqual(ds["x"][0, 0, 0], 0)


class TestSearch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nc, cls.h5 = _make_files()
        iowarp.omni.open(os.path.join(MOUNT, "climate.nc"))  # opened under .omni: indexed

    def test_search_and_read(self):
        import netCDF4

        hits = iowarp.search("air temperature")
        self.assertTrue(hits, "no hits")
        h = hits[0]
        self.assertEqual((h["dataset"], h["variable"]), ("climate.nc", "/temperature"))
        self.assertEqual(h["path"], os.path.join(MOUNT, ".omni", "climate.nc", "temperature"))
        self.assertEqual(h["units"], "K")
        # lat=-10:10 keeps lat -10, 0, 10 (indices 2..4); the hit's path
        # reads that selection, as netCDF4 does.
        hits = iowarp.search("temperature", within={"lat": (-10, 10), "time": ("2024-01-31", "2024-03-01")})
        self.assertEqual([x["variable"] for x in hits], ["/temperature"])
        path = hits[0]["path"]
        self.assertTrue(path.endswith("@lat=-10:10,time=2024-01-31:2024-03-01"), path)
        with open(os.path.join(path, "shape")) as f:
            shape = tuple(json_load(f))
        raw = os.path.join(path, "data.raw")  # temperature is packed: data holds it decoded
        got = np.fromfile(raw, dtype="<i2").reshape(shape)
        with netCDF4.Dataset(self.nc) as d:
            d.set_auto_maskandscale(False)
            want = d["temperature"][1:3, 2:5, :]
        np.testing.assert_array_equal(got, want)
        self.assertEqual(iowarp.search("temperature", within="lat=40:50"), [])
        with self.assertRaises(iowarp.Error):
            iowarp.search("x", mount="/nonexistent-mount")


def json_load(f):
    import json

    return json.load(f)


class TestXarray(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nc, cls.h5 = _make_files()

    def test_entry_point(self):
        eps = importlib.metadata.entry_points(group="xarray.backends")
        ep = [e for e in eps if e.name == "iowarp"]
        self.assertEqual(len(ep), 1)
        self.assertEqual(ep[0].value, "iowarp.xarray_backend:IowarpBackendEntrypoint")
        import xarray as xr

        self.assertIn("iowarp", xr.backends.list_engines())

    def test_identical_to_netcdf4(self):
        import xarray as xr

        for kw in [{}, {"mask_and_scale": False}, {"decode_times": False}]:
            ds = xr.open_dataset(os.path.join(MOUNT, "climate.nc"), engine="iowarp", **kw)
            ref = xr.open_dataset(self.nc, engine="netcdf4", **kw)
            xr.testing.assert_identical(ds.load(), ref.load())
            self.assertTrue(np.isnan(ds.temperature.values[0, 0, 0]) or kw)
        g = xr.open_dataset(os.path.join(MOUNT, "climate.nc"), engine="iowarp", group="ocean")
        gref = xr.open_dataset(self.nc, engine="netcdf4", group="ocean")
        xr.testing.assert_identical(g.load(), gref.load())

    def test_lazy(self):
        import xarray as xr

        reads = []
        orig = iowarp.omni.Variable.read

        def rec(self, key=(), raw=False):
            out = orig(self, key, raw)
            reads.append((self.name, out.size))
            return out

        iowarp.omni.Variable.read = rec
        try:
            ds = xr.open_dataset(os.path.join(MOUNT, "climate.nc"), engine="iowarp",
                                 drop_variables=["precip"])
            self.assertNotIn("precip", ds)
            # Only the index coordinates were read at open, and the
            # string variable: xarray looks into object arrays for cftime
            # dates (with the netcdf4 engine too).
            self.assertEqual({n for n, _ in reads}, {"time", "lat", "lon", "station"})
            reads.clear()
            ref = xr.open_dataset(self.nc, engine="netcdf4")
            sub = ds.temperature.isel(time=2, lat=slice(1, 4), lon=[0, 5])
            xr.testing.assert_identical(sub.load(), ref.temperature.isel(time=2, lat=slice(1, 4), lon=[0, 5]).load())
            # One basic selection, of at most the bounding box (1x3x6).
            self.assertEqual(len(reads), 1)
            self.assertLessEqual(reads[0][1], 3 * 6)
        finally:
            iowarp.omni.Variable.read = orig

    def test_hdf5(self):
        import xarray as xr

        ds = xr.open_dataset(os.path.join(MOUNT, "lab.h5"), engine="iowarp")
        import h5py

        with h5py.File(self.h5, "r") as f:
            np.testing.assert_array_equal(ds["x"].values, f["x"][()])
            np.testing.assert_array_equal(ds["u8"].values, f["u8"][()])
            self.assertEqual(ds.attrs["experiment"], "run 7")

    def test_csv(self):
        import csv

        import xarray as xr

        p = os.path.join(BACKING, "table.csv")
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "value", "name"])
            for i in range(30):
                w.writerow([i, i * 0.5, "n%d" % i])
        ds = xr.open_dataset(os.path.join(MOUNT, "table.csv"), engine="iowarp")
        np.testing.assert_array_equal(ds["id"].values, np.arange(30))
        np.testing.assert_array_equal(ds["value"].values, np.arange(30) * 0.5)
        self.assertEqual(list(ds["name"].values[28:]), ["n28", "n29"])

    def test_zarr(self):
        import xarray as xr

        store = os.path.join(BACKING, "ocean.zarr")
        ref = xr.open_dataset(self.nc, engine="netcdf4", mask_and_scale=False, decode_times=False)
        if not os.path.exists(store):
            ref.to_zarr(store, consolidated=True)
        ds = xr.open_dataset(os.path.join(MOUNT, "ocean.zarr"), engine="iowarp")
        zref = xr.open_dataset(store, engine="zarr")
        for name in ["temperature", "precip", "lat"]:
            np.testing.assert_array_equal(ds[name].values, zref[name].values, name)


if __name__ == "__main__":
    unittest.main()
