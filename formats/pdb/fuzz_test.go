package pdb

import (
	"os"
	"testing"
)

// checkColumns: an error returns no table; a table has n rows in every
// column.
func checkColumns(t *testing.T, c *columns, err error) {
	if err != nil {
		if c != nil {
			t.Fatalf("error %v with a table", err)
		}
		return
	}
	for _, k := range stringCols {
		if len(c.strs[k]) != c.n {
			t.Fatalf("%s: %d rows of %d", k, len(c.strs[k]), c.n)
		}
	}
	for _, k := range intCols {
		if len(c.ints[k]) != c.n {
			t.Fatalf("%s: %d rows of %d", k, len(c.ints[k]), c.n)
		}
	}
	for _, k := range floatCols {
		if len(c.flts[k]) != c.n {
			t.Fatalf("%s: %d rows of %d", k, len(c.flts[k]), c.n)
		}
	}
}

// FuzzParsePDB: PDB records are bytes anyone wrote. No panic; error ⇒
// no table; a table is rectangular.
func FuzzParsePDB(f *testing.F) {
	if b, err := os.ReadFile("testdata/small.pdb"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("ATOM  A0000  N   GLY A   1      11.104   6.134  -6.504\n"))
	f.Add([]byte("MODEL        2\nHETATM    1 ZN    ZN C 301       0.001   0.002   0.003\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parsePDB(b)
		checkColumns(t, c, err)
	})
}

// FuzzParseCIF: as FuzzParsePDB for mmCIF.
func FuzzParseCIF(f *testing.F) {
	if b, err := os.ReadFile("testdata/small.cif"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("data_x\n_atom_site.id 1\n_atom_site.Cartn_x 1.5(3)\n_atom_site.Cartn_y 2\n_atom_site.Cartn_z ?\n"))
	f.Add([]byte("data_x\nloop_\n_atom_site.Cartn_x\n_atom_site.Cartn_y\n_atom_site.Cartn_z\n;a\n;\n'b' \"c\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCIF(b)
		checkColumns(t, c, err)
	})
}
