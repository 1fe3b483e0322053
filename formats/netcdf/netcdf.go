// Package netcdf reads and writes NetCDF files through libnetcdf (cgo):
// classic (CDF-1), 64-bit offset (CDF-2), CDF-5 and NetCDF-4 (with groups,
// several unlimited dimensions, chunking and compression, strings), as
// OMNI datasets (formats/omni). A dimension with a variable of the same
// name over it has that variable as its coordinate. NC_CHAR variables are
// S1 arrays (the string length is their last axis), as in the file.
//
// libnetcdf is not hardened against crafted files: the daemon calls this
// package only from helper processes (formats/helper).
//
// libnetcdf is not thread safe: every call into it holds mu. A File is
// safe for concurrent use, calls serialised. No C type leaves this package.
package netcdf

/*
#cgo LDFLAGS: -lnetcdf
#include <stdlib.h>
#include <netcdf.h>

static char *iwnc_str_at(char **v, size_t i) { return v[i]; }
static void iwnc_str_set(char **v, size_t i, char *s) { v[i] = s; }
*/
import "C"

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

// ErrLibrary wraps errors reported by libnetcdf (nc_strerror text).
var ErrLibrary = errors.New("libnetcdf")

// mu serialises every call into libnetcdf.
var mu sync.Mutex

// Limits against crafted files.
const (
	maxDepth     = 64
	maxAttrElems = 1 << 20
)

func ncerr(op string, rc C.int) error {
	if rc == C.NC_NOERR {
		return nil
	}
	return fmt.Errorf("%s: %w: %s", op, ErrLibrary, C.GoString(C.nc_strerror(rc)))
}

var formats = map[C.int]string{
	C.NC_FORMAT_CLASSIC: "netcdf3-classic", C.NC_FORMAT_64BIT_OFFSET: "netcdf3-64bit-offset",
	C.NC_FORMAT_64BIT_DATA: "netcdf3-cdf5", C.NC_FORMAT_NETCDF4: "netcdf4", C.NC_FORMAT_NETCDF4_CLASSIC: "netcdf4-classic",
}

// exts are NetCDF's file name extensions.
var exts = []string{".nc", ".nc4", ".cdf", ".netcdf"}

func init() {
	omni.Register(omni.Driver{
		Name:     "netcdf",
		Priority: 20,
		Exts:     exts,
		Sniff: func(p omni.Probe) bool {
			if h := p.Head; len(h) >= 4 && string(h[:3]) == "CDF" && slices.Contains([]byte{1, 2, 5}, h[3]) {
				return true
			}
			return omni.HasHDF5Signature(p.Head) && omni.HasExt(p.Path, exts...)
		},
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
		Write: Write,
	})
}

var typeOf = map[C.nc_type]omni.DType{
	C.NC_BYTE: omni.Int8, C.NC_UBYTE: omni.Uint8, C.NC_SHORT: omni.Int16, C.NC_USHORT: omni.Uint16,
	C.NC_INT: omni.Int32, C.NC_UINT: omni.Uint32, C.NC_INT64: omni.Int64, C.NC_UINT64: omni.Uint64,
	C.NC_FLOAT: omni.Float32, C.NC_DOUBLE: omni.Float64, C.NC_CHAR: omni.FixedString(1), C.NC_STRING: omni.String,
}

// File is an open NetCDF file. Safe for concurrent use.
type File struct {
	ncid C.int
	ds   *omni.Dataset
	vars map[string]varRef
	// groups are the ids of the groups by path (attributes read on demand).
	groups map[string]C.int
}

type varRef struct {
	v     *omni.Variable
	gid   C.int
	varid C.int
}

var _ omni.Reader = (*File)(nil)

