// Package gdal reads the raster and multidimensional formats of GDAL
// (libgdal, cgo) as OMNI datasets (formats/omni), for the files no other
// driver claims: it sniffs last.
//
// Rasters (the classic API): every band is a variable band_<n> of shape
// (y, x) over the dimensions y and x (complex bands a trailing real_imag
// axis of size 2), of the band's type (Byte as uint8, or int8 where
// PIXELTYPE=SIGNEDBYTE; UInt16 … Float64), with the band's description
// as long_name, its nodata value as _FillValue, scale and offset as
// scale_factor and add_offset, its unit as units and its metadata items
// as attributes. A geotransform without rotation gives 1-D coordinate
// variables x and y at pixel centres (as rioxarray), with the
// geotransform itself, the CRS as WKT (crs_wkt) and the driver's name as
// attributes of the root; a rotated geotransform is an attribute only.
//
// Multidimensional (GDAL's multidimensional API, for the drivers that
// have one and that no other driver here reads: HDF4): groups are groups,
// numeric arrays are variables over their GDAL dimensions, attributes
// are attributes; reads are GDALMDArrayRead with the selection's steps.
//
// Formats (Drivers, also the drivers GDALOpenEx may use: no other one is
// ever tried on a file): GeoTIFF/TIFF, Erdas Imagine (HFA), ENVI (open
// the .hdr file; the data file beside it is found by GDAL), PCIDSK, PNG,
// BMP, GIF, JPEG, JPEG 2000 (OpenJPEG), Arc/Info ASCII grid, ERMapper
// .ers, ISIS2/ISIS3, PDS, and HDF4 (multidimensional). A .aux.xml side
// file (GDAL's PAM: georeferencing, nodata, descriptions of a PNG) is
// read as GDAL reads it; datasets are opened read only and nothing is
// ever set on them, so none is written. No network is used.
//
// libgdal, as every C library here, runs only in helper processes
// (formats/helper); every call runs on one OS thread (GDAL's error state
// and PROJ's context are per thread), one at a time. A File is safe for
// concurrent use. No C type leaves this package.
package gdal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// ErrLibrary wraps errors libgdal reports.
var ErrLibrary = errors.New("libgdal")

// Format is one GDAL format this driver reads.
type Format struct {
	Driver string   // GDAL's short name
	Exts   []string // file name extensions
	Multi  bool     // read through the multidimensional API
	// Unlisted: listings of .omni do not show files of these extensions
	// as datasets (most are pictures); their views open by name.
	Unlisted bool
	sniff    func(head []byte, path string) bool
}

func magic(m ...string) func([]byte, string) bool {
	return func(h []byte, _ string) bool {
		for _, s := range m {
			if bytes.HasPrefix(h, []byte(s)) {
				return true
			}
		}
		return false
	}
}

func extAndMagic(exts []string, m ...string) func([]byte, string) bool {
	mg := magic(m...)
	return func(h []byte, p string) bool { return omni.HasExt(p, exts...) && mg(h, p) }
}

// Drivers are the formats read, in sniffing order.
var Drivers = []Format{
	{Driver: "GTiff", Exts: []string{".tif", ".tiff", ".gtiff"}, sniff: magic("II*\x00", "MM\x00*", "II+\x00", "MM\x00+")},
	{Driver: "HFA", Exts: []string{".img"}, sniff: magic("EHFA_HEADER_TAG")},
	{Driver: "ENVI", Exts: []string{".hdr"}, sniff: extAndMagic([]string{".hdr"}, "ENVI")},
	{Driver: "PCIDSK", Exts: []string{".pix"}, sniff: magic("PCIDSK  ")},
	{Driver: "PNG", Unlisted: true, Exts: []string{".png"}, sniff: magic("\x89PNG\r\n\x1a\n")},
	{Driver: "BMP", Unlisted: true, Exts: []string{".bmp"}, sniff: extAndMagic([]string{".bmp"}, "BM")},
	{Driver: "GIF", Unlisted: true, Exts: []string{".gif"}, sniff: magic("GIF87a", "GIF89a")},
	{Driver: "JPEG", Unlisted: true, Exts: []string{".jpg", ".jpeg"}, sniff: magic("\xff\xd8\xff")},
	{Driver: "JP2OpenJPEG", Exts: []string{".jp2", ".j2k"}, sniff: magic("\x00\x00\x00\x0cjP  \r\n\x87\n", "\xff\x4f\xff\x51")},
	{Driver: "AAIGrid", Exts: []string{".asc"}, sniff: extAndMagic([]string{".asc"}, "ncols", "NCOLS", "nrows", "NROWS")},
	{Driver: "ERS", Exts: []string{".ers"}, sniff: extAndMagic([]string{".ers"}, "DatasetHeader Begin")},
	{Driver: "ISIS3", Exts: []string{".cub"}, sniff: func(h []byte, p string) bool { return bytes.Contains(h, []byte("IsisCube")) }},
	{Driver: "ISIS2", Exts: []string{".cub"}, sniff: func(h []byte, p string) bool { return bytes.Contains(h, []byte("^QUBE")) }},
	{Driver: "PDS", Exts: []string{".img", ".lbl"}, sniff: func(h []byte, p string) bool { return bytes.Contains(h, []byte("PDS_VERSION_ID")) }},
	{Driver: "HDF4", Exts: []string{".hdf", ".hdf4", ".h4"}, Multi: true, sniff: magic("\x0e\x03\x13\x01")},
}

