// Package fits reads FITS files through cfitsio (cgo) as OMNI datasets
// (formats/omni).
//
// Every HDU is a group, named by its EXTNAME (the primary HDU is
// PRIMARY; an HDU without a usable, unique EXTNAME is HDU<n>, n from 0
// as astropy counts), holding the HDU's header cards as attributes
// (keyword → string, bool as int 0/1, integer or float; COMMENT and
// HISTORY cards as one attribute of many strings each; long strings
// with CONTINUE joined) and:
//
//   - an image HDU (the primary array, IMAGE extensions, tile-compressed
//     images, which cfitsio decompresses): the variable "data" of shape
//     (NAXISn, …, NAXIS1) over dimensions naxisN … naxis1, C order as
//     astropy's hdu.data. Values are those astropy shows: BZERO/BSCALE
//     applied (unsigned integers by the BZERO convention stay integers;
//     other scaled images become float32, or float64 for BITPIX 32 and
//     64), BLANK pixels of a scaled image NaN;
//   - a table HDU (BINTABLE or TABLE): one variable per column, named
//     by TTYPEn, over the dimension "row" (and NAME_elem for a column
//     of repeat > 1), TUNITn as units; types L (bool), B, I, J, K
//     (with TZERO unsigned), E, D, A (a fixed-size string per row), C
//     and M (complex, a trailing real_imag axis of size 2). Bit (X) and
//     variable-length (P, Q) columns are left out and listed in the
//     group attribute fits_unsupported_columns.
//
// Files are opened with fits_open_diskfile: no extended file name
// syntax (no "file.fits[1]", no URLs, no shell commands), and read only.
// cfitsio validates headers but, as every C library here, runs only in
// helper processes (formats/helper). Calls into cfitsio hold mu. No C
// type leaves this package.
package fits

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// ErrLibrary wraps errors cfitsio reports.
var ErrLibrary = errors.New("cfitsio")

