package netcdf

/*
#include <stdlib.h>
#include <netcdf.h>
static void iwnc_set(char **v, size_t i, char *s) { v[i] = s; }
static char *iwnc_get(char **v, size_t i) { return v[i]; }
*/
import "C"

import (
	"fmt"
	"path"
	"strings"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

var ncTypeOf = map[omni.DType]C.nc_type{
	omni.Int8: C.NC_BYTE, omni.Uint8: C.NC_UBYTE, omni.Bool: C.NC_UBYTE, omni.Int16: C.NC_SHORT,
	omni.Uint16: C.NC_USHORT, omni.Int32: C.NC_INT, omni.Uint32: C.NC_UINT, omni.Int64: C.NC_INT64,
	omni.Uint64: C.NC_UINT64, omni.Float32: C.NC_FLOAT, omni.Float64: C.NC_DOUBLE,
	omni.FixedString(1): C.NC_CHAR, omni.String: C.NC_STRING,
}

// Write creates the NetCDF-4 file p holding ds, pulling each variable whole
// through read. Groups, unlimited dimensions, chunking (with shuffle and
// deflate when the source was filtered) are kept; S<n> strings with n > 1
// become NC_STRING; compound groups become plain groups; a single string
// attribute is written as text (what ncdump and CF expect).
func Write(p string, ds *omni.Dataset, read omni.ReadFunc) error {
	mu.Lock()
	cp := C.CString(p)
	var ncid C.int
	rc := C.nc_create(cp, C.NC_NETCDF4|C.NC_CLOBBER, &ncid)
	C.free(unsafe.Pointer(cp))
	mu.Unlock()
	if err := ncerr("create "+p, rc); err != nil {
		return err
	}
	w := &writer{ds: ds, read: read, dims: map[string]map[string]C.int{}, vars: map[string][2]C.int{}}
	err := w.define(ncid, ds.Root)
	if err == nil {
		mu.Lock()
		err = ncerr("enddef", C.nc_enddef(ncid))
		mu.Unlock()
	}
	if err == nil {
		err = w.data()
	}
	mu.Lock()
	if cerr := ncerr("close", C.nc_close(ncid)); err == nil {
		err = cerr
	}
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

type writer struct {
	ds   *omni.Dataset
	read omni.ReadFunc
	dims map[string]map[string]C.int // group path → dim name → id
	vars map[string][2]C.int         // variable path → group id, var id
}

func (w *writer) define(gid C.int, g *omni.Group) error {
	mu.Lock()
	err := w.defineLocked(gid, g)
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", g.Path, err)
	}
	for _, c := range g.Groups {
		cn := C.CString(omni.ExportName(c.Name))
		var cid C.int
		mu.Lock()
		rc := C.nc_def_grp(gid, cn, &cid)
		mu.Unlock()
		C.free(unsafe.Pointer(cn))
		if err := ncerr("define group "+c.Path, rc); err != nil {
			return err
		}
		if err := w.define(cid, c); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) defineLocked(gid C.int, g *omni.Group) error {
	if err := writeAttrs(gid, C.NC_GLOBAL, g.Attrs, 0); err != nil {
		return err
	}
	w.dims[g.Path] = map[string]C.int{}
	for _, d := range g.Dims {
		if _, err := w.defDim(gid, g.Path, d.Name, d.Size, d.Unlimited); err != nil {
			return err
		}
	}
	for _, v := range g.Variables {
		if err := w.defVar(gid, g, v); err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	return nil
}

func (w *writer) defDim(gid C.int, gpath, name string, size int64, unl bool) (C.int, error) {
	cn := C.CString(omni.ExportName(name))
	defer C.free(unsafe.Pointer(cn))
	n := C.size_t(size)
	if unl {
		n = C.NC_UNLIMITED
	}
	var id C.int
	if err := ncerr("define dimension "+name, C.nc_def_dim(gid, cn, n, &id)); err != nil {
		return 0, err
	}
	w.dims[gpath][name] = id
	return id, nil
}

// dimID finds the dimension name visible from group gpath, defining it in
// gpath if no group declares it (or declares another size).
func (w *writer) dimID(gid C.int, gpath, name string, size int64) (C.int, error) {
	for p := gpath; ; p = path.Dir(p) {
		if id, ok := w.dims[p][name]; ok {
			if d, err := w.ds.Dim(p, name); err != nil || d.Size == size || d.Unlimited {
				return id, nil
			}
			break
		}
		if p == "/" {
			break
		}
	}
	if _, taken := w.dims[gpath][name]; taken {
		name = fmt.Sprintf("%s_%d", name, size)
		if id, ok := w.dims[gpath][name]; ok {
			return id, nil
		}
	}
	return w.defDim(gid, gpath, name, size, false)
}

func ncType(t omni.DType) C.nc_type {
	if nt, ok := ncTypeOf[t]; ok {
		return nt
	}
	return C.NC_STRING
}

func (w *writer) defVar(gid C.int, g *omni.Group, v *omni.Variable) error {
	ids := make([]C.int, len(v.Shape)+1)
	for i, n := range v.Shape {
		id, err := w.dimID(gid, g.Path, v.Dims[i], n)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	cn := C.CString(omni.ExportName(v.Name))
	defer C.free(unsafe.Pointer(cn))
	var varid C.int
	if err := ncerr("define variable", C.nc_def_var(gid, cn, ncType(v.DType), C.int(len(v.Shape)), &ids[0], &varid)); err != nil {
		return err
	}
	w.vars[v.Path] = [2]C.int{gid, varid}
	if v.Chunks != nil && v.Len() > 0 {
		cs := make([]C.size_t, len(v.Chunks))
		for i, c := range v.Chunks {
			cs[i] = C.size_t(max(min(c, v.Shape[i]), 1))
		}
		if err := ncerr("chunking", C.nc_def_var_chunking(gid, varid, C.NC_CHUNKED, &cs[0])); err != nil {
			return err
		}
		if len(v.Filters) > 0 && v.DType != omni.String {
			if err := ncerr("deflate", C.nc_def_var_deflate(gid, varid, 1, 1, 4)); err != nil {
				return err
			}
		}
	}
	return writeAttrs(gid, varid, v.Attrs, ncType(v.DType))
}

func writeAttrs(gid, varid C.int, attrs []omni.Attribute, varType C.nc_type) error {
	for _, a := range attrs {
		if err := writeAttr(gid, varid, a, varType); err != nil {
			return fmt.Errorf("attribute %s: %w", a.Name, err)
		}
	}
	return nil
}

func writeAttr(gid, varid C.int, a omni.Attribute, varType C.nc_type) error {
	n := C.size_t(a.Len())
	if n == 0 {
		return nil
	}
	cn := C.CString(omni.ExportName(a.Name))
	defer C.free(unsafe.Pointer(cn))
	t := ncType(a.Type)
	if a.Name == "_FillValue" {
		if varType == 0 || varType == C.NC_STRING {
			return nil
		}
		t = varType
	}
	var rc C.int
	switch v := a.Value.(type) {
	case []string:
		if len(v) == 1 {
			s := C.CString(v[0])
			rc = C.nc_put_att_text(gid, varid, cn, C.size_t(len(v[0])), s)
			C.free(unsafe.Pointer(s))
			break
		}
		ptrs := make([]*C.char, len(v))
		for i, s := range v {
			ptrs[i] = C.CString(s)
		}
		rc = C.nc_put_att_string(gid, varid, cn, n, &ptrs[0])
		for _, p := range ptrs {
			C.free(unsafe.Pointer(p))
		}
	case []float64:
		rc = C.nc_put_att_double(gid, varid, cn, t, n, (*C.double)(&v[0]))
	case []int64:
		rc = C.nc_put_att_longlong(gid, varid, cn, t, n, (*C.longlong)(unsafe.Pointer(&v[0])))
	case []uint64:
		rc = C.nc_put_att_ulonglong(gid, varid, cn, t, n, (*C.ulonglong)(unsafe.Pointer(&v[0])))
	default:
		return fmt.Errorf("value %T: %w", a.Value, omni.ErrInvalid)
	}
	return ncerr("write", rc)
}

func (w *writer) data() error {
	for _, v := range w.ds.Variables() {
		if err := w.put(v); err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
	}
	return nil
}

func (w *writer) put(v *omni.Variable) error {
	if v.Len() == 0 {
		return nil
	}
	data, err := w.read(v)
	if err != nil {
		return err
	}
	ids := w.vars[v.Path]
	s := cslab(omni.All(v.Shape))
	mu.Lock()
	defer mu.Unlock()
	if !v.DType.IsString() || v.DType == omni.FixedString(1) {
		if int64(len(data)) != v.Len()*int64(v.DType.Size()) {
			return fmt.Errorf("%d bytes for %d elements: %w", len(data), v.Len(), omni.ErrInvalid)
		}
		return ncerr("write", C.nc_put_vara(ids[0], ids[1], &s.start[0], &s.count[0], unsafe.Pointer(&data[0])))
	}
	ss, err := omni.Strings(v.DType, data)
	if err != nil {
		return err
	}
	if int64(len(ss)) != v.Len() {
		return fmt.Errorf("%d strings for %d elements: %w", len(ss), v.Len(), omni.ErrInvalid)
	}
	buf := C.calloc(C.size_t(len(ss)), C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(buf)
	for i, str := range ss {
		C.iwnc_set((**C.char)(buf), C.size_t(i), C.CString(strings.TrimRight(str, "\x00")))
	}
	defer func() {
		for i := range ss {
			C.free(unsafe.Pointer(C.iwnc_get((**C.char)(buf), C.size_t(i))))
		}
	}()
	return ncerr("write strings", C.nc_put_vara_string(ids[0], ids[1], &s.start[0], &s.count[0], (**C.char)(buf)))
}