func init() {
	var exts []string
	for _, f := range Drivers {
		if !f.Unlisted {
			exts = append(exts, f.Exts...)
		}
	}
	omni.Register(omni.Driver{
		Name:     "gdal",
		Exts:     exts,
		Sniff:    func(p omni.Probe) bool { _, ok := recognise(p.Head, p.Path); return ok },
		Open:     func(p string) (omni.Reader, error) { return Open(p) },
		Priority: -10, // after every other driver: HDF5, NetCDF, GRIB, FITS are theirs
	})
}

func recognise(head []byte, p string) (Format, bool) {
	if head == nil {
		return Format{}, false
	}
	for _, f := range Drivers {
		if f.sniff(head, p) {
			return f, true
		}
	}
	return Format{}, false
}

// File is an open GDAL dataset.
type File struct {
	d      *dataset
	ds     *omni.Dataset
	bands  map[string]*band
	arrays map[string]*mdArray
	coords map[string][]float64
}

type band struct {
	v    *omni.Variable
	n    int // 1-based
	gdt  int // buffer type to read
	size int // bytes of one buffer element
}

var _ omni.Reader = (*File)(nil)

const maxArrays = 100000

// Open opens p with the GDAL driver its first bytes name.
func Open(p string) (*File, error) {
	head, err := readHead(p)
	if err != nil {
		return nil, err
	}
	f, ok := recognise(head, p)
	if !ok {
		return nil, fmt.Errorf("%s: not a format of the gdal driver: %w", p, omni.ErrNotSupported)
	}
	target := p
	if f.Driver == "ENVI" {
		if target, err = enviData(p); err != nil {
			return nil, err
		}
	}
	d, err := openDataset(target, []string{f.Driver}, f.Multi)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	gf := &File{d: d, ds: omni.NewDataset(p, "gdal"), bands: map[string]*band{}, arrays: map[string]*mdArray{}, coords: map[string][]float64{}}
	if f.Multi {
		err = gf.buildMulti(f.Driver)
	} else {
		err = gf.buildRaster()
	}
	if err == nil {
		err = gf.ds.Validate()
	}
	if err != nil {
		d.close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return gf, nil
}

func readHead(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 4096)
	n, _ := f.Read(b)
	return b[:n], nil
}

