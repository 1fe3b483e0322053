package helper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/internal/fixture"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		fixture.Cleanup()
		return code
	}))
}

// Test-only drivers, present in the helper processes too (they are this
// test binary; package variables are initialised before the init that
// turns the process into a helper): they misbehave as libhdf5 does on
// crafted files.
var _ = registerMisbehave()

func registerMisbehave() bool {
	misbehave := func(p string) (omni.Reader, error) {
		switch filepath.Ext(p) {
		case ".segv":
			syscall.Kill(os.Getpid(), syscall.SIGSEGV)
		case ".abort":
			syscall.Kill(os.Getpid(), syscall.SIGABRT)
		case ".exit":
			os.Exit(3)
		case ".hang":
			select {}
		}
		return nil, errors.New("unreachable")
	}
	omni.Register(omni.Driver{Name: "misbehave", Priority: 100, Open: misbehave,
		Sniff: func(p omni.Probe) bool { return omni.HasExt(p.Path, ".segv", ".abort", ".exit", ".hang") }})
	return true
}

func newPool(t *testing.T, deadline time.Duration) *Pool {
	p := New(Options{Size: 2, Deadline: deadline, Logf: t.Logf})
	t.Cleanup(func() { p.Close() })
	return p
}

// check is one comparison for compare.py: our bytes (as .npy) against
// the reference library's read of the same variable and slice.
type check struct {
	Src   string  `json:"src"`
	Lib   string  `json:"lib"` // h5py or netCDF4
	Obj   string  `json:"obj"` // dataset / variable path in the file
	Field string  `json:"field,omitempty"`
	NPY   string  `json:"npy"`
	Slice [][]any `json:"slice,omitempty"` // [start, stop, step] per axis
}

const compareScript = `
import json, sys
import numpy as np, h5py, netCDF4
checks = json.load(open(sys.argv[1]))
bad = 0
def norm(a):
    a = np.asarray(a)
    if a.dtype.kind in "OSU":
        return [x.decode() if isinstance(x, bytes) else str(x) for x in a.ravel()], a.shape
    return a, a.shape
for c in checks:
    ours = np.load(c["npy"], mmap_mode="r")
    sl = tuple(slice(*s) for s in c["slice"]) if c.get("slice") else ()
    if c["lib"] == "h5py":
        with h5py.File(c["src"], "r") as f:
            d = f[c["obj"]]
            ref = d[c["field"]] if c.get("field") else d[()]
            ref = np.asarray(ref)[sl] if sl else np.asarray(ref)
    else:
        with netCDF4.Dataset(c["src"]) as f:
            f.set_auto_maskandscale(False)
            f.set_always_mask(False)
            f.set_auto_chartostring(False)
            v = f[c["obj"]]
            ref = np.asarray(v[...])
            ref = ref[sl] if sl else ref
    (a, sa), (b, sb) = norm(ours), norm(ref)
    if sa != sb:
        ok = False
    elif isinstance(a, list):
        ok = a == b
    else:
        ok = a.dtype == b.dtype.newbyteorder("=") and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if not ok:
        bad += 1
        print("MISMATCH", c["src"], c["obj"], c.get("field"), c.get("slice"), sa, sb, getattr(a, "dtype", "str"), getattr(b, "dtype", "str"))
print("checked", len(checks))
sys.exit(1 if bad else 0)
`

