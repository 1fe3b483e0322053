package hdf5

/*
#include "h5.h"
*/
import "C"

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

// Write creates the HDF5 file p holding ds, pulling each variable whole
// through read. Chunking is kept (clamped to the shape) and chunked data is
// written with shuffle+deflate; unlimited dimensions stay unlimited;
// dimensions with a coordinate variable become dimension scales attached
// to every axis that uses them. Compound groups are written as plain
// groups of their fields; bool is written as uint8.
func Write(p string, ds *omni.Dataset, read omni.ReadFunc) error {
	mu.Lock()
	cp := cstr(p)
	fid := C.H5Fcreate(cp, C.H5F_ACC_TRUNC, C.iw5_p_default(), C.iw5_p_default())
	free(unsafe.Pointer(cp))
	if fid < 0 {
		err := h5err("create " + p)
		mu.Unlock()
		return err
	}
	mu.Unlock()
	w := &writer{ds: ds, read: read, dids: map[string]C.hid_t{}}
	err := w.group(fid, ds.Root)
	if err == nil {
		err = w.scales()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, did := range w.dids {
		C.H5Dclose(did)
	}
	if C.H5Fclose(fid) < 0 && err == nil {
		err = h5err("close " + p)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

type writer struct {
	ds   *omni.Dataset
	read omni.ReadFunc
	dids map[string]C.hid_t // variable path → open dataset
}

func (w *writer) group(gid C.hid_t, g *omni.Group) error {
	mu.Lock()
	err := writeAttrs(gid, g.Attrs)
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("attributes of %s: %w", g.Path, err)
	}
	for _, v := range g.Variables {
		if err := w.variable(gid, v); err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
	}
	for _, c := range g.Groups {
		if err := w.child(gid, c); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) child(gid C.hid_t, c *omni.Group) error {
	mu.Lock()
	cn := cstr(linkName(c.Name))
	cid := C.H5Gcreate2(gid, cn, C.iw5_p_default(), C.iw5_p_default(), C.iw5_p_default())
	free(unsafe.Pointer(cn))
	if cid < 0 {
		err := h5err("create group " + c.Path)
		mu.Unlock()
		return err
	}
	mu.Unlock()
	defer func() { mu.Lock(); C.H5Gclose(cid); mu.Unlock() }()
	return w.group(cid, c)
}

// fileType is the HDF5 file type for t; the caller closes it.
func fileType(t omni.DType) C.hid_t {
	k := map[omni.DType]int{
		omni.Int8: sI8, omni.Uint8: sU8, omni.Bool: sU8, omni.Int16: sI16, omni.Uint16: sU16,
		omni.Int32: sI32, omni.Uint32: sU32, omni.Int64: sI64, omni.Uint64: sU64,
		omni.Float32: sF32, omni.Float64: sF64,
	}
	if n, ok := k[t]; ok {
		return C.H5Tcopy(C.iw5_t_native(C.int(n)))
	}
	if t == omni.String {
		return C.iw5_vlen_str()
	}
	return C.iw5_fixed_str(C.size_t(t.Size()))
}

// nativeType is the memory type of raw OMNI data of type t.
func nativeType(t omni.DType) C.hid_t {
	k := map[omni.DType]int{
		omni.Int8: nSchar, omni.Uint8: nUchar, omni.Bool: nUchar, omni.Int16: nShort, omni.Uint16: nUshort,
		omni.Int32: nInt, omni.Uint32: nUint, omni.Int64: nLlong, omni.Uint64: nUllong,
		omni.Float32: nFloat, omni.Float64: nDouble,
	}
	if n, ok := k[t]; ok {
		return C.H5Tcopy(C.iw5_t_native(C.int(n)))
	}
	return fileType(t)
}

func (w *writer) variable(gid C.hid_t, v *omni.Variable) error {
	data, err := w.read(v)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	did, err := w.createLocked(gid, v)
	if err != nil {
		return err
	}
	w.dids[v.Path] = did
	if err := writeAttrs(did, v.Attrs); err != nil {
		return err
	}
	if v.Len() == 0 {
		return nil
	}
	mt := nativeType(v.DType)
	defer C.H5Tclose(mt)
	if v.DType == omni.String {
		return writeStrings(did, mt, data, v.Len())
	}
	if int64(len(data)) != v.Len()*int64(v.DType.Size()) {
		return fmt.Errorf("%d bytes for %d elements of %s: %w", len(data), v.Len(), v.DType, omni.ErrInvalid)
	}
	if C.H5Dwrite(did, mt, C.H5S_ALL, C.H5S_ALL, C.iw5_p_default(), unsafe.Pointer(&data[0])) < 0 {
		return h5err("write")
	}
	return nil
}

func (w *writer) createLocked(gid C.hid_t, v *omni.Variable) (C.hid_t, error) {
	ft := fileType(v.DType)
	defer C.H5Tclose(ft)
	rank := len(v.Shape)
	var sid C.hid_t
	dcpl := C.iw5_p_dataset_create()
	defer C.H5Pclose(dcpl)
	if rank == 0 {
		sid = C.H5Screate(C.H5S_SCALAR)
	} else {
		dims, maxd := hs(v.Shape), hs(v.Shape)
		chunked := v.Chunks != nil
		for i := range maxd {
			if d, err := w.ds.Dim(path.Dir(v.Path), v.Dims[i]); err == nil && d.Unlimited {
				maxd[i], chunked = C.iw5_unlimited(), true
			}
		}
		if chunked && v.Len() > 0 || slices.Contains(maxd, C.iw5_unlimited()) {
			chunk := chunkShape(v)
			C.H5Pset_chunk(dcpl, C.int(rank), &hs(chunk)[0])
			if v.DType.Size() > 0 && len(v.Filters) > 0 {
				C.H5Pset_shuffle(dcpl)
				C.H5Pset_deflate(dcpl, 4)
			}
		}
		sid = C.H5Screate_simple(C.int(rank), &dims[0], &maxd[0])
	}
	defer C.H5Sclose(sid)
	cn := cstr(linkName(v.Name))
	defer free(unsafe.Pointer(cn))
	did := C.H5Dcreate2(gid, cn, ft, sid, C.iw5_p_default(), dcpl, C.iw5_p_default())
	if did < 0 {
		return 0, h5err("create dataset")
	}
	return did, nil
}

// chunkShape keeps v's chunks clamped to its shape, or picks rows of about
// 1 MiB.
func chunkShape(v *omni.Variable) []int64 {
	out := make([]int64, len(v.Shape))
	for i, n := range v.Shape {
		c := n
		if v.Chunks != nil {
			c = min(v.Chunks[i], max(n, 1))
		} else if i == 0 {
			c = min(n, 1024)
		}
		out[i] = max(c, 1)
	}
	return out
}

func writeStrings(did, mt C.hid_t, data []byte, n int64) error {
	ss, err := omni.DecodeStrings(data)
	if err != nil {
		return err
	}
	if int64(len(ss)) != n {
		return fmt.Errorf("%d strings for %d elements: %w", len(ss), n, omni.ErrInvalid)
	}
	buf := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(buf)
	for i, s := range ss {
		C.iw5_str_set((**C.char)(buf), C.size_t(i), C.CString(s))
	}
	defer func() {
		for i := range ss {
			C.free(unsafe.Pointer(C.iw5_str_at((**C.char)(buf), C.size_t(i))))
		}
	}()
	if C.H5Dwrite(did, mt, C.H5S_ALL, C.H5S_ALL, C.iw5_p_default(), buf) < 0 {
		return h5err("write strings")
	}
	return nil
}

// writeAttrs writes attributes: one value as a scalar, strings as UTF-8
// variable-length strings (as h5py does).
func writeAttrs(loc C.hid_t, attrs []omni.Attribute) error {
	for _, a := range attrs {
		if err := writeAttr(loc, a); err != nil {
			return fmt.Errorf("attribute %s: %w", a.Name, err)
		}
	}
	return nil
}

func writeAttr(loc C.hid_t, a omni.Attribute) error {
	n := a.Len()
	if n == 0 {
		return nil
	}
	var sid C.hid_t
	if n == 1 {
		sid = C.H5Screate(C.H5S_SCALAR)
	} else {
		d := []C.hsize_t{C.hsize_t(n)}
		sid = C.H5Screate_simple(1, &d[0], nil)
	}
	defer C.H5Sclose(sid)
	t := a.Type
	if t.IsString() {
		t = omni.String
	}
	ft := fileType(t)
	defer C.H5Tclose(ft)
	cn := cstr(omni.WritableName(a.Name, func(s string) bool { return s != "" && !strings.Contains(s, "\x00") }))
	defer free(unsafe.Pointer(cn))
	if C.H5Aexists(loc, cn) > 0 {
		C.H5Adelete(loc, cn)
	}
	aid := C.H5Acreate2(loc, cn, ft, sid, C.iw5_p_default(), C.iw5_p_default())
	if aid < 0 {
		return h5err("create")
	}
	defer C.H5Aclose(aid)
	var rc C.herr_t
	switch v := a.Value.(type) {
	case []string:
		buf := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
		for i, s := range v {
			C.iw5_str_set((**C.char)(buf), C.size_t(i), C.CString(s))
		}
		rc = C.H5Awrite(aid, ft, buf)
		for i := range v {
			C.free(unsafe.Pointer(C.iw5_str_at((**C.char)(buf), C.size_t(i))))
		}
		C.free(buf)
	case []float64:
		rc = C.H5Awrite(aid, C.iw5_t_native(nDouble), unsafe.Pointer(&v[0]))
	case []int64:
		rc = C.H5Awrite(aid, C.iw5_t_native(nLlong), unsafe.Pointer(&v[0]))
	case []uint64:
		rc = C.H5Awrite(aid, C.iw5_t_native(nUllong), unsafe.Pointer(&v[0]))
	default:
		return fmt.Errorf("value %T: %w", a.Value, omni.ErrInvalid)
	}
	if rc < 0 {
		return h5err("write")
	}
	return nil
}

// scales makes every coordinate variable a dimension scale and attaches it
// to the axes that use its dimension.
func (w *writer) scales() error {
	mu.Lock()
	defer mu.Unlock()
	for _, v := range w.ds.Variables() {
		did := w.dids[v.Path]
		for i := range v.Dims {
			c, err := w.ds.Coord(v, i)
			if err != nil || c.Path == v.Path {
				continue
			}
			cid, ok := w.dids[c.Path]
			if !ok {
				continue
			}
			if C.H5DSis_scale(cid) <= 0 {
				cn := cstr(linkName(c.Name))
				rc := C.H5DSset_scale(cid, cn)
				free(unsafe.Pointer(cn))
				if rc < 0 {
					return h5err("set scale " + c.Path)
				}
			}
			if C.H5DSattach_scale(did, cid, C.uint(i)) < 0 {
				return h5err(fmt.Sprintf("attach %s to axis %d of %s", c.Path, i, v.Path))
			}
		}
	}
	return nil
}

// linkName is the HDF5 link name of a model name: the stored name, which
// HDF5 takes as bytes ("..", invalid UTF-8), unless it is empty, "." or
// holds '/' or NUL (the escaped name then).
func linkName(name string) string {
	return omni.WritableName(name, func(s string) bool {
		return s != "" && s != "." && !strings.ContainsAny(s, "/\x00")
	})
}
