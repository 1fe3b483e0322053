package pdb_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/internal/reftest"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/pdb"
	"github.com/iowarp/iowarp/internal/leakcheck"
)

func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run)) }

// table reads every column of r as Go values.
func table(t *testing.T, r omni.Reader) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	for _, v := range r.Dataset().Variables() {
		if v.DType == omni.String {
			ss, err := r.ReadStrings(v.Path, omni.All(v.Shape))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ss {
				out[v.Name] = append(out[v.Name], s)
			}
			continue
		}
		b, err := omni.ReadAll(r, v)
		if err != nil {
			t.Fatal(err)
		}
		vals, _ := omni.Float64s(v.DType, b)
		for _, x := range vals {
			out[v.Name] = append(out[v.Name], x)
		}
	}
	return out
}

// TestGolden: the hand-made structure, as PDB and as mmCIF, reads as
// written in testdata/small.golden.json (values checked by hand against
// the files' columns): altLocs, an insertion code, HETATM, two models.
func TestGolden(t *testing.T) {
	var golden map[string][]any
	b, err := os.ReadFile("testdata/small.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"small.pdb", "small.cif"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			d, err := omni.Detect(path)
			if err != nil || (d.Name != "pdb" && d.Name != "mmcif") {
				t.Fatalf("detected %q, %v", d.Name, err)
			}
			r, err := pdb.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := table(t, r)
			for col, want := range golden {
				if len(got[col]) != len(want) {
					t.Errorf("%s: %d rows, want %d", col, len(got[col]), len(want))
					continue
				}
				for i := range want {
					if got[col][i] != want[i] {
						t.Errorf("%s[%d] = %v, want %v", col, i, got[col][i], want[i])
					}
				}
			}
			if omni.AttrString(r.Dataset().Root.Attrs, "idCode") != "9XYZ" ||
				omni.AttrString(r.Dataset().Root.Attrs, "title") != "A SMALL HAND-MADE STRUCTURE FOR THE IOWARP PDB READER (TWO TITLE LINES)" {
				t.Errorf("attributes %v", r.Dataset().Root.Attrs)
			}
			x, _ := r.Dataset().Var("x")
			h := reftest.Strided(x.Shape)
			sub, err := omni.ReadSlab(r, x, h)
			if err != nil {
				t.Fatal(err)
			}
			vals, _ := omni.Float64s(omni.Float64, sub)
			for k, v := range vals {
				if v != golden["x"][int(h.Start[0]+int64(k)*h.Stride[0])] {
					t.Errorf("strided x[%d] = %v", k, v)
				}
			}
		})
	}
}

// TestBioPDB compares with Bio.PDB (PDBParser, MMCIFParser), when
// python3-biopython is installed: every atom of every model and
// alternate location, coordinates as Bio's float32.
func TestBioPDB(t *testing.T) {
	const python = "/usr/bin/python3"
	if exec.Command(python, "-c", "import Bio.PDB").Run() != nil {
		t.Skip("python3-biopython not installed (optional)")
	}
	for _, name := range []string{"small.pdb", "small.cif"} {
		path := filepath.Join("testdata", name)
		out, err := exec.Command(python, "testdata/biopdb.py", path).Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var bio []map[string]any
		if err := json.Unmarshal(out, &bio); err != nil {
			t.Fatal(err)
		}
		r, err := pdb.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := table(t, r)
		r.Close()
		row := map[[2]float64]int{}
		for i := range got["serial"] {
			row[[2]float64{got["model"][i].(float64), got["serial"][i].(float64)}] = i
		}
		if len(bio) != len(got["serial"]) {
			t.Errorf("%s: %d atoms, Bio.PDB %d", name, len(got["serial"]), len(bio))
		}
		for _, a := range bio {
			i, ok := row[[2]float64{a["model"].(float64), a["serial"].(float64)}]
			if !ok {
				t.Errorf("%s: no atom %v", name, a)
				continue
			}
			for k, want := range a {
				g := got[k][i]
				if f, isF := g.(float64); isF && (k == "x" || k == "y" || k == "z") {
					g = float64(float32(f))
				}
				if f, isF := g.(float64); isF && math.IsNaN(f) {
					continue
				}
				if g != want {
					t.Errorf("%s: atom %v %s = %v, Bio.PDB %v", name, a["serial"], k, g, want)
				}
			}
		}
	}
}

// TestHelperPDB reads through a helper process.
func TestHelperPDB(t *testing.T) {
	dir, _ := filepath.Abs("testdata")
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	ds, err := p.Open(ctx, filepath.Join(dir, "small.cif"))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Format != "mmcif" || len(ds.Variables()) != 16 {
		t.Errorf("format %s, %d variables", ds.Format, len(ds.Variables()))
	}
}

// TestPDBMalformed: the vendored corpus fails with a clear error in a
// helper.
func TestPDBMalformed(t *testing.T) {
	files, _ := filepath.Glob("../testdata/pdb-malformed/*")
	var inputs []string
	for _, f := range files {
		if filepath.Ext(f) == ".pdb" || filepath.Ext(f) == ".cif" {
			inputs = append(inputs, f)
		}
	}
	reftest.Malformed(t, inputs, "")
}