func writeNPY(t *testing.T, p string, v *omni.Variable, shape []int64, data []byte) {
	t.Helper()
	dt := v.DType
	if dt == omni.String {
		var err error
		if dt, data, err = omni.FixStrings(data); err != nil {
			t.Fatal(err)
		}
	}
	hdr, err := omni.NPYHeader(dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(hdr, data...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// refObj maps an OMNI variable to the path and field the reference
// library uses (compound fields are members of their group's dataset).
func refObj(ds *omni.Dataset, v *omni.Variable) (string, string) {
	dir := filepath.Dir(v.Path)
	if g, err := ds.Group(dir); err == nil && g.Compound {
		return dir, v.Name
	}
	return v.Path, ""
}

// TestReadMatchesReference reads every variable of every fixture through
// the helpers, whole and sliced, and compares with h5py / netCDF4.
func TestReadMatchesReference(t *testing.T) {
	dir := fixture.Dir(t)
	p := newPool(t, 20*time.Second)
	out := t.TempDir()
	var checks []check
	files := map[string]string{"grid.h5": "h5py", "climate.nc": "netCDF4", "classic.nc": "netCDF4",
		"offset64.nc": "netCDF4", "cdf5.nc": "netCDF4"}
	ctx := context.Background()
	for name, lib := range files {
		src := filepath.Join(dir, name)
		ds, err := p.Open(ctx, src)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		for i, v := range ds.Variables() {
			views := []string{v.Name}
			if len(v.Shape) == 3 {
				views = append(views, v.Name+"[1:5:2,3:17:3,::4]", v.Name+"[-1,:,2:]")
			} else if len(v.Shape) == 1 && v.Shape[0] > 3 {
				views = append(views, v.Name+"[1::2]")
			}
			for j, vs := range views {
				view, err := omni.ParseView(vs)
				if err != nil {
					t.Fatal(err)
				}
				h, err := view.Hyperslab(v.Shape)
				if err != nil {
					t.Fatal(err)
				}
				d, err := p.Read(ctx, src, v, h)
				if err != nil {
					t.Fatalf("read %s %s: %v", name, vs, err)
				}
				npy := filepath.Join(out, strings.NewReplacer(".", "_").Replace(name)+"_"+itoa(i)+"_"+itoa(j)+".npy")
				writeNPY(t, npy, v, h.Count, d.Bytes())
				d.Close()
				obj, field := refObj(ds, v)
				c := check{Src: src, Lib: lib, Obj: obj, Field: field, NPY: npy}
				if j > 0 {
					for k := range h.Count {
						stop := h.Start[k] + h.Count[k]*h.StrideAt(k)
						c.Slice = append(c.Slice, []any{h.Start[k], stop, h.StrideAt(k)})
					}
				}
				checks = append(checks, c)
			}
		}
	}
	b, _ := json.Marshal(checks)
	list := filepath.Join(out, "checks.json")
	os.WriteFile(list, b, 0o644)
	t.Log(strings.TrimSpace(fixture.Run(t, compareScript, list)))
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestSchema checks what the walk found: dimension scales as dimensions
// with coordinates, unlimited dims, compound fields, NeXus classes, typed
// string attributes, NetCDF-3 char arrays.
func TestSchema(t *testing.T) {
	dir := fixture.Dir(t)
	p := newPool(t, 20*time.Second)
	ctx := context.Background()
	ds, err := p.Open(ctx, filepath.Join(dir, "grid.h5"))
	if err != nil {
		t.Fatal(err)
	}
	temp, err := ds.Var("/temperature")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(temp.Dims, ",") != "time,lat,lon" || len(temp.Chunks) != 3 ||
		strings.Join(temp.Filters, ",") != "shuffle,deflate,fletcher32" {
		t.Errorf("temperature: dims %v chunks %v filters %v", temp.Dims, temp.Chunks, temp.Filters)
	}
	if c, err := ds.Coord(temp, 0); err != nil || c.Path != "/time" || !c.IsTime() {
		t.Errorf("time coordinate: %v %v", c, err)
	}
	if a, _ := omni.Attr(temp.Attrs, "valid_range"); a.Type != omni.Int16 || a.Len() != 2 {
		t.Errorf("valid_range %+v", a)
	}
	for _, name := range []string{"title", "fixed", "names", "vnames"} {
		if a, ok := omni.Attr(ds.Root.Attrs, name); !ok || a.Type != omni.String {
			t.Errorf("root attribute %s: %+v", name, a)
		}
	}
	if s := omni.AttrString(ds.Root.Attrs, "names"); s != "a\nbb\nccc" {
		t.Errorf("fixed string array attribute %q", s)
	}
	g, err := ds.Group("/particles")
	if err != nil || !g.Compound || len(g.Variables) != 4 {
		t.Errorf("compound group %+v %v", g, err)
	}
	if g, _ := ds.Group("/entry/instrument/detector"); g == nil || g.NXClass != "NXdetector" {
		t.Errorf("NeXus class: %+v", g)
	}
	if d, err := ds.Dim("/", "phony_dim_1"); err != nil || !d.Unlimited || d.Size != 17 {
		t.Errorf("unlimited series dim: %+v %v", d, err)
	}
	if _, err := ds.Var("/link_to_lat"); err == nil {
		t.Error("soft link followed")
	}
	nc, err := p.Open(ctx, filepath.Join(dir, "classic.nc"))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := nc.Dim("/", "time"); nc.Format != "netcdf3-classic" || err != nil || !d.Unlimited || d.Coord != "/time" {
		t.Errorf("classic: format %s time %+v %v", nc.Format, d, err)
	}
	if v, _ := nc.Var("/name"); v == nil || v.DType != omni.FixedString(1) {
		t.Errorf("char variable %+v", v)
	}
	for name, want := range map[string]string{"offset64.nc": "netcdf3-64bit-offset", "cdf5.nc": "netcdf3-cdf5", "climate.nc": "netcdf4"} {
		if d, err := p.Open(ctx, filepath.Join(dir, name)); err != nil || d.Format != want {
			t.Errorf("%s: format %v, %v", name, d, err)
		}
	}
}

// TestCoordinateSelection compares coordinate filters with xarray .sel.
func TestCoordinateSelection(t *testing.T) {
	dir := fixture.Dir(t)
	if out, err := exec.Command(fixture.Python(t), "-c", "import xarray").CombinedOutput(); err != nil {
		if strings.Contains(string(out), "ModuleNotFoundError") {
			t.Skip("python3-xarray missing (make deps)")
		}
		t.Fatalf("import xarray: %v\n%s", err, out)
	}
	p := newPool(t, 20*time.Second)
	ctx := context.Background()
	cases := []struct{ file, view, sel string }{
		{"climate.nc", "temperature@time=2024-02-01:2024-06-30,lat=-10:10",
			"time=slice('2024-02-01','2024-06-30'), lat=slice(-10,10)"},
		{"climate.nc", "temperature@lon=100:200", "lon=slice(100,200)"},
		{"climate.nc", "temperature@time=2024-03", "time=slice('2024-03','2024-03')"},
	}
	for _, c := range cases {
		src := filepath.Join(dir, c.file)
		ds, err := p.Open(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		view, err := omni.ParseView(c.view)
		if err != nil {
			t.Fatal(err)
		}
		_, h, err := ds.Resolve("/", view, func(v *omni.Variable) ([]byte, error) { return p.ReadAll(ctx, src, v) })
		if err != nil {
			t.Fatalf("%s: %v", c.view, err)
		}
		script := `
import sys, xarray as xr, numpy as np
ds = xr.open_dataset(sys.argv[1])
full = ds.temperature
sub = full.sel(` + c.sel + `)
out = []
for d in full.dims:
    idx = np.nonzero(np.isin(full[d].values, sub[d].values))[0]
    out.append("%d:%d" % (idx[0], len(idx)) if len(idx) else "0:0")
print(",".join(out))
`
		got := make([]string, len(h.Start))
		for i := range h.Start {
			if h.Count[i] == 0 {
				h.Start[i] = 0
			}
			got[i] = itoa(int(h.Start[i])) + ":" + itoa(int(h.Count[i]))
		}
		want := strings.TrimSpace(fixture.Run(t, script, src))
		if strings.Join(got, ",") != want {
			t.Errorf("%s %s: start:count %s, xarray %s", c.file, c.view, strings.Join(got, ","), want)
		}
	}
}

// TestMalformed: crafted and broken files give an error (or a schema)
// within the deadline; helpers that crash or hang are replaced; the
// caller keeps working.
func TestMalformed(t *testing.T) {
	dir := fixture.Dir(t)
	const deadline = 3 * time.Second
	p := newPool(t, deadline)
	ctx := context.Background()
	files := append(fixture.Malformed(t),
		filepath.Join(dir, "truncated.h5"), filepath.Join(dir, "random.h5"), filepath.Join(dir, "lying.nc"))
	good := filepath.Join(dir, "grid.h5")
	for _, f := range files {
		t0 := time.Now()
		ds, err := p.Open(ctx, f)
		if err == nil {
			for _, v := range ds.Variables() { // drive libhdf5 through the data too
				if d, err := p.Read(ctx, f, v, omni.All(v.Shape)); err == nil {
					d.Close()
				}
			}
		}
		el := time.Since(t0)
		t.Logf("%s: %v (%v)", filepath.Base(f), err, el.Round(time.Millisecond))
		if el > 4*deadline {
			t.Errorf("%s took %v", f, el)
		}
		if _, err := p.Open(ctx, good); err != nil {
			t.Fatalf("after %s the pool cannot open a good file: %v", f, err)
		}
	}
	for _, f := range []string{"truncated.h5", "random.h5", "lying.nc"} {
		if _, err := p.Open(ctx, filepath.Join(dir, f)); err == nil {
			t.Errorf("%s opened without error", f)
		}
	}
}

// TestHelperDeath: a helper that crashes, aborts, exits or hangs fails its
// request with ErrCrashed or ErrTimeout in time, and the pool recovers.
func TestHelperDeath(t *testing.T) {
	dir := fixture.Dir(t)
	const deadline = 2 * time.Second
	p := newPool(t, deadline)
	ctx := context.Background()
	tmp := t.TempDir()
	for _, c := range []struct {
		ext  string
		want error
	}{{".segv", ErrCrashed}, {".abort", ErrCrashed}, {".exit", ErrCrashed}, {".hang", ErrTimeout}} {
		f := filepath.Join(tmp, "bad"+c.ext)
		os.WriteFile(f, []byte("x"), 0o644)
		t0 := time.Now()
		_, err := p.Open(ctx, f)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.ext, err, c.want)
		}
		if el := time.Since(t0); el > deadline+2*time.Second {
			t.Errorf("%s: %v", c.ext, el)
		}
		t.Logf("%s: %v", c.ext, err)
		if _, err := p.Open(ctx, filepath.Join(dir, "climate.nc")); err != nil {
			t.Fatalf("pool broken after %s: %v", c.ext, err)
		}
	}
	// A caller's own cancellation also ends a hanging request.
	f := filepath.Join(tmp, "x.hang")
	os.WriteFile(f, []byte("x"), 0o644)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := p.Open(cctx, f); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled hang: %v", err)
	}
	if n := p.Helpers(); n > 2 {
		t.Errorf("%d helpers live, pool size 2", n)
	}
	// Five helpers killed (four deaths, one cancellation); all but the
	// last were replaced.
	if st := p.Stats(); st.Failed != 5 || st.Started < 5 {
		t.Errorf("stats %+v, want 5 failed and at least 5 started", st)
	}
}

// TestConcurrentReads runs reads from many goroutines on two helpers.
func TestConcurrentReads(t *testing.T) {
	dir := fixture.Dir(t)
	p := newPool(t, 20*time.Second)
	ctx := context.Background()
	src := filepath.Join(dir, "climate.nc")
	ds, err := p.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := ds.Var("/temperature")
	want, err := p.ReadAll(ctx, src, v)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				h := omni.All(v.Shape)
				h.Start[0], h.Count[0] = int64(g+i), 1
				d, err := p.Read(ctx, src, v, h)
				if err != nil {
					t.Error(err)
					return
				}
				n := int64(len(d.Bytes()))
				off := int64(g+i) * n
				if string(d.Bytes()) != string(want[off:off+n]) {
					t.Errorf("slab %d differs", g+i)
				}
				d.Close()
			}
		}()
	}
	wg.Wait()
	if _, err := p.Read(ctx, src, v, omni.Hyperslab{Start: []int64{0, 0, 0}, Count: []int64{54, 1, 1}}); !errors.Is(err, omni.ErrInvalid) {
		t.Errorf("out-of-range read: %v", err)
	}
}