// Open opens p read-only and walks it into an OMNI dataset.
func Open(p string) (*File, error) {
	mu.Lock()
	defer mu.Unlock()
	cp := C.CString(p)
	defer C.free(unsafe.Pointer(cp))
	var ncid C.int
	if err := ncerr("open "+p, C.nc_open(cp, C.NC_NOWRITE, &ncid)); err != nil {
		return nil, err
	}
	var fmtc C.int
	C.nc_inq_format(ncid, &fmtc)
	f := &File{ncid: ncid, ds: omni.NewDataset(p, formats[fmtc]), vars: map[string]varRef{}, groups: map[string]C.int{}}
	if err := f.group(ncid, f.ds.Root, 0); err != nil {
		C.nc_close(ncid)
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return f, nil
}

// Dataset returns the walked tree.
func (f *File) Dataset() *omni.Dataset { return f.ds }

// Close closes the file.
func (f *File) Close() error {
	mu.Lock()
	defer mu.Unlock()
	if f.ncid < 0 {
		return nil
	}
	err := ncerr("close", C.nc_close(f.ncid))
	f.ncid = -1
	return err
}

func name(get func(*C.char) C.int) (string, error) {
	buf := make([]C.char, C.NC_MAX_NAME+1)
	if rc := get(&buf[0]); rc != C.NC_NOERR {
		return "", ncerr("name", rc)
	}
	return C.GoString(&buf[0]), nil
}

func (f *File) group(gid C.int, g *omni.Group, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("groups nested deeper than %d: %w", maxDepth, omni.ErrCorrupt)
	}
	f.groups[g.Path] = gid
	var err error
	if g.Attrs, err = readAttrs(gid, C.NC_GLOBAL); err != nil {
		return fmt.Errorf("attributes of %s: %w", g.Path, err)
	}
	if err := f.dims(gid, g); err != nil {
		return err
	}
	if err := f.variables(gid, g); err != nil {
		return err
	}
	var n C.int
	if C.nc_inq_grps(gid, &n, nil) != C.NC_NOERR || n == 0 {
		return nil
	}
	ids := make([]C.int, n)
	if err := ncerr("groups", C.nc_inq_grps(gid, &n, &ids[0])); err != nil {
		return err
	}
	for _, id := range ids {
		nm, err := name(func(b *C.char) C.int { return C.nc_inq_grpname(id, b) })
		if err != nil {
			return err
		}
		if err := f.group(id, g.Child(nm), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (f *File) dims(gid C.int, g *omni.Group) error {
	var n C.int
	if err := ncerr("dimensions", C.nc_inq_dimids(gid, &n, nil, 0)); err != nil || n == 0 {
		return err
	}
	ids := make([]C.int, n)
	C.nc_inq_dimids(gid, &n, &ids[0], 0)
	var nu C.int
	C.nc_inq_unlimdims(gid, &nu, nil)
	unl := make([]C.int, nu+1)
	C.nc_inq_unlimdims(gid, &nu, &unl[0])
	for _, id := range ids {
		buf := make([]C.char, C.NC_MAX_NAME+1)
		var size C.size_t
		if err := ncerr("dimension", C.nc_inq_dim(gid, id, &buf[0], &size)); err != nil {
			return err
		}
		g.AddDim(&omni.Dimension{Name: C.GoString(&buf[0]), Size: int64(size), Unlimited: slices.Contains(unl[:nu], id)})
	}
	return nil
}

func (f *File) variables(gid C.int, g *omni.Group) error {
	var n C.int
	if err := ncerr("variables", C.nc_inq_varids(gid, &n, nil)); err != nil || n == 0 {
		return err
	}
	ids := make([]C.int, n)
	C.nc_inq_varids(gid, &n, &ids[0])
	for _, id := range ids {
		if err := f.variable(gid, id, g); err != nil {
			return err
		}
	}
	return nil
}

func (f *File) variable(gid, varid C.int, g *omni.Group) error {
	buf := make([]C.char, C.NC_MAX_NAME+1)
	var xtype C.nc_type
	var ndims, natts C.int
	dimids := make([]C.int, C.NC_MAX_VAR_DIMS)
	if err := ncerr("variable", C.nc_inq_var(gid, varid, &buf[0], &xtype, &ndims, &dimids[0], &natts)); err != nil {
		return err
	}
	t, ok := typeOf[xtype]
	if !ok {
		return nil // user-defined types are not exposed
	}
	v := &omni.Variable{Name: C.GoString(&buf[0]), DType: t, Shape: make([]int64, ndims), Dims: make([]string, ndims)}
	for i := range v.Shape {
		var size C.size_t
		if err := ncerr("variable dimension", C.nc_inq_dim(gid, dimids[i], &buf[0], &size)); err != nil {
			return err
		}
		v.Dims[i], v.Shape[i] = C.GoString(&buf[0]), int64(size)
	}
	var err error
	if v.Attrs, err = readAttrs(gid, varid); err != nil {
		return fmt.Errorf("attributes of %s: %w", v.Name, err)
	}
	if f.ds.Format == "netcdf4" || f.ds.Format == "netcdf4-classic" {
		v.Chunks, v.Filters = storage(gid, varid, int(ndims))
	}
	g.AddVariable(v)
	f.vars[v.Path] = varRef{v: v, gid: gid, varid: varid}
	if len(v.Shape) == 1 {
		if d, err := f.ds.Dim(g.Path, v.Dims[0]); err == nil && d.Name == v.Name {
			d.Coord = v.Path
		}
	}
	return nil
}

func storage(gid, varid C.int, rank int) ([]int64, []string) {
	var chunks []int64
	var st C.int
	cs := make([]C.size_t, rank+1)
	if C.nc_inq_var_chunking(gid, varid, &st, &cs[0]) == C.NC_NOERR && st == C.NC_CHUNKED && rank > 0 {
		chunks = make([]int64, rank)
		for i := range chunks {
			chunks[i] = int64(cs[i])
		}
	}
	var filters []string
	var shuffle, deflate, level, fl C.int
	if C.nc_inq_var_deflate(gid, varid, &shuffle, &deflate, &level) == C.NC_NOERR {
		if shuffle != 0 {
			filters = append(filters, "shuffle")
		}
		if deflate != 0 {
			filters = append(filters, "deflate")
		}
	}
	if C.nc_inq_var_fletcher32(gid, varid, &fl) == C.NC_NOERR && fl != 0 {
		filters = append(filters, "fletcher32")
	}
	return chunks, filters
}

func readAttrs(gid, varid C.int) ([]omni.Attribute, error) {
	var n C.int
	var rc C.int
	if varid == C.NC_GLOBAL {
		rc = C.nc_inq_natts(gid, &n)
	} else {
		rc = C.nc_inq_varnatts(gid, varid, &n)
	}
	if err := ncerr("attributes", rc); err != nil {
		return nil, err
	}
	var out []omni.Attribute
	for i := C.int(0); i < n; i++ {
		nm, err := name(func(b *C.char) C.int { return C.nc_inq_attname(gid, varid, i, b) })
		if err != nil {
			return nil, err
		}
		a, ok, err := readAttr(gid, varid, nm)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", nm, err)
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, nil
}

func readAttr(gid, varid C.int, nm string) (omni.Attribute, bool, error) {
	cn := C.CString(nm)
	defer C.free(unsafe.Pointer(cn))
	var xtype C.nc_type
	var ln C.size_t
	if err := ncerr("inquire", C.nc_inq_att(gid, varid, cn, &xtype, &ln)); err != nil {
		return omni.Attribute{}, false, err
	}
	t, ok := typeOf[xtype]
	if !ok {
		return omni.Attribute{}, false, nil
	}
	a := omni.Attribute{Name: nm, Type: t}
	if n := int64(ln) * int64(max(t.Size(), 1)); ln > maxAttrElems || xtype != C.NC_CHAR && xtype != C.NC_STRING && n > omni.MaxAttrBytes {
		// Not read now: too large to hold (omni.CapAttrs); a numeric
		// value is read on demand (omni.AttrVar), a text one is named.
		a.Omitted, a.Value = n, []string{}
		if xtype == C.NC_CHAR || xtype == C.NC_STRING {
			a.Type = omni.String
		} else {
			a.Elems, a.Value = int64(ln), nil
		}
		return a, true, nil
	}
	var rc C.int
	switch {
	case xtype == C.NC_CHAR:
		buf := make([]byte, ln+1)
		rc = C.nc_get_att_text(gid, varid, cn, (*C.char)(unsafe.Pointer(&buf[0])))
		a.Type, a.Value = omni.String, []string{trimNUL(string(buf[:ln]))}
	case ln == 0:
		return omni.Attribute{}, false, nil
	case xtype == C.NC_STRING:
		ptrs := make([]*C.char, ln)
		rc = C.nc_get_att_string(gid, varid, cn, &ptrs[0])
		if rc == C.NC_NOERR {
			ss := make([]string, ln)
			for i, p := range ptrs {
				if p != nil {
					ss[i] = C.GoString(p)
				}
			}
			C.nc_free_string(ln, &ptrs[0])
			a.Value = ss
		}
	case t.IsFloat():
		vals := make([]float64, ln)
		rc = C.nc_get_att_double(gid, varid, cn, (*C.double)(&vals[0]))
		a.Value = vals
	case t.IsSigned():
		vals := make([]int64, ln)
		rc = C.nc_get_att_longlong(gid, varid, cn, (*C.longlong)(unsafe.Pointer(&vals[0])))
		a.Value = vals
	default:
		vals := make([]uint64, ln)
		rc = C.nc_get_att_ulonglong(gid, varid, cn, (*C.ulonglong)(unsafe.Pointer(&vals[0])))
		a.Value = vals
	}
	if err := ncerr("read", rc); err != nil {
		return omni.Attribute{}, false, err
	}
	return a, true, nil
}

func trimNUL(s string) string {
	for len(s) > 0 && s[len(s)-1] == 0 {
		s = s[:len(s)-1]
	}
	return s
}

func (f *File) refLocked(p string, h omni.Hyperslab) (varRef, error) {
	if f.ncid < 0 {
		return varRef{}, fmt.Errorf("%s: file closed: %w", p, omni.ErrInvalid)
	}
	r, ok := f.vars[p] // exact first: a stored name may be ".." (omni.EscapeName)
	if !ok {
		r, ok = f.vars[path.Clean("/"+p)]
	}
	if !ok {
		return varRef{}, fmt.Errorf("variable %s: %w", p, omni.ErrNotFound)
	}
	if err := h.Check(r.v.Shape); err != nil {
		return varRef{}, fmt.Errorf("%s: %w", p, err)
	}
	return r, nil
}

type slab struct {
	start, count []C.size_t
	stride       []C.ptrdiff_t
}

func cslab(h omni.Hyperslab) slab {
	n := len(h.Count)
	s := slab{make([]C.size_t, n+1), make([]C.size_t, n+1), make([]C.ptrdiff_t, n+1)}
	for i := range n {
		s.start[i], s.count[i], s.stride[i] = C.size_t(h.Start[i]), C.size_t(h.Count[i]), C.ptrdiff_t(h.StrideAt(i))
	}
	return s
}

// ReadInto reads the selection h of a fixed-size variable into dst, or of
// an attribute's value (omni.ReaderAttrPath).
func (f *File) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	mu.Lock()
	defer mu.Unlock()
	if obj, name, ok := omni.SplitReaderAttrPath(p); ok {
		return f.readAttrLocked(obj, name, h, dst)
	}
	r, err := f.refLocked(p, h)
	if err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, r.v, h, dst); err != nil {
		return err
	}
	if h.Len() == 0 {
		return nil
	}
	if err := checkElemSize(r.gid, r.varid, r.v); err != nil {
		return err
	}
	s := cslab(h)
	rc := C.nc_get_vars(r.gid, r.varid, &s.start[0], &s.count[0], &s.stride[0], unsafe.Pointer(&dst[0]))
	return ncerr("read "+p, rc)
}

// checkElemSize fails unless the variable's type is as wide as its
// dtype: nc_get_vars writes count elements of the type, and a narrower
// one would leave the rest of dst as it was.
func checkElemSize(gid, varid C.int, v *omni.Variable) error {
	var xtype C.nc_type
	var size C.size_t
	if rc := C.nc_inq_vartype(gid, varid, &xtype); rc != C.NC_NOERR {
		return ncerr("type of "+v.Path, rc)
	}
	if rc := C.nc_inq_type(gid, xtype, nil, &size); rc != C.NC_NOERR {
		return ncerr("type of "+v.Path, rc)
	}
	if int(size) != v.DType.Size() {
		return fmt.Errorf("%s: type of %d bytes for %s: %w", v.Path, size, v.DType, omni.ErrNotSupported)
	}
	return nil
}

// ReadStrings reads the selection of an NC_STRING variable.
func (f *File) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	mu.Lock()
	defer mu.Unlock()
	r, err := f.refLocked(p, h)
	if err != nil {
		return nil, err
	}
	if err := omni.CheckReadStrings(p, r.v); err != nil {
		return nil, err
	}
	n := h.Len()
	if n == 0 {
		return []string{}, nil
	}
	buf := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(buf)
	s := cslab(h)
	if err := ncerr("read "+p, C.nc_get_vars_string(r.gid, r.varid, &s.start[0], &s.count[0], &s.stride[0], (**C.char)(buf))); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if c := C.iwnc_str_at((**C.char)(buf), C.size_t(i)); c != nil {
			out[i] = C.GoString(c)
		}
	}
	C.nc_free_string(C.size_t(n), (**C.char)(buf))
	return out, nil
}

