package numpy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/internal/reftest"
	"github.com/iowarp/iowarp/formats/numpy"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

var fx = reftest.Fixtures{Name: "npy", Probe: "import numpy", Missing: "python3-numpy"}

func TestMain(m *testing.M) {
	code := leakcheck.Run(m.Run)
	fx.Remove()
	os.Exit(code)
}

// fixtures runs testdata/make.py (numpy) once into a temporary directory.
func fixtures(t *testing.T) string {
	t.Helper()
	return fx.Dir(t)
}

// reference reads NAME.want, .shape and .dtype.
func reference(t *testing.T, dir, name string) (want []byte, shape []int64, dt string) {
	t.Helper()
	read := func(ext string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name+ext))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want = read(".want")
	shape = []int64{}
	if s := string(read(".shape")); s != "" {
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.ParseInt(f, 10, 64)
			shape = append(shape, n)
		}
	}
	return want, shape, string(read(".dtype"))
}

func checkVar(t *testing.T, r omni.Reader, v *omni.Variable, dir, name string) {
	t.Helper()
	want, shape, dt := reference(t, dir, name)
	if !slices.Equal(v.Shape, shape) || string(v.DType) != dt {
		t.Errorf("%s: %s %v, numpy says %s %v", name, v.DType, v.Shape, dt, shape)
		return
	}
	if v.DType == omni.String {
		ss, err := r.ReadStrings(v.Path, omni.All(v.Shape))
		if err != nil || strings.Join(ss, "\n") != string(want) {
			t.Errorf("%s: strings %q, %v; numpy %q", name, ss, err, want)
		}
		return
	}
	reftest.CheckRead(t, r, v, want)
}

// TestNpyReference: every .npy numpy writes (every numeric dtype, both
// byte orders, C and Fortran order, scalars, empty arrays, header
// versions 2 and 3, datetimes, strings) reads as numpy.load reads it,
// whole and strided.
func TestNpyReference(t *testing.T) {
	dir := fixtures(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.npy"))
	if len(files) < 60 {
		t.Fatalf("%d fixtures", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".npy")
		t.Run(name, func(t *testing.T) { checkNpy(t, dir, f, name) })
	}
}

func checkNpy(t *testing.T, dir, f, name string) {
	d, err := omni.Detect(f)
	if err != nil || d.Name != "npy" {
		t.Errorf("detected %q, %v", d.Name, err)
	}
	r, err := numpy.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v, err := r.Dataset().Var(numpy.ArrayName)
	if err != nil {
		t.Fatal(err)
	}
	if omni.AttrString(v.Attrs, "numpy_dtype") == "" {
		t.Error("no numpy_dtype attribute")
	}
	checkVar(t, r, v, dir, name)
}

// TestNpzReference: np.savez and np.savez_compressed archives, each
// member a variable ("grid/lat" in a group).
func TestNpzReference(t *testing.T) {
	dir := fixtures(t)
	for _, arch := range []string{"arch.npz", "archz.npz"} {
		r, err := numpy.Open(filepath.Join(dir, arch))
		if err != nil {
			t.Fatal(err)
		}
		vars := r.Dataset().Variables()
		if len(vars) != 5 || r.Dataset().Format != "npz" {
			t.Errorf("%s: %d variables, format %s", arch, len(vars), r.Dataset().Format)
		}
		for _, v := range vars {
			checkVar(t, r, v, dir, "arch."+strings.ReplaceAll(v.Path[1:], "/", "~"))
		}
		r.Close()
	}
}

// TestHelperNumpy reads through a helper process, as the views do.
func TestHelperNumpy(t *testing.T) {
	dir := fixtures(t)
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	for _, name := range []string{"be_c16_F", "le_f2", "archz.npz"} {
		f := filepath.Join(dir, name)
		if !strings.HasSuffix(name, ".npz") {
			f += ".npy"
		}
		ds, err := p.Open(ctx, f)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, v := range ds.Variables() {
			ref := name
			if strings.HasSuffix(name, ".npz") {
				ref = "arch." + strings.ReplaceAll(v.Path[1:], "/", "~")
			}
			want, _, _ := reference(t, dir, ref)
			got, err := p.ReadAll(ctx, f, v)
			if err != nil || string(got) != string(want) {
				t.Errorf("%s %s: %d bytes, %v", name, v.Path, len(got), err)
			}
		}
	}
}

// TestNumpyMalformed: the vendored corpus (formats/testdata/npy-malformed)
// fails to open or read in a helper with a clear error.
func TestNumpyMalformed(t *testing.T) {
	files, _ := filepath.Glob("../testdata/npy-malformed/*.np?")
	reftest.Malformed(t, files, "")
}

// TestNumpyMutants: 60 seeded mutants each of a Fortran-order complex
// .npy and of the compressed archive, read in a helper: each ends in an
// error or in data, and where numpy.load reads an array too, the bytes
// are numpy's.
func TestNumpyMutants(t *testing.T) {
	dir := fixtures(t)
	mdir := t.TempDir()
	compared := 0
	for i, name := range []string{"be_c16_F.npy", "le_i4.npy", "archz.npz"} {
		ms := reftest.Mutants(t, filepath.Join(dir, name), mdir, 60, uint64(i+1))
		reftest.Reference(t, "testdata/ref_mutants.py", ms)
		for _, m := range ms {
			for p, got := range m.Data {
				want, err := os.ReadFile(reftest.RefPath(m, p, ".want"))
				if err != nil {
					continue // numpy refused it
				}
				compared++
				if string(got) != string(want) {
					t.Errorf("%s %s: %d bytes differ from numpy's %d", filepath.Base(m.Path), p, len(got), len(want))
				}
			}
		}
	}
	t.Logf("%d arrays of mutants compared with numpy", compared)
}
