// Package grib reads GRIB files (edition 2, and edition 1) through
// libeccodes (cgo) as OMNI datasets (formats/omni).
//
// Every message is a variable of float32 values (as cfgrib gives them;
// eccodes decodes to double), points missing by the bitmap NaN, named by
// its shortName when that is unique in the file, else
// shortName_typeOfLevel_level, else with _<message number> added. Its
// attributes are cfgrib's: long_name, units, standard_name (eccodes'
// cfName) and GRIB_* keys (paramId, shortName, typeOfLevel, level,
// dataDate, dataTime, stepRange, gridType, centre, edition, message).
// Its grid gives its axes and coordinates, shared by the messages on the
// same grid (the first grid's names have no suffix, the next _1, _2 …):
//
//   - regular_ll, regular_gg, rotated_ll (i fastest): (latitude,
//     longitude), 1-D coordinate variables as cfgrib shows them;
//   - other grids with Nx × Ny points (polar stereographic, Lambert, …):
//     (y, x) with 2-D latitude and longitude variables (the CF
//     coordinates attribute names them);
//   - anything else (reduced Gaussian, unstructured): (values), with
//     latitude and longitude per point.
//
// The file is scanned in Go: each message's "GRIB" start, length and
// "7777" end are checked against the file before eccodes sees its bytes
// (codes_handle_new_from_message_copy), so eccodes never reads outside
// a message. A read decodes the whole message (GRIB packing is not
// addressable), keeping the last one decoded.
//
// libeccodes reads its definitions from /usr/share/eccodes; it runs only
// in helper processes (formats/helper). Calls hold mu. A File is safe
// for concurrent use. No C type leaves this package.
package grib

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/iowarp/iowarp/formats/omni"
)

// ErrLibrary wraps errors libeccodes reports.
var ErrLibrary = errors.New("libeccodes")

var errCorrupt = omni.ErrCorrupt