// enviData is the data file an ENVI header describes: the header's name
// without .hdr, or with .bin, .img, .dat or .raw in its place.
func enviData(hdr string) (string, error) {
	base := strings.TrimSuffix(hdr, filepath.Ext(hdr))
	for _, c := range []string{base, base + ".bin", base + ".img", base + ".dat", base + ".raw", base + ".bil", base + ".bsq", base + ".bip"} {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s: no ENVI data file beside the header: %w", hdr, os.ErrNotExist)
}

// bandType maps a GDAL data type to the OMNI type, the buffer type and
// its size, and whether it is complex.
func bandType(gdt int, signedByte bool) (omni.DType, int, int, bool, error) {
	switch gdt {
	case gdtByte:
		if signedByte {
			return omni.Int8, gdtByte, 1, false, nil
		}
		return omni.Uint8, gdtByte, 1, false, nil
	case gdtUInt16:
		return omni.Uint16, gdt, 2, false, nil
	case gdtInt16:
		return omni.Int16, gdt, 2, false, nil
	case gdtUInt32:
		return omni.Uint32, gdt, 4, false, nil
	case gdtInt32:
		return omni.Int32, gdt, 4, false, nil
	case gdtUInt64:
		return omni.Uint64, gdt, 8, false, nil
	case gdtInt64:
		return omni.Int64, gdt, 8, false, nil
	case gdtFloat32:
		return omni.Float32, gdt, 4, false, nil
	case gdtFloat64:
		return omni.Float64, gdt, 8, false, nil
	case gdtCInt16, gdtCFloat32:
		return omni.Float32, gdtCFloat32, 8, true, nil
	case gdtCInt32, gdtCFloat64:
		return omni.Float64, gdtCFloat64, 16, true, nil
	}
	return "", 0, 0, false, fmt.Errorf("GDAL data type %d: %w", gdt, omni.ErrNotSupported)
}

func (gf *File) buildRaster() error {
	r := gf.d.info()
	root := gf.ds.Root
	root.Attrs = append(root.Attrs, omni.StringAttr("gdal_driver", r.driver))
	root.Attrs = append(root.Attrs, metaAttrs(r.meta)...)
	if r.wkt != "" {
		root.Attrs = append(root.Attrs, omni.StringAttr("crs_wkt", r.wkt))
	}
	root.AddDim(&omni.Dimension{Name: "y", Size: r.ny})
	root.AddDim(&omni.Dimension{Name: "x", Size: r.nx})
	if r.gt != nil {
		root.Attrs = append(root.Attrs, omni.FloatAttr("geotransform", r.gt...))
		if r.gt[2] == 0 && r.gt[4] == 0 {
			gf.addCoord("x", r.nx, r.gt[0], r.gt[1], "x coordinate of pixel centres")
			gf.addCoord("y", r.ny, r.gt[3], r.gt[5], "y coordinate of pixel centres")
		}
	}
	for i, b := range r.bands {
		dt, gdt, size, cplx, err := bandType(b.gdt, b.signedByte)
		if err != nil {
			return fmt.Errorf("band %d: %w", i+1, err)
		}
		v := &omni.Variable{Name: "band_" + strconv.Itoa(i+1), DType: dt, Shape: []int64{r.ny, r.nx}, Dims: []string{"y", "x"}}
		if cplx {
			v.Shape, v.Dims = append(v.Shape, 2), append(v.Dims, "real_imag")
			root.AddDim(&omni.Dimension{Name: "real_imag", Size: 2})
		}
		v.Attrs = bandAttrs(b, dt)
		root.AddVariable(v)
		gf.bands[v.Path] = &band{v: v, n: i + 1, gdt: gdt, size: size}
	}
	return nil
}

func bandAttrs(b bandInfo, dt omni.DType) []omni.Attribute {
	var as []omni.Attribute
	if b.desc != "" {
		as = append(as, omni.StringAttr("long_name", b.desc))
	}
	if b.hasNodata {
		switch {
		case dt.IsFloat():
			as = append(as, omni.FloatAttr("_FillValue", b.nodata))
		case dt.IsSigned() && b.nodata == math.Trunc(b.nodata):
			as = append(as, omni.Attribute{Name: "_FillValue", Type: dt, Value: []int64{int64(b.nodata)}})
		case b.nodata >= 0 && b.nodata == math.Trunc(b.nodata):
			as = append(as, omni.Attribute{Name: "_FillValue", Type: dt, Value: []uint64{uint64(b.nodata)}})
		}
	}
	if b.hasScale && b.scale != 1 {
		as = append(as, omni.FloatAttr("scale_factor", b.scale))
	}
	if b.hasOffset && b.off != 0 {
		as = append(as, omni.FloatAttr("add_offset", b.off))
	}
	if b.units != "" {
		as = append(as, omni.StringAttr("units", b.units))
	}
	return append(as, metaAttrs(b.meta)...)
}

// metaAttrs makes attributes of GDAL metadata items KEY=VALUE.
func metaAttrs(items []string) []omni.Attribute {
	var out []omni.Attribute
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" {
			continue
		}
		out = append(out, omni.StringAttr(k, v))
	}
	return out
}

// addCoord adds the 1-D coordinate variable name of n pixel centres.
func (gf *File) addCoord(name string, n int64, origin, step float64, long string) {
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = origin + (float64(i)+0.5)*step
	}
	v := &omni.Variable{Name: name, DType: omni.Float64, Shape: []int64{n}, Dims: []string{name},
		Attrs: []omni.Attribute{omni.StringAttr("long_name", long)}}
	gf.ds.Root.AddVariable(v)
	gf.coords[v.Path] = vals
	for _, d := range gf.ds.Root.Dims {
		if d.Name == name {
			d.Coord = v.Path
		}
	}
}