func init() {
	omni.Register(omni.Driver{
		Name:  "fits",
		Exts:  []string{".fits", ".fit", ".fts", ".fz"},
		Sniff: func(p omni.Probe) bool { return sniff(p.Head) },
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
}

// sniff: a FITS file starts with the SIMPLE card.
func sniff(head []byte) bool {
	return len(head) >= 30 && string(head[:9]) == "SIMPLE  =" && strings.TrimSpace(string(head[9:30])) == "T"
}

// File is an open FITS file. Safe for concurrent use (calls serialise).
type File struct {
	c    *cfile
	ds   *omni.Dataset
	vars map[string]*fvar
}

var _ omni.Reader = (*File)(nil)

// fvar is where a variable's data is.
type fvar struct {
	v      *omni.Variable
	hdu    int // 1-based, as cfitsio counts
	col    int // table column (1-based), 0 for an image
	ctype  int // cfitsio datatype to read with
	parts  int // 2 for complex
	repeat int64
	width  int // string columns
	// scaled: integers in the file read as floats (BSCALE/BZERO, TSCAL/
	// TZERO): undefined values (BLANK, TNULL) become NaN, as in astropy.
	// Otherwise values are copied as they are (NaN payloads and
	// subnormals kept; cfitsio's null checking would flush them).
	scaled bool
}

// maxHDUs and maxCards bound what a header may make the daemon hold.
const (
	maxHDUs  = 4096
	maxCards = 100000
)

// Open reads the structure and headers of the FITS file at p.
func Open(p string) (*File, error) {
	if _, err := os.Stat(p); err != nil {
		return nil, err
	}
	c, err := openFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	f := &File{c: c, ds: omni.NewDataset(p, "fits"), vars: map[string]*fvar{}}
	if err := f.build(); err != nil {
		c.close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if err := f.ds.Validate(); err != nil {
		c.close()
		return nil, fmt.Errorf("%s: %w: %w", p, omni.ErrCorrupt, err)
	}
	return f, nil
}

// build walks the HDUs until the end of the file: an HDU cfitsio cannot
// parse fails the open (fits_get_num_hdus would count only the HDUs
// before it, and hide it).
func (f *File) build() error {
	used := map[string]bool{}
	for i := 1; ; i++ {
		if i > maxHDUs {
			return fmt.Errorf("more than %d HDUs: %w", maxHDUs, omni.ErrNotSupported)
		}
		typ, err := f.c.moveTo(i)
		if errors.Is(err, errEOF) {
			if i == 1 {
				return fmt.Errorf("no HDU: %w", omni.ErrCorrupt)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("HDU %d: %w", i-1, err)
		}
		cards, err := f.c.cards(maxCards)
		if err != nil {
			return fmt.Errorf("HDU %d header: %w", i-1, err)
		}
		g := f.ds.Root.Child(hduName(i, cards, used))
		g.Attrs = cardAttrs(cards)
		if typ == imageHDU {
			err = f.image(g, i)
		} else {
			err = f.table(g, i)
		}
		if err != nil {
			return fmt.Errorf("HDU %d: %w", i-1, err)
		}
	}
}

// hduName is EXTNAME when it is a usable, unused name, else PRIMARY for
// the first HDU and HDU<n>.
func hduName(i int, cards []card, used map[string]bool) string {
	name := ""
	for _, c := range cards {
		if c.key == "EXTNAME" && c.kind == 'C' {
			name = strings.TrimSpace(c.str)
		}
	}
	if i == 1 && name == "" {
		name = "PRIMARY"
	}
	if name == "" || used[name] || !omni.ValidName(name) || strings.ContainsAny(name, "[]@=,") {
		name = "HDU" + strconv.Itoa(i-1)
		for used[name] {
			name += "_"
		}
	}
	used[name] = true
	return name
}

// card is one header card.
type card struct {
	key  string
	kind byte // C string, L logical, I integer, F float, X complex, 0 none
	str  string
	i    int64
	f    float64
}

// cardAttrs makes attributes of cards: the first card of a keyword wins,
// COMMENT and HISTORY gather.
func cardAttrs(cards []card) []omni.Attribute {
	var out []omni.Attribute
	seen := map[string]int{}
	for _, c := range cards {
		if c.key == "" || c.key == "CONTINUE" || c.key == "END" {
			continue
		}
		if c.key == "COMMENT" || c.key == "HISTORY" {
			if j, ok := seen[c.key]; ok {
				out[j].Value = append(out[j].Value.([]string), c.str)
				continue
			}
			seen[c.key] = len(out)
			out = append(out, omni.StringAttr(c.key, c.str))
			continue
		}
		if _, dup := seen[c.key]; dup || c.kind == 0 {
			continue
		}
		seen[c.key] = len(out)
		switch c.kind {
		case 'L', 'I':
			out = append(out, omni.IntAttr(c.key, c.i))
		case 'F':
			out = append(out, omni.FloatAttr(c.key, c.f))
		default:
			out = append(out, omni.StringAttr(c.key, c.str))
		}
	}
	return out
}

// image adds the data variable of the image HDU i (none for NAXIS 0).
func (f *File) image(g *omni.Group, hdu int) error {
	equiv, naxes, err := f.c.imageInfo()
	if err != nil {
		return err
	}
	if len(naxes) == 0 {
		return nil
	}
	dt, ctype, err := imageType(equiv)
	if err != nil {
		return err
	}
	v := &omni.Variable{Name: "data", DType: dt}
	for k := len(naxes) - 1; k >= 0; k-- {
		d := "naxis" + strconv.Itoa(k+1)
		v.Shape = append(v.Shape, naxes[k])
		v.Dims = append(v.Dims, d)
		g.AddDim(&omni.Dimension{Name: d, Size: naxes[k]})
	}
	if u := omni.AttrString(g.Attrs, "BUNIT"); u != "" {
		v.Attrs = append(v.Attrs, omni.StringAttr("units", u))
	}
	g.AddVariable(v)
	bitpix, _ := omni.Attr(g.Attrs, "BITPIX")
	ints, _ := bitpix.Value.([]int64)
	f.vars[v.Path] = &fvar{v: v, hdu: hdu, ctype: ctype, parts: 1, scaled: dt.IsFloat() && len(ints) == 1 && ints[0] > 0}
	return nil
}

// imageType maps the equivalent BITPIX (after BZERO/BSCALE) to the
// OMNI type and the cfitsio datatype to read it with.
func imageType(equiv int) (omni.DType, int, error) {
	switch equiv {
	case 8:
		return omni.Uint8, tByte, nil
	case 10:
		return omni.Int8, tSByte, nil
	case 16:
		return omni.Int16, tShort, nil
	case 20:
		return omni.Uint16, tUShort, nil
	case 32:
		return omni.Int32, tInt, nil
	case 40:
		return omni.Uint32, tUInt, nil
	case 64:
		return omni.Int64, tLongLong, nil
	case 80:
		return omni.Uint64, tULongLong, nil
	case -32:
		return omni.Float32, tFloat, nil
	case -64:
		return omni.Float64, tDouble, nil
	}
	return "", 0, fmt.Errorf("BITPIX %d: %w", equiv, omni.ErrCorrupt)
}

// colType maps a column's equivalent type code to the OMNI type, the
// cfitsio datatype to read and the parts per element.
func colType(code int) (omni.DType, int, int, bool) {
	switch code {
	case tLogical:
		return omni.Bool, tLogical, 1, true
	case tByte:
		return omni.Uint8, tByte, 1, true
	case tSByte:
		return omni.Int8, tSByte, 1, true
	case tShort:
		return omni.Int16, tShort, 1, true
	case tUShort:
		return omni.Uint16, tUShort, 1, true
	case tInt, tLong: // J: 32 bits (TLONG is C's long)
		return omni.Int32, tInt, 1, true
	case tUInt, tULong:
		return omni.Uint32, tUInt, 1, true
	case tLongLong:
		return omni.Int64, tLongLong, 1, true
	case tULongLong:
		return omni.Uint64, tULongLong, 1, true
	case tFloat:
		return omni.Float32, tFloat, 1, true
	case tDouble:
		return omni.Float64, tDouble, 1, true
	case tComplex:
		return omni.Float32, tFloat, 2, true
	case tDblComplex:
		return omni.Float64, tDouble, 2, true
	}
	return "", 0, 0, false
}

// table adds one variable per column of the table HDU i.
func (f *File) table(g *omni.Group, hdu int) error {
	nrows, ncols, err := f.c.tableSize()
	if err != nil {
		return err
	}
	g.AddDim(&omni.Dimension{Name: "row", Size: nrows})
	var skipped []string
	names := map[string]bool{"row": true}
	for col := 1; col <= ncols; col++ {
		code, repeat, width, err := f.c.column(col)
		if err != nil {
			return fmt.Errorf("column %d: %w", col, err)
		}
		name := columnName(g.Attrs, col, names)
		fv := &fvar{hdu: hdu, col: col, repeat: repeat, width: width, parts: 1}
		v := &omni.Variable{Name: name, Shape: []int64{nrows}, Dims: []string{"row"}}
		switch dt, ctype, parts, ok := colType(code); {
		case code == tString && (repeat == int64(width) || repeat == 1) && width > 0:
			v.DType, fv.ctype, fv.repeat = omni.FixedString(width), tString, 1
		case ok && repeat > 0:
			v.DType, fv.ctype, fv.parts = dt, ctype, parts
			if repeat > 1 {
				axes := tdim(omni.AttrString(g.Attrs, "TDIM"+strconv.Itoa(col)), repeat)
				for k, n := range axes {
					d := name + "_elem"
					if len(axes) > 1 {
						d += strconv.Itoa(k)
					}
					v.Shape, v.Dims = append(v.Shape, n), append(v.Dims, d)
					g.AddDim(&omni.Dimension{Name: d, Size: n})
				}
			}
			if parts == 2 {
				v.Shape, v.Dims = append(v.Shape, 2), append(v.Dims, "real_imag")
				g.AddDim(&omni.Dimension{Name: "real_imag", Size: 2})
			}
		default:
			skipped = append(skipped, fmt.Sprintf("%s: type %d repeat %d", name, code, repeat))
			continue
		}
		names[name] = true
		if u := omni.AttrString(g.Attrs, "TUNIT"+strconv.Itoa(col)); u != "" {
			v.Attrs = append(v.Attrs, omni.StringAttr("units", u))
		}
		if tf := omni.AttrString(g.Attrs, "TFORM"+strconv.Itoa(col)); tf != "" {
			v.Attrs = append(v.Attrs, omni.StringAttr("fits_tform", tf))
			fv.scaled = v.DType.IsFloat() && strings.ContainsAny(strings.ToUpper(tf), "BIJK")
		}
		g.AddVariable(v)
		fv.v = v
		f.vars[v.Path] = fv
	}
	if len(skipped) > 0 {
		g.Attrs = append(g.Attrs, omni.StringAttr("fits_unsupported_columns", skipped...))
	}
	return nil
}

// tdim returns the axes (C order) of a column's cells from its TDIMn
// "(3,2)" (Fortran order), or [repeat] without a TDIM that fits.
func tdim(s string, repeat int64) []int64 {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return []int64{repeat}
	}
	var axes []int64
	n := int64(1)
	for _, f := range strings.Split(s[1:len(s)-1], ",") {
		k, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || k <= 0 || n > repeat/k || len(axes) >= 32 {
			return []int64{repeat}
		}
		n *= k
		axes = append([]int64{k}, axes...)
	}
	if n != repeat {
		return []int64{repeat}
	}
	return axes
}

// columnName is TTYPEn when usable and unused, else col<n>.
func columnName(attrs []omni.Attribute, col int, used map[string]bool) string {
	name := strings.TrimSpace(omni.AttrString(attrs, "TTYPE"+strconv.Itoa(col)))
	if name == "" || used[name] || !omni.ValidName(name) || strings.ContainsAny(name, "[]@=,") {
		name = "col" + strconv.Itoa(col)
		for used[name] {
			name += "_"
		}
	}
	return name
}

// Dataset returns the tree.
func (f *File) Dataset() *omni.Dataset { return f.ds }

// ReadInto reads the selection h of the variable at p into dst.
func (f *File) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	fv, err := f.lookup(p, h)
	if err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, fv.v, h, dst); err != nil {
		return err
	}
	if h.Len() == 0 {
		return nil
	}
	if fv.col == 0 {
		return f.c.readImage(fv, h, dst)
	}
	return f.c.readColumn(fv, h, dst)
}

// ReadStrings: FITS strings are fixed-size (S<n>), read by ReadInto.
func (f *File) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	fv, err := f.lookup(p, h)
	if err != nil {
		return nil, err
	}
	return nil, omni.CheckReadStrings(p, fv.v)
}

func (f *File) lookup(p string, h omni.Hyperslab) (*fvar, error) {
	v, err := f.ds.Var(p)
	if err != nil {
		return nil, err
	}
	fv := f.vars[v.Path]
	if fv == nil {
		return nil, fmt.Errorf("%s: %w", p, omni.ErrNotFound)
	}
	return fv, h.Check(v.Shape)
}

// Close closes the file.
func (f *File) Close() error { return f.c.close() }