func init() {
	omni.Register(omni.Driver{
		Name:  "grib",
		Exts:  []string{".grib", ".grib2", ".grb", ".grb2", ".grib1", ".grb1"},
		Sniff: func(p omni.Probe) bool { return sniff(p.Head) },
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
}

// sniff: a GRIB message at the start (edition 1 or 2).
func sniff(head []byte) bool {
	return len(head) >= 8 && string(head[:4]) == "GRIB" && (head[7] == 1 || head[7] == 2)
}

// Bounds on what a file may make a helper hold.
const (
	maxMessages = 100000
	maxPoints   = 1 << 28 // values of one message
	maxMessage  = 1 << 31 // bytes of one message
	searchBlock = 64 << 10
)

// message is one GRIB message of the file.
type message struct {
	off, size int64
	v         *omni.Variable
	points    int64
	// altRows: alternativeRowScanning, odd rows run the other way
	// (boustrophedonic); cfgrib reverses them, so values do too.
	altRows bool
}

// coordVar is a coordinate variable held in memory.
type coordVar struct {
	v    *omni.Variable
	vals []float64
}

// File is an open GRIB file.
type File struct {
	f      *os.File
	ds     *omni.Dataset
	msgs   map[string]*message
	coords map[string]*coordVar

	mu   sync.Mutex // guards last
	last struct {
		m    *message
		vals []float32
	}
}

var _ omni.Reader = (*File)(nil)

// Open scans the GRIB file at p and reads each message's keys and grid.
func Open(p string) (*File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	gf := &File{f: f, ds: omni.NewDataset(p, "grib"), msgs: map[string]*message{}, coords: map[string]*coordVar{}}
	if err := gf.build(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if err := gf.ds.Validate(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: %w", p, omni.ErrCorrupt, err)
	}
	return gf, nil
}

// scan returns the extents of the messages in the file.
func scan(r io.ReaderAt, size int64) ([][2]int64, error) {
	var out [][2]int64
	for off := int64(0); off < size; {
		start, err := findGRIB(r, off, size)
		if err != nil {
			return nil, err
		}
		if start < 0 {
			break
		}
		n, err := messageLen(r, start, size)
		if err != nil {
			return nil, fmt.Errorf("message %d at %d: %w", len(out)+1, start, err)
		}
		if len(out) >= maxMessages {
			return nil, fmt.Errorf("more than %d messages: %w", maxMessages, omni.ErrNotSupported)
		}
		out = append(out, [2]int64{start, n})
		off = start + n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no GRIB message: %w", errCorrupt)
	}
	return out, nil
}

// findGRIB returns the offset of the next "GRIB" at or after off, -1 if none.
func findGRIB(r io.ReaderAt, off, size int64) (int64, error) {
	buf := make([]byte, searchBlock+3)
	for ; off < size; off += searchBlock {
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil && err != io.EOF {
			return 0, err
		}
		for i := 0; i+4 <= n; i++ {
			if buf[i] == 'G' && string(buf[i:i+4]) == "GRIB" {
				return off + int64(i), nil
			}
		}
	}
	return -1, nil
}

// messageLen checks the message at off: its length from section 0 and
// its "7777" end inside the file.
func messageLen(r io.ReaderAt, off, size int64) (int64, error) {
	var h [16]byte
	if _, err := r.ReadAt(h[:], off); err != nil {
		return 0, fmt.Errorf("truncated section 0: %w", errCorrupt)
	}
	var n int64
	switch h[7] {
	case 2:
		u := binary.BigEndian.Uint64(h[8:])
		if u > maxMessage {
			return 0, fmt.Errorf("length %d: %w", u, errCorrupt)
		}
		n = int64(u)
	case 1:
		n = int64(h[4])<<16 | int64(h[5])<<8 | int64(h[6])
	default:
		return 0, fmt.Errorf("GRIB edition %d: %w", h[7], omni.ErrNotSupported)
	}
	if n < 16 || n > size-off {
		return 0, fmt.Errorf("length %d past the end of the file (%d bytes from it): %w", n, size-off, errCorrupt)
	}
	var end [4]byte
	if _, err := r.ReadAt(end[:], off+n-4); err != nil || string(end[:]) != "7777" {
		return 0, fmt.Errorf("no 7777 at the end of %d bytes: %w", n, errCorrupt)
	}
	return n, nil
}

// info is what Open reads of one message.
type info struct {
	keys     map[string]string
	shape    []int64
	kind     int // gridRegular, grid2D, gridPoints
	lat, lon []float64
	points   int64
	altRows  bool
}

const (
	gridRegular = iota
	grid2D
	gridPoints
)

// stringKeys are read as strings for attributes and names.
var stringKeys = []string{"shortName", "name", "units", "cfName", "typeOfLevel", "level", "paramId",
	"dataDate", "dataTime", "stepRange", "gridType", "centre", "edition"}

func (gf *File) build() error {
	st, err := gf.f.Stat()
	if err != nil {
		return err
	}
	ext, err := scan(gf.f, st.Size())
	if err != nil {
		return err
	}
	infos := make([]*info, len(ext))
	for i, e := range ext {
		if infos[i], err = gf.readInfo(e[0], e[1]); err != nil {
			return fmt.Errorf("message %d: %w", i+1, err)
		}
	}
	names := messageNames(infos)
	var grids []*info
	for i, in := range infos {
		k := slices.IndexFunc(grids, func(g *info) bool { return sameGrid(g, in) })
		if k < 0 {
			k = len(grids)
			grids = append(grids, in)
			gf.addGrid(in, k)
		}
		gf.addMessage(in, names[i], i, k, ext[i])
	}
	return nil
}

func (gf *File) readInfo(off, size int64) (*info, error) {
	buf := make([]byte, size)
	if _, err := gf.f.ReadAt(buf, off); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	h, err := newHandleLocked(buf)
	if err != nil {
		return nil, err
	}
	defer h.deleteLocked()
	in := &info{keys: map[string]string{}}
	for _, k := range stringKeys {
		if h.definedLocked(k) {
			if s, err := h.stringLocked(k); err == nil {
				in.keys[k] = s
			}
		}
	}
	n, err := h.longLocked("numberOfPoints")
	if err != nil {
		return nil, err
	}
	if n <= 0 || n > maxPoints {
		return nil, fmt.Errorf("%d points: %w", n, errCorrupt)
	}
	in.points = n
	geti := func(k string) int64 {
		if !h.definedLocked(k) {
			return -1
		}
		v, err := h.longLocked(k)
		if err != nil || v == missingLong {
			return -1
		}
		return v
	}
	lat, err := h.doublesLocked("latitudes", n)
	if err != nil {
		return nil, err
	}
	lon, err := h.doublesLocked("longitudes", n)
	if err != nil {
		return nil, err
	}
	if int64(len(lat)) != n || int64(len(lon)) != n {
		return nil, fmt.Errorf("%d latitudes, %d longitudes for %d points: %w", len(lat), len(lon), n, errCorrupt)
	}
	in.altRows = geti("alternativeRowScanning") == 1
	ni, nj := geti("Ni"), geti("Nj")
	nx, ny := geti("Nx"), geti("Ny")
	switch gt := in.keys["gridType"]; {
	case (gt == "regular_ll" || gt == "regular_gg" || gt == "rotated_ll") && ni > 0 && nj > 0 && ni*nj == n && geti("jPointsAreConsecutive") == 0:
		in.kind, in.shape = gridRegular, []int64{nj, ni}
		in.lat = make([]float64, nj)
		for j := range nj {
			in.lat[j] = lat[j*ni]
		}
		in.lon = lon[:ni]
	case nx > 0 && ny > 0 && nx*ny == n && geti("jPointsAreConsecutive") == 0:
		in.kind, in.shape, in.lat, in.lon = grid2D, []int64{ny, nx}, lat, lon
	default:
		in.kind, in.shape, in.lat, in.lon = gridPoints, []int64{n}, lat, lon
	}
	return in, nil
}

// messageNames: shortName when unique, else shortName_typeOfLevel_level,
// else with the message number.
func messageNames(infos []*info) []string {
	count := func(f func(*info) string) map[string]int {
		m := map[string]int{}
		for _, in := range infos {
			m[f(in)]++
		}
		return m
	}
	short := func(in *info) string {
		s := in.keys["shortName"]
		if s == "" || s == "unknown" || !omni.ValidName(s) {
			s = "param" + in.keys["paramId"]
		}
		return s
	}
	long := func(in *info) string { return short(in) + "_" + in.keys["typeOfLevel"] + "_" + in.keys["level"] }
	ns, nl := count(short), count(long)
	out := make([]string, len(infos))
	for i, in := range infos {
		switch {
		case ns[short(in)] == 1:
			out[i] = short(in)
		case nl[long(in)] == 1:
			out[i] = long(in)
		default:
			out[i] = long(in) + "_" + strconv.Itoa(i+1)
		}
	}
	return out
}

func sameGrid(a, b *info) bool {
	return a.kind == b.kind && slices.Equal(a.shape, b.shape) && slices.Equal(a.lat, b.lat) && slices.Equal(a.lon, b.lon)
}

func suffix(k int) string {
	if k == 0 {
		return ""
	}
	return "_" + strconv.Itoa(k)
}

// gridDims are the axes of grid k's messages.
func gridDims(in *info, k int) []string {
	s := suffix(k)
	switch in.kind {
	case gridRegular:
		return []string{"latitude" + s, "longitude" + s}
	case grid2D:
		return []string{"y" + s, "x" + s}
	}
	return []string{"values" + s}
}

// addGrid declares grid k's dimensions and coordinate variables.
func (gf *File) addGrid(in *info, k int) {
	root := gf.ds.Root
	dims := gridDims(in, k)
	for i, d := range dims {
		root.AddDim(&omni.Dimension{Name: d, Size: in.shape[i]})
	}
	s := suffix(k)
	add := func(name string, dims []string, shape []int64, vals []float64, units, std string) {
		v := &omni.Variable{Name: name, DType: omni.Float64, Shape: shape, Dims: dims,
			Attrs: []omni.Attribute{omni.StringAttr("units", units), omni.StringAttr("standard_name", std), omni.StringAttr("long_name", std)}}
		root.AddVariable(v)
		gf.coords[v.Path] = &coordVar{v: v, vals: vals}
	}
	if in.kind == gridRegular {
		add("latitude"+s, dims[:1], in.shape[:1], in.lat, "degrees_north", "latitude")
		add("longitude"+s, dims[1:], in.shape[1:], in.lon, "degrees_east", "longitude")
		for i, d := range root.Dims {
			if d.Name == dims[0] || d.Name == dims[1] {
				root.Dims[i].Coord = omni.JoinPath("/", d.Name)
			}
		}
		return
	}
	add("latitude"+s, dims, in.shape, in.lat, "degrees_north", "latitude")
	add("longitude"+s, dims, in.shape, in.lon, "degrees_east", "longitude")
}

func (gf *File) addMessage(in *info, name string, i, grid int, ext [2]int64) {
	v := &omni.Variable{Name: name, DType: omni.Float32, Shape: in.shape, Dims: gridDims(in, grid)}
	k := in.keys
	if s := k["name"]; s != "" && s != "unknown" {
		v.Attrs = append(v.Attrs, omni.StringAttr("long_name", s))
	}
	if s := k["units"]; s != "" && s != "unknown" {
		v.Attrs = append(v.Attrs, omni.StringAttr("units", s))
	}
	if s := k["cfName"]; s != "" && s != "unknown" {
		v.Attrs = append(v.Attrs, omni.StringAttr("standard_name", s))
	}
	if in.kind != gridRegular {
		v.Attrs = append(v.Attrs, omni.StringAttr("coordinates", "latitude"+suffix(grid)+" longitude"+suffix(grid)))
	}
	for _, key := range stringKeys {
		if s, ok := k[key]; ok && key != "name" && key != "units" && key != "cfName" {
			v.Attrs = append(v.Attrs, omni.StringAttr("GRIB_"+key, s))
		}
	}
	v.Attrs = append(v.Attrs, omni.IntAttr("GRIB_message", int64(i+1)))
	gf.ds.Root.AddVariable(v)
	gf.msgs[v.Path] = &message{off: ext[0], size: ext[1], v: v, points: in.points, altRows: in.altRows}
}

// Dataset returns the tree.
func (gf *File) Dataset() *omni.Dataset { return gf.ds }

// ReadInto reads the selection h of a message or coordinate into dst.
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
	if c := gf.coords[v.Path]; c != nil {
		pick(v.Shape, h, func(k, src int) {
			binary.LittleEndian.PutUint64(dst[8*k:], math.Float64bits(c.vals[src]))
		})
		return nil
	}
	m := gf.msgs[v.Path]
	if m == nil {
		return fmt.Errorf("%s: %w", p, omni.ErrNotFound)
	}
	vals, err := gf.values(m)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	pick(v.Shape, h, func(k, src int) {
		binary.LittleEndian.PutUint32(dst[4*k:], math.Float32bits(vals[src]))
	})
	return nil
}

// values decodes message m (or returns the last one decoded).
func (gf *File) values(m *message) ([]float32, error) {
	gf.mu.Lock()
	defer gf.mu.Unlock()
	if gf.last.m == m {
		return gf.last.vals, nil
	}
	buf := make([]byte, m.size)
	if _, err := gf.f.ReadAt(buf, m.off); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	h, err := newHandleLocked(buf)
	if err != nil {
		return nil, err
	}
	defer h.deleteLocked()
	d, err := h.doublesLocked("values", m.points)
	if err != nil {
		return nil, err
	}
	if int64(len(d)) != m.points {
		return nil, fmt.Errorf("%d values for %d points: %w", len(d), m.points, errCorrupt)
	}
	missing := math.NaN()
	if b, err := h.longLocked("bitmapPresent"); err == nil && b != 0 {
		if missing, err = h.doubleLocked("missingValue"); err != nil {
			return nil, err
		}
	}
	out := make([]float32, len(d))
	for i, x := range d {
		if x == missing {
			out[i] = float32(math.NaN())
			continue
		}
		out[i] = float32(x)
	}
	if err := reverseOddRows(m, out); err != nil {
		return nil, err
	}
	gf.last.m, gf.last.vals = m, out
	return out, nil
}

// reverseOddRows puts the odd rows of a message scanned alternately
// (boustrophedonic) in the direction of the even ones, as cfgrib does;
// a message read per point has no rows to reverse: its values are not
// cfgrib's, and reading it fails.
func reverseOddRows(m *message, vals []float32) error {
	if !m.altRows {
		return nil
	}
	if len(m.v.Shape) != 2 {
		return fmt.Errorf("alternativeRowScanning on a grid of shape %v: %w", m.v.Shape, omni.ErrNotSupported)
	}
	cols := int(m.v.Shape[1])
	for r := 1; (r+1)*cols <= len(vals); r += 2 {
		slices.Reverse(vals[r*cols : (r+1)*cols])
	}
	return nil
}

// pick calls put(k, src) for the k-th selected element of h (C order)
// and its index src in the C-order array of shape.
func pick(shape []int64, h omni.Hyperslab, put func(k, src int)) {
	if h.Len() == 0 {
		return
	}
	rank := len(shape)
	strides := make([]int64, rank)
	s := int64(1)
	for i := rank - 1; i >= 0; i-- {
		strides[i], s = s, s*shape[i]
	}
	idx := make([]int64, rank)
	for k := 0; ; k++ {
		off := int64(0)
		for i := range rank {
			off += (h.Start[i] + idx[i]*h.StrideAt(i)) * strides[i]
		}
		put(k, int(off))
		i := rank - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < h.Count[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

// ReadStrings: GRIB has no string variables.
func (gf *File) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	v, err := gf.ds.Var(p)
	if err != nil {
		return nil, err
	}
	return nil, omni.CheckReadStrings(p, v)
}

// Close closes the file.
func (gf *File) Close() error { return gf.f.Close() }