// TestServeExitsOnClose: a helper whose pool closed its end of the socket
// exits 0 (a clean close is io.EOF, not an error).
func TestServeExitsOnClose(t *testing.T) {
	parent, child, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	parent.Close()
	if rc := serve(child); rc != 0 {
		t.Fatalf("serve after the pool closed its end: exit %d, want 0", rc)
	}
}

// TestWideGroup: a group of 20,000 datasets in dense link storage (what
// libver="latest" or track_order make) opens within the daemon's view
// deadline with every dataset listed (the walk asked libhdf5 for each
// link name by index, N² on such groups: 5,000 took 18 s, 20,000 over
// 300 s), and each is found by name.
func TestWideGroup(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := exec.Command(py, "-c", "import h5py").CombinedOutput(); err != nil {
		t.Skip("python3 with h5py missing (make deps)")
	}
	const n = 20000
	f := filepath.Join(t.TempDir(), "wide.h5")
	mk := `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    for i in range(int(sys.argv[2])):
        f.create_dataset("d%06d" % i, data=np.arange(3, dtype="i4"))
`
	if out, err := exec.Command(py, "-c", mk, f, strconv.Itoa(n)).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ds, err := newPool(t, 20*time.Second).Open(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ds.Root.Variables); got != n {
		t.Fatalf("%d datasets listed, want %d", got, n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		name := fmt.Sprintf("d%06d", i)
		if v, err := ds.Var("/" + name); err != nil || v.Name != name || v.Shape[0] != 3 {
			t.Fatalf("Var(%s) = %+v, %v", name, v, err)
		}
	}
}