// maxLazyAttrElems bounds an attribute read on demand (read whole for
// each request: libnetcdf reads no part of an attribute).
const maxLazyAttrElems = 1 << 28

// readAttrLocked reads the selection h of the numeric value of attribute
// name of the variable or group at path obj into dst.
func (f *File) readAttrLocked(obj, name string, h omni.Hyperslab, dst []byte) error {
	if f.ncid < 0 {
		return fmt.Errorf("%s: file closed: %w", obj, omni.ErrInvalid)
	}
	gid, varid := C.int(0), C.int(C.NC_GLOBAL)
	if r, ok := f.vars[obj]; ok {
		gid, varid = r.gid, r.varid
	} else if g, ok := f.groups[obj]; ok {
		gid = g
	} else {
		return fmt.Errorf("attribute %s of %s: %w", name, obj, omni.ErrNotFound)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var xtype C.nc_type
	var ln C.size_t
	if C.nc_inq_att(gid, varid, cn, &xtype, &ln) != C.NC_NOERR {
		return fmt.Errorf("attribute %s of %s: %w", name, obj, omni.ErrNotFound)
	}
	t, ok := typeOf[xtype]
	if !ok || t.IsString() || ln == 0 || ln > maxLazyAttrElems {
		return fmt.Errorf("attribute %s of %s: no numeric value to read: %w", name, obj, omni.ErrNotSupported)
	}
	if err := h.Check([]int64{int64(ln)}); err != nil {
		return fmt.Errorf("attribute %s of %s: %w", name, obj, err)
	}
	size := int64(t.Size())
	if int64(len(dst)) != h.Bytes(t) {
		return fmt.Errorf("attribute %s: buffer of %d bytes for %d: %w", name, len(dst), h.Bytes(t), omni.ErrInvalid)
	}
	// nc_get_att reads in the attribute's own type: native, little-endian here.
	buf := make([]byte, int64(ln)*size)
	if err := ncerr("read attribute "+name, C.nc_get_att(gid, varid, cn, unsafe.Pointer(&buf[0]))); err != nil {
		return err
	}
	for k := int64(0); k < h.Count[0]; k++ {
		i := h.Start[0] + k*h.StrideAt(0)
		copy(dst[k*size:(k+1)*size], buf[i*size:(i+1)*size])
	}
	return nil
}
