// Package pdb reads macromolecular structures, PDB files (.pdb, .ent) and
// PDBx/mmCIF files (.cif, .mmcif), as OMNI tables (formats/omni), in pure
// Go: every ATOM and HETATM record is a row of 1-D variables over the
// dimension "atom":
//
//	record     ATOM or HETATM (group_PDB)
//	serial     atom serial number (int64; hybrid-36 past 99999)   id
//	name       atom name                                           label_atom_id
//	altLoc     alternate location                                  label_alt_id
//	resName    residue name                                        label_comp_id
//	chainID    chain                                               auth_asym_id
//	resSeq     residue number (int64)                              auth_seq_id
//	iCode      insertion code                                      pdbx_PDB_ins_code
//	x, y, z    coordinates in Å (float64)                          Cartn_x, Cartn_y, Cartn_z
//	occupancy  (float64)                                           occupancy
//	tempFactor B-factor (float64)                                  B_iso_or_equiv
//	element    element symbol                                      type_symbol
//	charge     formal charge                                       pdbx_formal_charge
//	model      model number (int64; 1 without MODEL records)       pdbx_PDB_model_num
//
// (the mmCIF items of _atom_site on the right, as Bio.PDB's MMCIFParser
// reads them; names other than "name" fall back to their label_/auth_
// twin). Strings have surrounding blanks trimmed; missing numbers ('.',
// '?' or blank) are NaN for floats and 0 for integers. The root's
// attributes hold the entry's idCode, classification and title. A file
// is parsed whole at Open (bounded by maxFile and maxAtoms) and held in
// memory; a line or value that is not what its record says is
// omni.ErrCorrupt naming the line.
//
// A Structure is safe for concurrent use once open.
package pdb

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// AtomDim is the dimension of every column.
const AtomDim = "atom"

// Bounds of what a file may make a helper hold.
const (
	maxFile  = 1 << 30
	maxAtoms = 1 << 26
)

