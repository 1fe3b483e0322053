package hdf5

/*
#include "h5.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

// Limits against crafted files.
const (
	maxDepth       = 64
	maxObjects     = 200000
	maxAttrElems   = 1 << 20
	maxNameLen     = 4096
	netcdfPureDim  = "This is a netCDF dimension but not a netCDF variable"
	phonyDimPrefix = "phony_dim_"
)

// hiddenAttrs are bookkeeping attributes of dimension scales and NetCDF-4.
var hiddenAttrs = map[string]bool{
	"DIMENSION_LIST": true, "REFERENCE_LIST": true, "CLASS": true, "NAME": true,
	"_Netcdf4Dimid": true, "_Netcdf4Coordinates": true, "_NCProperties": true, "_nc3_strict": true,
	"_IsNetcdf4": true, "_SuperblockVersion": true,
}

// File is an open HDF5 file. Safe for concurrent use (calls are serialised).
type File struct {
	fid  C.hid_t
	ds   *omni.Dataset
	vars map[string]*varRef
}

// varRef maps an OMNI variable to its HDF5 dataset (and compound field).
type varRef struct {
	v      *omni.Variable
	obj    string // HDF5 path of the dataset
	field  string // compound member name, "" for a plain dataset
	did    C.hid_t
	refuse error // why the data is not read (sources outside Root)
}

// Root, when not "", is the directory every file a dataset's data lives
// in must lie below: HDF5 external storage and virtual datasets name
// other files, which libhdf5 opens by itself; a variable with a source
// elsewhere is listed, and its reads fail with os.ErrPermission. Format
// helpers set it to the directory they are confined to (the mount's
// backing store, or the mount); "" allows any.
var Root string

var _ omni.Reader = (*File)(nil)

func init() {
	omni.Register(omni.Driver{
		Name:     "hdf5",
		Priority: 10,
		Exts:     []string{".h5", ".hdf5", ".he5", ".hdf"},
		Sniff:    func(p omni.Probe) bool { return omni.HasHDF5Signature(p.Head) },
		Open:     func(p string) (omni.Reader, error) { return Open(p) },
		Write:    Write,
	})
}

// Open opens path read-only and walks it into an OMNI dataset.
func Open(p string) (*File, error) {
	mu.Lock()
	defer mu.Unlock()
	cp := cstr(p)
	defer free(unsafe.Pointer(cp))
	fid := C.H5Fopen(cp, C.H5F_ACC_RDONLY, C.iw5_p_default())
	if fid < 0 {
		return nil, h5err("open " + p)
	}
	f := &File{fid: fid, ds: omni.NewDataset(p, "hdf5"), vars: map[string]*varRef{}}
	w := &walker{f: f, visited: map[uint64]bool{}, scales: map[string]*scale{}}
	if err := w.walk(); err != nil {
		f.closeLocked()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return f, nil
}

// Dataset returns the walked tree.
func (f *File) Dataset() *omni.Dataset { return f.ds }

// Close closes the file and every dataset it opened.
func (f *File) Close() error {
	mu.Lock()
	defer mu.Unlock()
	return f.closeLocked()
}

func (f *File) closeLocked() error {
	for _, r := range f.vars {
		if r.did > 0 {
			C.H5Dclose(r.did)
			r.did = 0
		}
	}
	if f.fid > 0 && C.H5Fclose(f.fid) < 0 {
		f.fid = 0
		return h5err("close")
	}
	f.fid = 0
	return nil
}

// scale is a dimension scale found in the walk.
type scale struct {
	path      string
	size      int64
	unlimited bool
	pure      bool // a NetCDF-4 dimension without coordinate values
}

// pending is a dataset whose axes are named after the walk.
type pending struct {
	g      *omni.Group
	vars   []*omni.Variable
	maxdim []bool
	scales []string // scale path per axis, "" for none
}

type walker struct {
	f       *File
	visited map[uint64]bool
	scales  map[string]*scale
	pending []*pending
	objects int
}

func (w *walker) walk() error {
	root := w.f.ds.Root
	if err := w.group(w.f.fid, root, "/", 0); err != nil {
		return err
	}
	w.nameDims()
	return nil
}

func (w *walker) group(gid C.hid_t, g *omni.Group, h5path string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("groups nested deeper than %d: %w", maxDepth, omni.ErrCorrupt)
	}
	attrs, err := readAttrs(gid)
	if err != nil {
		return fmt.Errorf("attributes of %s: %w", h5path, err)
	}
	g.Attrs = attrs
	g.NXClass = omni.AttrString(attrs, omni.AttrNXClass)
	var info C.H5G_info_t
	if C.H5Gget_info(gid, &info) < 0 {
		return h5err("group info " + h5path)
	}
	if info.nlinks > maxObjects {
		return fmt.Errorf("group %s: %d links: %w", h5path, info.nlinks, omni.ErrCorrupt)
	}
	names, err := linkNames(gid)
	if err != nil {
		return fmt.Errorf("links of %s: %w", h5path, err)
	}
	if len(names) > maxObjects {
		return fmt.Errorf("group %s: %d links: %w", h5path, len(names), omni.ErrCorrupt)
	}
	for _, name := range names {
		if err := w.member(gid, g, h5path, name, depth); err != nil {
			return err
		}
	}
	return nil
}

// linkNames lists the links of group gid in name order, in one pass.
func linkNames(gid C.hid_t) ([]string, error) {
	var buf *C.char
	var n C.size_t
	if C.iw5_link_names(gid, &buf, &n) < 0 {
		return nil, h5err("link names")
	}
	defer free(unsafe.Pointer(buf))
	if n == 0 {
		return nil, nil
	}
	all := C.GoBytes(unsafe.Pointer(buf), C.int(n))
	var out []string
	for len(all) > 0 {
		i := bytes.IndexByte(all, 0)
		if i < 0 {
			return nil, fmt.Errorf("link names not terminated: %w", omni.ErrCorrupt)
		}
		if i > maxNameLen {
			return nil, fmt.Errorf("link name of %d bytes: %w", i, omni.ErrCorrupt)
		}
		out = append(out, string(all[:i]))
		all = all[i+1:]
	}
	return out, nil
}

func (w *walker) member(gid C.hid_t, g *omni.Group, h5path, name string, depth int) error {
	cname := cstr(name)
	defer free(unsafe.Pointer(cname))
	if hard := C.iw5_hard_link(gid, cname); hard <= 0 {
		return nil // soft and external links are not followed
	}
	var typ C.int
	var key C.ulonglong
	if C.iw5_obj_info(gid, cname, &typ, &key) < 0 {
		return h5err("object info " + omni.JoinPath(h5path, name))
	}
	if w.visited[uint64(key)] {
		return nil // a second hard link to an object already walked
	}
	w.visited[uint64(key)] = true
	if w.objects++; w.objects > maxObjects {
		return fmt.Errorf("more than %d objects: %w", maxObjects, omni.ErrNotSupported)
	}
	child := omni.JoinPath(h5path, name)
	switch typ {
	case C.H5O_TYPE_GROUP:
		gid2 := C.H5Gopen2(gid, cname, C.iw5_p_default())
		if gid2 < 0 {
			return h5err("open group " + child)
		}
		defer C.H5Gclose(gid2)
		return w.group(gid2, g.Child(name), child, depth+1)
	case C.H5O_TYPE_DATASET:
		did := C.H5Dopen2(gid, cname, C.iw5_p_default())
		if did < 0 {
			return h5err("open dataset " + child)
		}
		defer C.H5Dclose(did)
		return w.dataset(did, g, child, name)
	}
	return nil // named datatypes
}

// elemType maps an HDF5 type to an OMNI dtype; ok false for types that
// are not exposed (references, opaque, arrays, nested vlen, …).
func elemType(tid C.hid_t) (omni.DType, bool) {
	size := int(C.H5Tget_size(tid))
	switch C.H5Tget_class(tid) {
	case C.H5T_INTEGER, C.H5T_ENUM:
		base := tid
		if isBool(tid) {
			return omni.Bool, true
		}
		if C.H5Tget_class(tid) == C.H5T_ENUM {
			base = C.H5Tget_super(tid)
			defer C.H5Tclose(base)
		}
		signed := C.H5Tget_sign(base) == C.H5T_SGN_2
		bits := map[int]string{1: "8", 2: "16", 4: "32", 8: "64"}[size]
		if bits == "" {
			return "", false
		}
		if signed {
			return omni.DType("int" + bits), true
		}
		return omni.DType("uint" + bits), true
	case C.H5T_FLOAT:
		if size <= 4 {
			return omni.Float32, true
		}
		return omni.Float64, true
	case C.H5T_STRING:
		if C.H5Tis_variable_str(tid) > 0 {
			return omni.String, true
		}
		if size <= 0 || size > 1<<20 {
			return "", false
		}
		return omni.FixedString(size), true
	}
	return "", false
}

// isBool reports h5py's bool: a one-byte enum {FALSE=0, TRUE=1}.
func isBool(tid C.hid_t) bool {
	if C.H5Tget_class(tid) != C.H5T_ENUM || C.H5Tget_size(tid) != 1 || C.H5Tget_nmembers(tid) != 2 {
		return false
	}
	for i, want := range []string{"FALSE", "TRUE"} {
		cn := C.H5Tget_member_name(tid, C.uint(i))
		name := C.GoString(cn)
		C.H5free_memory(unsafe.Pointer(cn))
		if name != want {
			return false
		}
	}
	return true
}

// memType is the in-memory type to read file type tid as dtype t; the
// caller closes it.
func memType(tid C.hid_t, t omni.DType) C.hid_t {
	switch {
	case t == omni.String:
		return C.iw5_vlen_str()
	case t.IsString():
		return C.H5Tcopy(tid)
	case t == omni.Float32:
		return C.H5Tcopy(C.iw5_t_native(nFloat))
	case t == omni.Float64:
		return C.H5Tcopy(C.iw5_t_native(nDouble))
	}
	if k, ok := nativeInts[t]; ok && C.H5Tget_class(tid) == C.H5T_INTEGER {
		// The declared dtype, not H5Tget_native_type: that follows the
		// type's precision (an int32 of 8 significant bits gives a
		// 1-byte type), and the buffer is sized by the dtype.
		return C.H5Tcopy(C.iw5_t_native(C.int(k)))
	}
	return C.H5Tget_native_type(tid, C.H5T_DIR_ASCEND)
}

// nativeInts are the memory types of the integer dtypes.
var nativeInts = map[omni.DType]int{
	omni.Int8: nSchar, omni.Uint8: nUchar, omni.Int16: nShort, omni.Uint16: nUshort,
	omni.Int32: nInt, omni.Uint32: nUint, omni.Int64: nLlong, omni.Uint64: nUllong,
}

func (w *walker) dataset(did C.hid_t, g *omni.Group, h5path, name string) error {
	shape, maxdim, err := extent(did)
	if err != nil {
		return fmt.Errorf("%s: %w", h5path, err)
	}
	if shape == nil {
		return nil // null dataspace
	}
	attrs, err := readAttrs(did)
	if err != nil {
		return fmt.Errorf("attributes of %s: %w", h5path, err)
	}
	if C.H5DSis_scale(did) > 0 {
		sc := &scale{path: h5path, size: 0, pure: strings.HasPrefix(rawAttrString(did, "NAME"), netcdfPureDim)}
		if len(shape) == 1 {
			sc.size, sc.unlimited = shape[0], maxdim[0]
		}
		w.scales[h5path] = sc
		if sc.pure {
			return nil
		}
	}
	chunks, filters, err := layout(did, len(shape))
	if err != nil {
		return fmt.Errorf("%s: %w", h5path, err)
	}
	external, refuse := w.sources(did, h5path)
	tid := C.H5Dget_type(did)
	if tid < 0 {
		return h5err("type of " + h5path)
	}
	defer C.H5Tclose(tid)
	p := &pending{g: g, maxdim: maxdim, scales: scalePaths(did, len(shape))}
	mk := func(name string, t omni.DType, field string, attrs []omni.Attribute, in *omni.Group) {
		v := in.AddVariable(&omni.Variable{Name: name, DType: t, Shape: shape, Chunks: chunks, Filters: filters, Attrs: attrs, External: external})
		w.f.vars[v.Path] = &varRef{v: v, obj: h5path, field: field, refuse: refuse}
		p.vars = append(p.vars, v)
	}
	if C.H5Tget_class(tid) == C.H5T_COMPOUND {
		cg := g.Child(name)
		cg.Compound, cg.Attrs = true, attrs
		p.g = cg
		for i := C.int(0); i < C.H5Tget_nmembers(tid); i++ {
			cfield := C.H5Tget_member_name(tid, C.uint(i))
			field := C.GoString(cfield)
			C.H5free_memory(unsafe.Pointer(cfield))
			mt := C.H5Tget_member_type(tid, C.uint(i))
			t, ok := elemType(mt)
			C.H5Tclose(mt)
			if ok && field != "" && !strings.Contains(field, "/") {
				mk(field, t, field, nil, cg)
			}
		}
	} else if t, ok := elemType(tid); ok {
		mk(name, t, "", attrs, g)
	}
	if len(p.vars) > 0 {
		w.pending = append(w.pending, p)
	}
	return nil
}

// extent returns the current and unlimited-ness of each axis; nil shape
// for a null dataspace, empty for a scalar.
func extent(did C.hid_t) ([]int64, []bool, error) {
	sid := C.H5Dget_space(did)
	if sid < 0 {
		return nil, nil, h5err("dataspace")
	}
	defer C.H5Sclose(sid)
	switch C.H5Sget_simple_extent_type(sid) {
	case C.H5S_NULL:
		return nil, nil, nil
	case C.H5S_SCALAR:
		return []int64{}, []bool{}, nil
	}
	rank := C.H5Sget_simple_extent_ndims(sid)
	if rank < 0 || rank > C.H5S_MAX_RANK {
		return nil, nil, h5err("rank")
	}
	dims := make([]C.hsize_t, rank+1)
	maxd := make([]C.hsize_t, rank+1)
	if C.H5Sget_simple_extent_dims(sid, &dims[0], &maxd[0]) < 0 {
		return nil, nil, h5err("dims")
	}
	shape := make([]int64, rank)
	unl := make([]bool, rank)
	total := uint64(1)
	for i := range shape {
		if dims[i] > 1<<62 {
			return nil, nil, fmt.Errorf("axis %d of size %d: %w", i, dims[i], omni.ErrCorrupt)
		}
		shape[i], unl[i] = int64(dims[i]), maxd[i] == C.iw5_unlimited()
		if shape[i] > 0 && total > (1<<62)/uint64(shape[i]) {
			return nil, nil, fmt.Errorf("more than 2^62 elements: %w", omni.ErrCorrupt)
		}
		total *= uint64(max(shape[i], 1))
	}
	return shape, unl, nil
}

var filterNames = map[C.H5Z_filter_t]string{
	C.H5Z_FILTER_DEFLATE: "deflate", C.H5Z_FILTER_SHUFFLE: "shuffle", C.H5Z_FILTER_FLETCHER32: "fletcher32",
	C.H5Z_FILTER_SZIP: "szip", C.H5Z_FILTER_NBIT: "nbit", C.H5Z_FILTER_SCALEOFFSET: "scaleoffset",
}

func layout(did C.hid_t, rank int) ([]int64, []string, error) {
	dcpl := C.H5Dget_create_plist(did)
	if dcpl < 0 {
		return nil, nil, h5err("creation properties")
	}
	defer C.H5Pclose(dcpl)
	if C.H5Pget_layout(dcpl) != C.H5D_CHUNKED || rank == 0 {
		return nil, nil, nil
	}
	cdims := make([]C.hsize_t, rank)
	if C.H5Pget_chunk(dcpl, C.int(rank), &cdims[0]) != C.int(rank) {
		return nil, nil, h5err("chunk dims")
	}
	chunks := make([]int64, rank)
	for i, c := range cdims {
		chunks[i] = int64(c)
	}
	var filters []string
	n := C.H5Pget_nfilters(dcpl)
	for i := C.int(0); i < n; i++ {
		var flags C.uint
		nelm := C.size_t(8)
		var cd [8]C.uint
		var conf C.uint
		var name [64]C.char
		id := C.H5Pget_filter2(dcpl, C.uint(i), &flags, &nelm, &cd[0], C.size_t(len(name)), &name[0], &conf)
		if id < 0 {
			return nil, nil, h5err("filter")
		}
		fname, ok := filterNames[id]
		if !ok {
			fname = fmt.Sprintf("filter%d", id)
		}
		filters = append(filters, fname)
	}
	return chunks, filters, nil
}

// sources reports whether dataset did keeps its data in other files
// (external storage, a virtual dataset), and the error its reads get
// when one of them is outside Root.
func (w *walker) sources(did C.hid_t, h5path string) (bool, error) {
	dcpl := C.H5Dget_create_plist(did)
	if dcpl < 0 {
		return false, nil
	}
	defer C.H5Pclose(dcpl)
	var names []string
	if C.H5Pget_layout(dcpl) == C.H5D_VIRTUAL {
		var n C.size_t
		if C.H5Pget_virtual_count(dcpl, &n) < 0 || n > maxObjects {
			return true, fmt.Errorf("%s: virtual dataset without a readable mapping: %w", h5path, omni.ErrCorrupt)
		}
		for i := C.size_t(0); i < n; i++ {
			names = append(names, vdsFilename(dcpl, i))
		}
	}
	for i := C.int(0); i < C.H5Pget_external_count(dcpl); i++ {
		var buf [maxNameLen + 1]C.char
		var off C.off_t
		var size C.hsize_t
		if C.H5Pget_external(dcpl, C.uint(i), C.size_t(len(buf)), &buf[0], &off, &size) < 0 {
			return true, fmt.Errorf("%s: external file %d unreadable: %w", h5path, i, omni.ErrCorrupt)
		}
		names = append(names, C.GoString(&buf[0]))
	}
	if len(names) == 0 {
		return false, nil
	}
	for _, n := range names {
		if err := checkSource(w.f.ds.Path, n); err != nil {
			return true, fmt.Errorf("%s: %w", h5path, err)
		}
	}
	return true, nil
}

func vdsFilename(dcpl C.hid_t, i C.size_t) string {
	var buf [maxNameLen + 1]C.char
	n := C.H5Pget_virtual_filename(dcpl, i, &buf[0], C.size_t(len(buf)))
	if n < 0 || n > maxNameLen {
		return "\x00unreadable"
	}
	return C.GoString(&buf[0])
}

// checkSource fails unless the source name of file lies below Root, as
// libhdf5 resolves it here (relative names next to the file: the pool
// sets HDF5_EXTFILE_PREFIX and HDF5_VDS_PREFIX to ${ORIGIN}).
func checkSource(file, name string) error {
	if Root == "" || name == "." {
		return nil
	}
	if strings.ContainsAny(name, "%\x00") {
		return fmt.Errorf("source %q: patterns are not followed: %w", name, os.ErrPermission)
	}
	p := name
	if !path.IsAbs(p) {
		p = path.Join(path.Dir(file), p)
	}
	for _, c := range []string{path.Clean(p), resolved(p)} {
		if c != "" && c != Root && !strings.HasPrefix(c, Root+"/") {
			return fmt.Errorf("source %s is outside %s: %w", name, Root, os.ErrPermission)
		}
	}
	return nil
}

// resolved is p with its symbolic links resolved, "" when it does not
// exist.
func resolved(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

func scalePaths(did C.hid_t, rank int) []string {
	out := make([]string, rank)
	if C.H5DSis_scale(did) > 0 {
		return out
	}
	buf := make([]C.char, 1025)
	for i := range out {
		if C.iw5_scale_path(did, C.uint(i), &buf[0]) > 0 {
			out[i] = C.GoString(&buf[0])
		}
	}
	return out
}

// nameDims names every axis: by its dimension scale (declared as a
// dimension in the scale's group, the scale being its coordinate variable
// unless it is a pure NetCDF dimension), else by a phony dimension shared
// by size within the group, as NetCDF-4 does.
func (w *walker) nameDims() {
	phony := map[*omni.Group]map[[2]int64]string{}
	for _, p := range w.pending {
		shape := p.vars[0].Shape
		dims := make([]string, len(shape))
		seen := map[int64]int64{}
		for i, n := range shape {
			if sc := w.scales[p.scales[i]]; sc != nil {
				dims[i] = w.declareScale(sc, shape[i], p.maxdim[i])
				continue
			}
			if sc := w.scales[w.selfScale(p)]; sc != nil && len(shape) == 1 {
				dims[i] = w.declareScale(sc, shape[i], p.maxdim[i])
				continue
			}
			k := [2]int64{n, seen[n]}
			seen[n]++
			if phony[p.g] == nil {
				phony[p.g] = map[[2]int64]string{}
			}
			name, ok := phony[p.g][k]
			if !ok {
				name = fmt.Sprintf("%s%d", phonyDimPrefix, len(phony[p.g]))
				phony[p.g][k] = name
				p.g.AddDim(&omni.Dimension{Name: name, Size: n, Unlimited: p.maxdim[i]})
			}
			dims[i] = name
		}
		for _, v := range p.vars {
			v.Dims = dims
		}
	}
}

// selfScale is the path of p's dataset when it is itself a scale.
func (w *walker) selfScale(p *pending) string {
	if len(p.vars) != 1 {
		return ""
	}
	if ref := w.f.vars[p.vars[0].Path]; ref != nil && ref.field == "" {
		return ref.obj
	}
	return ""
}

func (w *walker) declareScale(sc *scale, size int64, unl bool) string {
	dir, name := path.Split(sc.path)
	g, err := w.f.ds.Group(dir)
	if err != nil {
		g = w.f.ds.Root
	}
	d := &omni.Dimension{Name: name, Size: size, Unlimited: unl || sc.unlimited}
	if !sc.pure {
		d.Coord = sc.path
	}
	for _, old := range g.Dims {
		if old.Name == name {
			return name
		}
	}
	g.AddDim(d)
	return name
}

// ReadInto reads the selection h of a fixed-size variable into dst, or of
// an attribute's value flattened (omni.ReaderAttrPath).
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
	if r.refuse != nil {
		return r.refuse
	}
	if err := omni.CheckReadInto(p, r.v, h, dst); err != nil {
		return err
	}
	if h.Len() == 0 {
		return nil
	}
	return f.readLocked(r, h, unsafe.Pointer(&dst[0]))
}

// ReadStrings reads the selection of a variable-length string variable.
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
	if r.refuse != nil {
		return nil, r.refuse
	}
	n := h.Len()
	if n == 0 {
		return []string{}, nil
	}
	buf := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	if buf == nil {
		return nil, fmt.Errorf("%s: out of memory", p)
	}
	defer C.free(buf)
	if err := f.readLocked(r, h, buf); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if s := C.iw5_str_at((**C.char)(buf), C.size_t(i)); s != nil {
			out[i] = C.GoString(s)
		}
	}
	mt, ms := f.memTypeLocked(r), C.H5Screate_simple(1, (*C.hsize_t)(unsafe.Pointer(&n)), nil)
	C.iw5_reclaim(mt, ms, buf)
	C.H5Sclose(ms)
	C.H5Tclose(mt)
	return out, nil
}

func (f *File) refLocked(p string, h omni.Hyperslab) (*varRef, error) {
	if f.fid <= 0 {
		return nil, fmt.Errorf("%s: file closed: %w", p, omni.ErrInvalid)
	}
	r := f.vars[p] // exact first: a stored name may be ".." (omni.EscapeName)
	if r == nil {
		r = f.vars[path.Clean("/"+p)]
	}
	if r == nil {
		return nil, fmt.Errorf("variable %s: %w", p, omni.ErrNotFound)
	}
	if err := h.Check(r.v.Shape); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if r.did <= 0 {
		cp := cstr(r.obj)
		r.did = C.H5Dopen2(f.fid, cp, C.iw5_p_default())
		free(unsafe.Pointer(cp))
		if r.did < 0 {
			r.did = 0
			return nil, h5err("open dataset " + r.obj)
		}
	}
	return r, nil
}

// memTypeLocked is the memory type of r: the element type, or a compound
// holding only r's field at offset 0.
func (f *File) memTypeLocked(r *varRef) C.hid_t {
	tid := C.H5Dget_type(r.did)
	defer C.H5Tclose(tid)
	if r.field == "" {
		return memType(tid, r.v.DType)
	}
	cf := cstr(r.field)
	defer free(unsafe.Pointer(cf))
	idx := C.H5Tget_member_index(tid, cf)
	ft := C.H5Tget_member_type(tid, C.uint(idx))
	defer C.H5Tclose(ft)
	mt := memType(ft, r.v.DType)
	defer C.H5Tclose(mt)
	ct := C.H5Tcreate(C.H5T_COMPOUND, C.H5Tget_size(mt))
	C.H5Tinsert(ct, cf, 0, mt)
	return ct
}

func (f *File) readLocked(r *varRef, h omni.Hyperslab, buf unsafe.Pointer) error {
	mt := f.memTypeLocked(r)
	if mt < 0 {
		return h5err("memory type of " + r.v.Path)
	}
	defer C.H5Tclose(mt)
	if err := checkMemSize(r.v, mt); err != nil {
		return err
	}
	fs := C.H5Dget_space(r.did)
	if fs < 0 {
		return h5err("dataspace of " + r.v.Path)
	}
	defer C.H5Sclose(fs)
	var ms C.hid_t
	if rank := len(h.Count); rank == 0 {
		ms = C.H5Screate(C.H5S_SCALAR)
	} else {
		start, count, stride := hs(h.Start), hs(h.Count), hs(h.Strides())
		if C.H5Sselect_hyperslab(fs, C.H5S_SELECT_SET, &start[0], &stride[0], &count[0], nil) < 0 {
			return h5err("select hyperslab of " + r.v.Path)
		}
		ms = C.H5Screate_simple(C.int(rank), &count[0], nil)
	}
	defer C.H5Sclose(ms)
	if C.H5Dread(r.did, mt, ms, fs, C.iw5_p_default(), buf) < 0 {
		return h5err("read " + r.v.Path)
	}
	return nil
}

// checkMemSize fails unless an element of memory type mt has the size of
// v's dtype: H5Dread fills count × the type's size, and a smaller type
// would leave the rest of the destination as it was.
func checkMemSize(v *omni.Variable, mt C.hid_t) error {
	want := v.DType.Size()
	if v.DType == omni.String {
		want = int(unsafe.Sizeof(uintptr(0)))
	}
	if got := int(C.H5Tget_size(mt)); got != want {
		return fmt.Errorf("%s: memory type of %d bytes for %s: %w", v.Path, got, v.DType, omni.ErrNotSupported)
	}
	return nil
}

func hs(v []int64) []C.hsize_t {
	out := make([]C.hsize_t, len(v))
	for i, x := range v {
		out[i] = C.hsize_t(x)
	}
	return out
}

// readAttrs reads the attributes of an object, skipping hidden ones and
// types with no OMNI form.
func readAttrs(loc C.hid_t) ([]omni.Attribute, error) {
	var info C.H5O_info_t
	if C.H5Oget_info2(loc, &info, C.H5O_INFO_NUM_ATTRS) < 0 {
		return nil, h5err("object info")
	}
	var out []omni.Attribute
	dot := cstr(".")
	defer free(unsafe.Pointer(dot))
	for i := C.hsize_t(0); i < info.num_attrs; i++ {
		aid := C.H5Aopen_by_idx(loc, dot, C.H5_INDEX_NAME, C.H5_ITER_INC, i, C.iw5_p_default(), C.iw5_p_default())
		if aid < 0 {
			return nil, h5err("open attribute")
		}
		a, ok, err := readAttr(aid)
		C.H5Aclose(aid)
		if err != nil {
			return nil, err
		}
		if ok && !hiddenAttrs[a.Name] {
			out = append(out, a)
		}
	}
	return out, nil
}

func attrName(aid C.hid_t) string {
	n := C.H5Aget_name(aid, 0, nil)
	if n <= 0 || n > maxNameLen {
		return ""
	}
	buf := make([]C.char, n+1)
	C.H5Aget_name(aid, C.size_t(n+1), &buf[0])
	return C.GoString(&buf[0])
}

func readAttr(aid C.hid_t) (omni.Attribute, bool, error) {
	name := attrName(aid)
	tid := C.H5Aget_type(aid)
	sid := C.H5Aget_space(aid)
	defer C.H5Tclose(tid)
	defer C.H5Sclose(sid)
	if name == "" || tid < 0 || sid < 0 {
		return omni.Attribute{}, false, nil
	}
	npts := int64(C.H5Sget_simple_extent_npoints(sid))
	if npts <= 0 || C.H5Sget_simple_extent_type(sid) == C.H5S_NULL {
		return omni.Attribute{}, false, nil
	}
	t, ok := elemType(tid)
	if !ok {
		return omni.Attribute{}, false, nil
	}
	a := omni.Attribute{Name: name, Type: t}
	if n := npts * int64(max(t.Size(), 1)); npts > maxAttrElems || t != omni.String && n > omni.MaxAttrBytes {
		// Not read now: the views hold no value this large in memory
		// (omni.CapAttrs). A numeric one is read on demand (omni.AttrVar:
		// ReadInto of omni.ReaderAttrPath), flattened in C order.
		a.Type = stringIfFixed(t)
		a.Value, a.Omitted = []string{}, n
		if !a.Type.IsString() {
			a.Value, a.Elems = nil, npts
		}
		return a, true, nil
	}
	var err error
	switch {
	case t == omni.String:
		a.Value, err = attrVlenStrings(aid, sid, npts)
	case t.IsString():
		a.Value, err = attrFixedStrings(aid, tid, t.Size(), npts)
		a.Type = omni.String
	default:
		a.Value, err = attrNumbers(aid, tid, t, npts)
	}
	if err != nil {
		return omni.Attribute{}, false, fmt.Errorf("attribute %s: %w", name, err)
	}
	return a, true, nil
}

func stringIfFixed(t omni.DType) omni.DType {
	if t.IsString() {
		return omni.String
	}
	return t
}

func attrNumbers(aid, tid C.hid_t, t omni.DType, n int64) (any, error) {
	mt := memType(tid, t)
	defer C.H5Tclose(mt)
	size := int64(C.H5Tget_size(mt))
	if size != int64(t.Size()) {
		return nil, fmt.Errorf("native size %d for %s: %w", size, t, omni.ErrNotSupported)
	}
	raw := make([]byte, n*size)
	if C.H5Aread(aid, mt, unsafe.Pointer(&raw[0])) < 0 {
		return nil, h5err("read attribute")
	}
	return widen(t, raw), nil
}

// widen converts raw native values to the attribute value slice types.
func widen(t omni.DType, raw []byte) any {
	n := len(raw) / t.Size()
	switch {
	case t.IsFloat():
		out := make([]float64, n)
		for i := range out {
			out[i] = omni.Float64At(t, raw[i*t.Size():])
		}
		return out
	case t.IsSigned():
		out := make([]int64, n)
		for i := range out {
			out[i] = signedAt(t, raw[i*t.Size():])
		}
		return out
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = unsignedAt(t, raw[i*t.Size():])
	}
	return out
}

func signedAt(t omni.DType, b []byte) int64 {
	switch t.Size() {
	case 1:
		return int64(int8(b[0]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(b)))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(b)))
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func unsignedAt(t omni.DType, b []byte) uint64 {
	switch t.Size() {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}

func attrFixedStrings(aid, tid C.hid_t, size int, n int64) ([]string, error) {
	mt := C.H5Tcopy(tid)
	defer C.H5Tclose(mt)
	raw := make([]byte, int64(size)*n)
	if C.H5Aread(aid, mt, unsafe.Pointer(&raw[0])) < 0 {
		return nil, h5err("read attribute")
	}
	spacePad := C.H5Tget_strpad(tid) == C.H5T_STR_SPACEPAD
	out := make([]string, n)
	for i := range out {
		s := string(raw[i*size : (i+1)*size])
		if j := strings.IndexByte(s, 0); j >= 0 {
			s = s[:j]
		}
		if spacePad {
			s = strings.TrimRight(s, " ")
		}
		out[i] = s
	}
	return out, nil
}

func attrVlenStrings(aid, sid C.hid_t, n int64) ([]string, error) {
	mt := C.iw5_vlen_str()
	defer C.H5Tclose(mt)
	buf := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	if buf == nil {
		return nil, fmt.Errorf("out of memory")
	}
	defer C.free(buf)
	if C.H5Aread(aid, mt, buf) < 0 {
		return nil, h5err("read attribute")
	}
	out := make([]string, n)
	for i := range out {
		if s := C.iw5_str_at((**C.char)(buf), C.size_t(i)); s != nil {
			out[i] = C.GoString(s)
		}
	}
	C.iw5_reclaim(mt, sid, buf)
	return out, nil
}

// rawAttrString reads a string attribute of loc directly (hidden ones too).
func rawAttrString(loc C.hid_t, name string) string {
	cn := cstr(name)
	defer free(unsafe.Pointer(cn))
	if C.H5Aexists(loc, cn) <= 0 {
		return ""
	}
	aid := C.H5Aopen(loc, cn, C.iw5_p_default())
	if aid < 0 {
		return ""
	}
	defer C.H5Aclose(aid)
	a, ok, err := readAttr(aid)
	if !ok || err != nil {
		return ""
	}
	return a.String()
}

var _ = math.NaN

// maxLazyAttrElems bounds an attribute read on demand: the helper reads
// it whole for each request (libhdf5 reads no part of an attribute).
const maxLazyAttrElems = 1 << 28

// readAttrLocked reads the selection h of the value of attribute name of
// the object at path obj (a variable's model path or a group's),
// flattened in C order, into dst.
func (f *File) readAttrLocked(obj, name string, h omni.Hyperslab, dst []byte) error {
	if f.fid <= 0 {
		return fmt.Errorf("%s: file closed: %w", obj, omni.ErrInvalid)
	}
	loc := obj
	if r := f.vars[obj]; r != nil {
		if r.field != "" {
			return fmt.Errorf("attribute %s of compound field %s: %w", name, obj, omni.ErrNotFound)
		}
		loc = r.obj
	}
	co, cn := cstr(loc), cstr(name)
	defer free(unsafe.Pointer(co))
	defer free(unsafe.Pointer(cn))
	if C.H5Aexists_by_name(f.fid, co, cn, C.iw5_p_default()) <= 0 {
		return fmt.Errorf("attribute %s of %s: %w", name, obj, omni.ErrNotFound)
	}
	aid := C.H5Aopen_by_name(f.fid, co, cn, C.iw5_p_default(), C.iw5_p_default())
	if aid < 0 {
		return h5err("open attribute " + name + " of " + loc)
	}
	defer C.H5Aclose(aid)
	tid, sid := C.H5Aget_type(aid), C.H5Aget_space(aid)
	defer C.H5Tclose(tid)
	defer C.H5Sclose(sid)
	t, ok := elemType(tid)
	npts := int64(C.H5Sget_simple_extent_npoints(sid))
	if !ok || t.IsString() || npts <= 0 {
		return fmt.Errorf("attribute %s of %s: no numeric value: %w", name, obj, omni.ErrNotSupported)
	}
	if npts > maxLazyAttrElems {
		return fmt.Errorf("attribute %s of %s: %d values, more than %d: %w", name, obj, npts, maxLazyAttrElems, omni.ErrNotSupported)
	}
	if err := h.Check([]int64{npts}); err != nil {
		return fmt.Errorf("attribute %s of %s: %w", name, obj, err)
	}
	size := int64(t.Size())
	if int64(len(dst)) != h.Bytes(t) {
		return fmt.Errorf("attribute %s: buffer of %d bytes for %d: %w", name, len(dst), h.Bytes(t), omni.ErrInvalid)
	}
	mt := memType(tid, t)
	defer C.H5Tclose(mt)
	if int64(C.H5Tget_size(mt)) != size {
		return fmt.Errorf("attribute %s: native size for %s: %w", name, t, omni.ErrNotSupported)
	}
	buf := make([]byte, npts*size)
	if C.H5Aread(aid, mt, unsafe.Pointer(&buf[0])) < 0 {
		return h5err("read attribute " + name)
	}
	for k := int64(0); k < h.Count[0]; k++ {
		i := h.Start[0] + k*h.StrideAt(0)
		copy(dst[k*size:(k+1)*size], buf[i*size:(i+1)*size])
	}
	return nil
}
