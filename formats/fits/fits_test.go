package fits_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/formats/fits"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/internal/reftest"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

var fx = reftest.Fixtures{Name: "fits", Probe: "import astropy.io.fits, numpy", Missing: "python3-astropy"}

func TestMain(m *testing.M) {
	code := leakcheck.Run(m.Run)
	fx.Remove()
	os.Exit(code)
}

// fixtures runs testdata/make.py (astropy) once.
func fixtures(t *testing.T) string {
	t.Helper()
	return fx.Dir(t)
}

type hduMeta struct {
	Group   string         `json:"group"`
	Cards   map[string]any `json:"cards"`
	Comment []string       `json:"comment"`
	History []string       `json:"history"`
	Vars    []struct {
		Path  string  `json:"path"`
		DType string  `json:"dtype"`
		Shape []int64 `json:"shape"`
	} `json:"vars"`
}

func meta(t *testing.T, dir, name string) []hduMeta {
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var m []hduMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFITSReference: images (BZERO unsigned, BSCALE/BLANK scaled,
// 3-D, int8, float64, tile-compressed) and tables (binary of every
// column type, vector and TDIM columns; ASCII) read as astropy reads
// them: HDU groups named as astropy names them, header cards as
// attributes, every variable's bytes, whole and strided.
func TestFITSReference(t *testing.T) {
	dir := fixtures(t)
	for _, name := range []string{"images", "tables"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".fits")
			if d, err := omni.Detect(path); err != nil || d.Name != "fits" {
				t.Fatalf("detected %q, %v", d.Name, err)
			}
			f, err := fits.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			ds := f.Dataset()
			m := meta(t, dir, name)
			if len(ds.Root.Groups) != len(m) {
				t.Fatalf("%d groups, astropy has %d HDUs", len(ds.Root.Groups), len(m))
			}
			n := 0
			for i, h := range m {
				g := ds.Root.Groups[i]
				if g.Name != h.Group {
					t.Errorf("HDU %d: group %q, want %q", i, g.Name, h.Group)
				}
				checkCards(t, g, h)
				if len(g.Variables) != len(h.Vars) {
					t.Errorf("%s: %d variables, astropy %d", g.Name, len(g.Variables), len(h.Vars))
				}
				for _, hv := range h.Vars {
					v, err := ds.Var(hv.Path)
					if err != nil {
						t.Error(err)
						continue
					}
					if string(v.DType) != hv.DType || !slices.Equal(v.Shape, hv.Shape) {
						t.Errorf("%s: %s %v, astropy %s %v", v.Path, v.DType, v.Shape, hv.DType, hv.Shape)
						continue
					}
					want, err := os.ReadFile(filepath.Join(dir, name+"."+strings.ReplaceAll(hv.Path[1:], "/", "~")+".bin"))
					if err != nil {
						t.Fatal(err)
					}
					reftest.CheckRead(t, f, v, want)
					n++
				}
			}
			if n < 5 {
				t.Errorf("%d variables compared", n)
			}
		})
	}
}

func checkCards(t *testing.T, g *omni.Group, h hduMeta) {
	t.Helper()
	for k, want := range h.Cards {
		a, ok := omni.Attr(g.Attrs, k)
		if !ok {
			t.Errorf("%s: no attribute %s", g.Name, k)
			continue
		}
		var got any
		switch v := a.Value.(type) {
		case []int64:
			got = float64(v[0])
		case []float64:
			got = v[0]
		case []string:
			got = v[0]
		}
		if got != want {
			t.Errorf("%s: %s = %v (%T), astropy %v", g.Name, k, got, got, want)
		}
	}
	for k, want := range map[string][]string{"COMMENT": h.Comment, "HISTORY": h.History} {
		a, _ := omni.Attr(g.Attrs, k)
		got, _ := a.Value.([]string)
		if len(want) > 0 && !slices.Equal(got, want) {
			t.Errorf("%s: %s %q, astropy %q", g.Name, k, got, want)
		}
	}
}

// TestHelperFITS reads through a helper process, as the views do.
func TestHelperFITS(t *testing.T) {
	dir := fixtures(t)
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	path := filepath.Join(dir, "images.fits")
	ds, err := p.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ds.Var("/COMP/data")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "images.COMP~data.bin"))
	if got, err := p.ReadAll(ctx, path, v); err != nil || string(got) != string(want) {
		t.Errorf("%s: %d bytes, %v", v.Path, len(got), err)
	}
}

// TestFITSMalformed: the vendored corpus fails in a helper with a clear
// error; the helper pool then still reads a good file.
func TestFITSMalformed(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fits-malformed/*.fits")
	reftest.Malformed(t, files, "")
}

// TestFITSMutants: 50 seeded mutants of each fixture, opened and read
// in a helper: each ends in an error or in data, in time, and where
// astropy reads a variable too, its bytes equal astropy's (strings up to
// their first NUL, which ends a FITS string: astropy keeps what follows).
func TestFITSMutants(t *testing.T) {
	dir := fixtures(t)
	mdir := t.TempDir()
	compared := 0
	for i, name := range []string{"images.fits", "tables.fits"} {
		ms := reftest.Mutants(t, filepath.Join(dir, name), mdir, 50, uint64(i+1))
		reftest.Reference(t, "testdata/ref_mutants.py", ms)
		for _, m := range ms {
			for p, got := range m.Data {
				want, err := os.ReadFile(reftest.RefPath(m, p, ".bin"))
				if err != nil {
					continue // astropy did not read this variable (or named it otherwise)
				}
				compared++
				if dt := m.Vars[p].DType; dt.IsString() {
					got, want = cutNUL(got, dt.Size()), cutNUL(want, dt.Size())
				}
				if string(got) != string(want) {
					t.Errorf("%s %s: %d bytes differ from astropy's %d", filepath.Base(m.Path), p, len(got), len(want))
				}
			}
		}
	}
	t.Logf("%d variables of mutants compared with astropy", compared)
}

// cutNUL clears each n-byte string of b from its first NUL on.
func cutNUL(b []byte, n int) []byte {
	b = slices.Clone(b)
	for off := 0; off+n <= len(b); off += n {
		if i := slices.Index(b[off:off+n], 0); i >= 0 {
			clear(b[off+i : off+n])
		}
	}
	return b
}
