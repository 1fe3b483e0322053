package fusefs

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// omniNamesMake writes an HDF5 file whose names cannot be path components
// as they are or collide with the entries the views add: "..", invalid
// UTF-8, the view syntax, "schema.json", "attrs", '%'; attributes named
// "a/b", "." and "" (HDF5 allows them, not links with '/').
const omniNamesMake = `
import sys, numpy as np, h5py
f = h5py.File(sys.argv[1], "w")
names = [b"..", b"\xff\xfe", b"a[b]", b"x@y=z", b"schema.json", b"attrs", b"a,b", b"50%", b"plain"]
for i, n in enumerate(names):
    sp = h5py.h5s.create_simple((3,))
    d = h5py.h5d.create(f.id, n, h5py.h5t.NATIVE_INT32, sp)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(3, dtype="i4") + 10 * i)
g = f.create_group("attrs_group")
for n in [b"a/b", b".", b"ok"]:
    a = h5py.h5a.create(g.id, n, h5py.h5t.NATIVE_INT32, h5py.h5s.create_simple((1,)))
    a.write(np.array([7], dtype="i4"))
sub = h5py.h5g.create(f.id, b"..\xff")
h5py.h5d.create(sub, b"attrs", h5py.h5t.NATIVE_INT32, h5py.h5s.create_simple((2,))).write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([5, 6], dtype="i4"))
f.close()
`

// omniNamesCheck reads every dataset through the views under its
// escaped name (the encoding of formats/omni.EscapeName, written again
// here from its documentation) and compares with h5py.
const omniNamesCheck = `
import os, sys, numpy as np, h5py
o, src = sys.argv[1], sys.argv[2]
def esc(b):
    if b == b"": return "%"
    if b in (b".", b".."): return "%2E" * len(b)
    out, i = [], 0
    while i < len(b):
        for n in (4, 3, 2, 1):
            try:
                ch = b[i:i+n].decode("utf-8")
                if len(ch) == 1: break
            except UnicodeDecodeError:
                ch = None
        if ch is None or ch in "%/[]@=,\x00":
            out.append("%%%02X" % b[i]); i += 1
        else:
            out.append(ch); i += len(ch.encode())
    s = "".join(out)
    if b in (b"attrs", b"schema.json"):
        s = "%%%02X" % b[0] + s[1:]
    return s
listed = set(os.listdir(o))
assert "schema.json" in listed and "attrs_group" in listed, listed
f = h5py.File(src)
n = 0
def visit(gid, prefix, rel):
    global n
    for name in gid:
        obj = h5py.h5o.open(gid, name)
        path = os.path.join(rel, esc(name))
        if isinstance(obj, h5py.h5g.GroupID):
            visit(obj, prefix + name + b"/", path)
            continue
        want = np.empty(obj.shape, dtype="i4"); obj.read(h5py.h5s.ALL, h5py.h5s.ALL, want)
        got = np.load(os.path.join(o, path, "data.npy"))
        assert np.array_equal(got, want), (name, got, want)
        n += 1
visit(f.id, b"/", "")
assert n == 10, n
ad = os.path.join(o, "attrs_group", "attrs")
assert sorted(os.listdir(ad)) == sorted(["a%2Fb", "%2E", "ok"]), os.listdir(ad)
assert open(os.path.join(ad, "a%2Fb")).read() == "7\n"
print("ok")
`