func (gf *File) buildMulti(driver string) error {
	arrs, groups, err := gf.d.walk(maxArrays)
	if err != nil {
		return err
	}
	root := gf.ds.Root
	root.Attrs = append([]omni.Attribute{omni.StringAttr("gdal_driver", driver)}, gf.d.groupAttrs()...)
	for _, g := range groups {
		parent, err := gf.ds.Group(g[1])
		if err != nil {
			return err
		}
		parent.Child(filepath.Base(g[0]))
	}
	for _, a := range arrs {
		dt, _, _, cplx, err := bandType(a.gdt, false)
		if err != nil || cplx {
			continue // left out: not a type the views show
		}
		dir, name := filepath.Split(a.path)
		g, err := gf.ds.Group(dir)
		if err != nil {
			return err
		}
		v := &omni.Variable{Name: name, DType: dt, Shape: a.shape, Dims: a.dims, Attrs: a.attrs}
		for i, d := range a.dims {
			if old, err := gf.ds.Dim(dir, d); err != nil || old.Size != a.shape[i] {
				g.AddDim(&omni.Dimension{Name: d, Size: a.shape[i]})
			}
		}
		g.AddVariable(v)
		gf.arrays[v.Path] = a
	}
	return nil
}

// Dataset returns the tree.
func (gf *File) Dataset() *omni.Dataset { return gf.ds }

// ReadInto reads the selection h of the variable at p into dst.
func (gf *File) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	v, err := gf.ds.Var(p)
	if err != nil {
		return err
	}
	if err := h.Check(v.Shape); err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, v, h, dst); err != nil {
		return err
	}
	if h.Len() == 0 {
		return nil
	}
	if c, ok := gf.coords[v.Path]; ok {
		for k := range h.Count[0] {
			binary.LittleEndian.PutUint64(dst[8*k:], math.Float64bits(c[h.Start[0]+k*h.StrideAt(0)]))
		}
		return nil
	}
	if a := gf.arrays[v.Path]; a != nil {
		return gf.d.readArray(a, h, dst)
	}
	b := gf.bands[v.Path]
	if b == nil {
		return fmt.Errorf("%s: %w", p, omni.ErrNotFound)
	}
	return gf.readBand(b, h, dst)
}

// readBand reads a band's selection: one RasterIO of the window when
// every step is 1 and the whole real_imag axis is asked for, else row by
// row, picking the selected columns (and parts).
func (gf *File) readBand(b *band, h omni.Hyperslab, dst []byte) error {
	y0, ny, sy := h.Start[0], h.Count[0], h.StrideAt(0)
	x0, nx, sx := h.Start[1], h.Count[1], h.StrideAt(1)
	allParts := len(h.Start) == 2 || (h.Start[2] == 0 && h.Count[2] == 2)
	if sy == 1 && sx == 1 && allParts {
		return gf.d.readBand(b.n, x0, y0, nx, ny, b.gdt, dst)
	}
	// columns per RasterIO call: spans of at most maxSpan bytes
	per := max(1, (maxSpan/int64(b.size)-1)/sx+1)
	row := make([]byte, min((per-1)*sx+1, (nx-1)*sx+1)*int64(b.size))
	osz := int64(b.v.DType.Size())
	out := dst
	for j := range ny {
		for i0 := int64(0); i0 < nx; i0 += per {
			m := min(per, nx-i0)
			span := (m-1)*sx + 1
			if err := gf.d.readBand(b.n, x0+i0*sx, y0+j*sy, span, 1, b.gdt, row[:span*int64(b.size)]); err != nil {
				return err
			}
			for i := range m {
				e := row[i*sx*int64(b.size):]
				if len(h.Start) == 2 {
					copy(out[:osz], e)
					out = out[osz:]
					continue
				}
				for k := range h.Count[2] {
					part := h.Start[2] + k*h.StrideAt(2)
					copy(out[:osz], e[part*osz:])
					out = out[osz:]
				}
			}
		}
	}
	return nil
}

// maxSpan bounds the row buffer of a strided read.
const maxSpan = 1 << 20

// ReadStrings: no string variables here.
func (gf *File) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	v, err := gf.ds.Var(p)
	if err != nil {
		return nil, err
	}
	return nil, omni.CheckReadStrings(p, v)
}

// Close closes the dataset.
func (gf *File) Close() error {
	gf.d.close()
	return nil
}