func init() {
	omni.Register(omni.Driver{
		Name:  "pdb",
		Exts:  []string{".pdb", ".ent"},
		Sniff: sniffPDB,
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
	omni.Register(omni.Driver{
		Name:  "mmcif",
		Exts:  []string{".cif", ".mmcif"},
		Sniff: sniffCIF,
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
}

var pdbRecords = []string{"HEADER", "TITLE ", "COMPND", "REMARK", "CRYST1", "ATOM  ", "HETATM", "MODEL ", "EXPDTA", "AUTHOR", "SOURCE", "KEYWDS"}

func sniffPDB(p omni.Probe) bool {
	if p.Head == nil {
		return false
	}
	if strings.HasPrefix(string(p.Head), "HEADER    ") {
		return true
	}
	if !omni.HasExt(p.Path, ".pdb", ".ent") {
		return false
	}
	for _, r := range pdbRecords {
		if strings.HasPrefix(string(p.Head), r) {
			return true
		}
	}
	return false
}

func sniffCIF(p omni.Probe) bool {
	if p.Head == nil || !omni.HasExt(p.Path, ".cif", ".mmcif") {
		return false
	}
	for _, line := range strings.SplitN(string(p.Head), "\n", 64) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		return strings.HasPrefix(line, "data_")
	}
	return false
}

// columns is the parsed table.
type columns struct {
	strs  map[string][]string
	ints  map[string][]int64
	flts  map[string][]float64
	n     int
	attrs []omni.Attribute
}

var (
	stringCols = []string{"record", "name", "altLoc", "resName", "chainID", "iCode", "element", "charge"}
	intCols    = []string{"serial", "resSeq", "model"}
	floatCols  = []string{"x", "y", "z", "occupancy", "tempFactor"}
	// order is the order of the variables.
	order = []string{"record", "serial", "name", "altLoc", "resName", "chainID", "resSeq", "iCode",
		"x", "y", "z", "occupancy", "tempFactor", "element", "charge", "model"}
)

func newColumns() *columns {
	c := &columns{strs: map[string][]string{}, ints: map[string][]int64{}, flts: map[string][]float64{}}
	return c
}

// atom is one row.
type atom struct {
	s map[string]string
	i map[string]int64
	f map[string]float64
}

func (c *columns) add(a atom) error {
	if c.n >= maxAtoms {
		return fmt.Errorf("more than %d atoms: %w", maxAtoms, omni.ErrNotSupported)
	}
	for _, k := range stringCols {
		c.strs[k] = append(c.strs[k], a.s[k])
	}
	for _, k := range intCols {
		c.ints[k] = append(c.ints[k], a.i[k])
	}
	for _, k := range floatCols {
		c.flts[k] = append(c.flts[k], a.f[k])
	}
	c.n++
	return nil
}

// Structure is an open PDB or mmCIF file.
type Structure struct {
	ds *omni.Dataset
	c  *columns
}

var _ omni.Reader = (*Structure)(nil)

// Open parses the PDB or mmCIF file at p (mmCIF when its first
// non-comment line starts with data_).
func Open(p string) (*Structure, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxFile {
		return nil, fmt.Errorf("%s: %d bytes (at most %d): %w", p, st.Size(), maxFile, omni.ErrNotSupported)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	format, c := "pdb", (*columns)(nil)
	if isCIF(b) {
		format = "mmcif"
		c, err = parseCIF(b)
	} else {
		c, err = parsePDB(b)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	s := &Structure{ds: omni.NewDataset(p, format), c: c}
	root := s.ds.Root
	root.Attrs = c.attrs
	root.AddDim(&omni.Dimension{Name: AtomDim, Size: int64(c.n)})
	for _, k := range order {
		v := &omni.Variable{Name: k, Shape: []int64{int64(c.n)}, Dims: []string{AtomDim}}
		switch {
		case c.strs[k] != nil || contains(stringCols, k):
			v.DType = omni.String
		case contains(intCols, k):
			v.DType = omni.Int64
		default:
			v.DType = omni.Float64
		}
		if k == "x" || k == "y" || k == "z" {
			v.Attrs = []omni.Attribute{omni.StringAttr("units", "angstrom")}
		}
		root.AddVariable(v)
	}
	if err := s.ds.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isCIF(b []byte) bool {
	for len(b) > 0 {
		i := strings.IndexByte(string(b[:min(len(b), 4096)]), '\n')
		line := b
		if i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		t := strings.TrimSpace(string(line))
		if t == "" || t[0] == '#' {
			continue
		}
		return strings.HasPrefix(t, "data_")
	}
	return false
}

// Dataset returns the table.
func (s *Structure) Dataset() *omni.Dataset { return s.ds }

// ReadInto reads rows of a numeric column.
func (s *Structure) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	v, err := s.ds.Var(p)
	if err != nil {
		return err
	}
	if err := h.Check(v.Shape); err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, v, h, dst); err != nil {
		return err
	}
	st := h.StrideAt(0)
	for k := int64(0); k < h.Count[0]; k++ {
		i := h.Start[0] + k*st
		switch v.DType {
		case omni.Int64:
			binary.LittleEndian.PutUint64(dst[8*k:], uint64(s.c.ints[v.Name][i]))
		default:
			binary.LittleEndian.PutUint64(dst[8*k:], math.Float64bits(s.c.flts[v.Name][i]))
		}
	}
	return nil
}

// ReadStrings reads rows of a string column.
func (s *Structure) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	v, err := s.ds.Var(p)
	if err != nil {
		return nil, err
	}
	if err := h.Check(v.Shape); err != nil {
		return nil, err
	}
	if err := omni.CheckReadStrings(p, v); err != nil {
		return nil, err
	}
	out := make([]string, h.Count[0])
	for k := range out {
		out[k] = s.c.strs[v.Name][h.Start[0]+int64(k)*h.StrideAt(0)]
	}
	return out, nil
}

// Close is a no-op.
func (s *Structure) Close() error { return nil }