// TestOMNINames: names that are no path components (.., invalid UTF-8),
// that hold the view syntax ([ ] @ = ,) or that are the views' own
// entries (schema.json, attrs) are listed and read under their escaped
// form; none makes the file EIO; describe shows both forms.
func TestOMNINames(t *testing.T) {
	py := omniPython(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "names.h5")
	if out, err := exec.Command(py, "-c", omniNamesMake, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	om := newOMNIMount(t)
	copyIn(t, src, filepath.Join(om.dir, "data", "names.h5"))
	ov := filepath.Join(om.dir, ".omni", "data", "names.h5")
	if _, err := os.ReadDir(ov); err != nil {
		t.Fatalf("ls %s: %v", ov, err)
	}
	if out, err := exec.Command(py, "-c", omniNamesCheck, ov, src).CombinedOutput(); err != nil {
		t.Fatalf("views against h5py: %v\n%s", err, out)
	}
	// A table's columns may be named anything: "", "a/b", "..", "attrs".
	if err := os.WriteFile(filepath.Join(om.dir, "data", "names.csv"), []byte(",a/b,..,attrs\n1,2,3,4\n5,6,7,8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tv := filepath.Join(om.dir, ".omni", "data", "names.csv")
	want := map[string]int64{"%": 1, "a%2Fb": 2, "%2E%2E": 3, "%61ttrs": 4}
	got := readDirNames(t, tv)
	for name, first := range want {
		if !slices.Contains(got, name) {
			t.Errorf("ls names.csv = %v, missing %s", got, name)
			continue
		}
		b, err := os.ReadFile(filepath.Join(tv, name, "data"))
		if err != nil || len(b) != 16 || int64(binary.LittleEndian.Uint64(b)) != first || int64(binary.LittleEndian.Uint64(b[8:])) != first+4 {
			t.Errorf("%s/data = %v, %v", name, b, err)
		}
	}
}

// TestOMNIBigAttrs: attributes past what the views hold in memory (more
// than 2^20 elements, or more than 1 MiB) are listed, never dropped:
// attrs/<name> says so and attrs/<name>.npy reads the values on demand,
// equal to h5py's (flattened).
func TestOMNIBigAttrs(t *testing.T) {
	py := omniPython(t)
	dir := t.TempDir()
	src, nc := filepath.Join(dir, "big.h5"), filepath.Join(dir, "big.nc")
	mk := `import sys, numpy as np, h5py
with h5py.File(sys.argv[1], "w", libver="latest") as f: # dense attribute storage
    d = f.create_dataset("v", data=np.arange(4, dtype="f4"))
    d.attrs.create("huge", np.arange((1 << 20) + 5, dtype="f8") * 0.5)
    f.attrs.create("wide", np.arange(300000, dtype="i4").reshape(600, 500))
    f.attrs["small"] = np.int16(3)
import netCDF4
d = netCDF4.Dataset(sys.argv[2], "w")
d.createDimension("x", 3)
d.createVariable("v", "f4", ("x",)).setncattr("huge", np.arange((1 << 20) + 3, dtype="i2"))
d.close()
`
	if out, err := exec.Command(py, "-c", mk, src, nc).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	om := newOMNIMount(t)
	copyIn(t, src, filepath.Join(om.dir, "data", "big.h5"))
	copyIn(t, nc, filepath.Join(om.dir, "data", "big.nc"))
	ov := filepath.Join(om.dir, ".omni", "data", "big.h5")
	check := `import os, sys, numpy as np, h5py
o, src = sys.argv[1], sys.argv[2]
f = h5py.File(src)
va = os.path.join(o, "v", "attrs")
assert sorted(os.listdir(va)) == ["huge", "huge.npy"], os.listdir(va)
assert "read lazily from huge.npy" in open(os.path.join(va, "huge")).read()
got = np.load(os.path.join(va, "huge.npy"))
assert got.dtype == np.float64 and np.array_equal(got, f["v"].attrs["huge"]), got[:4]
assert os.path.getsize(os.path.join(va, "huge.npy")) == 128 + 8 * ((1 << 20) + 5)
ga = os.path.join(o, "attrs")
assert sorted(os.listdir(ga)) == ["small", "wide", "wide.npy"], os.listdir(ga)
got = np.load(os.path.join(ga, "wide.npy"))
assert got.dtype == np.int32 and np.array_equal(got, f.attrs["wide"].ravel())
assert open(os.path.join(ga, "small")).read() == "3\n"
got = np.load(os.path.join(o, "..", "big.nc", "v", "attrs", "huge.npy"))
assert got.dtype == np.int16 and np.array_equal(got, np.arange((1 << 20) + 3, dtype="i2"))
print("ok")
`
	if out, err := exec.Command(py, "-c", check, ov, src).CombinedOutput(); err != nil {
		t.Fatalf("views against h5py: %v\n%s", err, out)
	}
}
