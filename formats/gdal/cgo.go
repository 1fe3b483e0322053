package gdal

/*
#cgo pkg-config: gdal
#include <stdlib.h>
#include <gdal.h>
#include <cpl_conv.h>
#include <cpl_error.h>
#include <cpl_string.h>
#include <ogr_srs_api.h>

static void iwd_init(void) {
	CPLSetErrorHandler(CPLQuietErrorHandler);
	// No network. .aux.xml side files (PAM) are read as GDAL does;
	// datasets are opened read only and never changed, so none is written.
	CPLSetConfigOption("GDAL_HTTP_TIMEOUT", "1");
	CPLSetConfigOption("CPL_VSIL_CURL_ALLOWED_EXTENSIONS", "none");
	GDALAllRegister();
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/iowarp/iowarp/formats/omni"
)

// calls run on the one OS thread that calls libgdal: GDAL's error
// state and PROJ's context (with its open proj.db) are per thread, and a
// goroutine may change threads between two cgo calls. It also
// serialises the calls (datasets are not thread safe). The thread, and
// GDALAllRegister, start at the first call: a process that links this
// package but opens nothing (the daemon) never loads GDAL's drivers.
var (
	calls      = make(chan func())
	threadOnce sync.Once
)

func serveThread() {
	runtime.LockOSThread()
	C.iwd_init()
	for f := range calls {
		f()
	}
}

// onThread runs f on the libgdal thread and waits for it.
func onThread(f func()) {
	threadOnce.Do(func() { go serveThread() })
	done := make(chan struct{})
	calls <- func() {
		defer close(done)
		f()
	}
	<-done
}

func gdalErr(op string) error {
	msg := C.GoString(C.CPLGetLastErrorMsg())
	C.CPLErrorReset()
	if msg == "" {
		msg = "failed"
	}
	return fmt.Errorf("%s: %w: %s", op, ErrLibrary, msg)
}

// cstrings is a NULL-terminated C array of C strings.
type cstrings struct {
	p **C.char
	n int
}

func newCStrings(ss []string) cstrings {
	arr := (**C.char)(C.calloc(C.size_t(len(ss)+1), C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(arr, len(ss)+1)
	for i, x := range ss {
		s[i] = C.CString(x)
	}
	return cstrings{p: arr, n: len(ss)}
}

func (c cstrings) free() {
	for _, p := range unsafe.Slice(c.p, c.n) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(c.p))
}

// goStrings copies a NULL-terminated C string list (not freed).
func goStrings(p **C.char) []string {
	if p == nil {
		return nil
	}
	var out []string
	for _, s := range unsafe.Slice(p, 1<<20) {
		if s == nil {
			break
		}
		out = append(out, C.GoString(s))
	}
	return out
}

// dataset is an open GDALDatasetH.
type dataset struct {
	h     C.GDALDatasetH
	multi bool
	root  C.GDALGroupH
	arrs  []C.GDALMDArrayH
}

// openDataset opens p read only with one of the drivers allowed, as a
// raster or (multi) through the multidimensional API.
func openDatasetLocked(p string, allowed []string, multi bool) (*dataset, error) {
	cp := C.CString(p)
	defer C.free(unsafe.Pointer(cp))
	al := newCStrings(allowed)
	defer al.free()
	flags := C.uint(C.GDAL_OF_READONLY | C.GDAL_OF_VERBOSE_ERROR)
	if multi {
		flags |= C.GDAL_OF_MULTIDIM_RASTER
	} else {
		flags |= C.GDAL_OF_RASTER
	}
	h := C.GDALOpenEx(cp, flags, al.p, nil, nil)
	if h == nil {
		return nil, gdalErr("GDALOpenEx")
	}
	d := &dataset{h: h, multi: multi}
	if multi {
		if d.root = C.GDALDatasetGetRootGroup(h); d.root == nil {
			err := gdalErr("GDALDatasetGetRootGroup")
			C.GDALClose(h)
			return nil, err
		}
	}
	return d, nil
}

func (d *dataset) closeLocked() {
	for _, a := range d.arrs {
		C.GDALMDArrayRelease(a)
	}
	d.arrs = nil
	if d.root != nil {
		C.GDALGroupRelease(d.root)
		d.root = nil
	}
	if d.h != nil {
		C.GDALClose(d.h)
		d.h = nil
	}
}

// rasterInfo is what the classic API tells of a dataset.
type rasterInfo struct {
	driver       string
	nx, ny       int64
	bands        []bandInfo
	gt           []float64 // nil without a geotransform
	wkt          string
	meta         []string // KEY=VALUE
	pixelIsPoint bool
}

type bandInfo struct {
	gdt                 int
	signedByte          bool
	nodata, scale, off  float64
	hasNodata           bool
	hasScale, hasOffset bool
	units, desc         string
	meta                []string
}

func (d *dataset) infoLocked() rasterInfo {
	var r rasterInfo
	r.driver = C.GoString(C.GDALGetDriverShortName(C.GDALGetDatasetDriver(d.h)))
	r.nx, r.ny = int64(C.GDALGetRasterXSize(d.h)), int64(C.GDALGetRasterYSize(d.h))
	var gt [6]C.double
	if C.GDALGetGeoTransform(d.h, &gt[0]) == C.CE_None {
		for _, x := range gt {
			r.gt = append(r.gt, float64(x))
		}
	}
	C.CPLErrorReset()
	r.wkt = C.GoString(C.GDALGetProjectionRef(d.h))
	r.meta = goStrings(C.GDALGetMetadata(C.GDALMajorObjectH(d.h), nil))
	for _, m := range r.meta {
		if m == "AREA_OR_POINT=Point" {
			r.pixelIsPoint = true
		}
	}
	n := int(C.GDALGetRasterCount(d.h))
	for i := 1; i <= n; i++ {
		b := C.GDALGetRasterBand(d.h, C.int(i))
		var bi bandInfo
		bi.gdt = int(C.GDALGetRasterDataType(b))
		var has C.int
		bi.nodata, bi.hasNodata = float64(C.GDALGetRasterNoDataValue(b, &has)), has != 0
		bi.scale, bi.hasScale = float64(C.GDALGetRasterScale(b, &has)), has != 0
		bi.off, bi.hasOffset = float64(C.GDALGetRasterOffset(b, &has)), has != 0
		bi.units = C.GoString(C.GDALGetRasterUnitType(b))
		bi.desc = C.GoString(C.GDALGetDescription(C.GDALMajorObjectH(b)))
		bi.meta = goStrings(C.GDALGetMetadata(C.GDALMajorObjectH(b), nil))
		dom := C.CString("IMAGE_STRUCTURE")
		key := C.CString("PIXELTYPE")
		if v := C.GDALGetMetadataItem(C.GDALMajorObjectH(b), key, dom); v != nil && C.GoString(v) == "SIGNEDBYTE" {
			bi.signedByte = true
		}
		C.free(unsafe.Pointer(dom))
		C.free(unsafe.Pointer(key))
		r.bands = append(r.bands, bi)
	}
	return r
}

// GDAL data types (gdal.h GDALDataType).
const (
	gdtByte     = C.GDT_Byte
	gdtUInt16   = C.GDT_UInt16
	gdtInt16    = C.GDT_Int16
	gdtUInt32   = C.GDT_UInt32
	gdtInt32    = C.GDT_Int32
	gdtUInt64   = C.GDT_UInt64
	gdtInt64    = C.GDT_Int64
	gdtFloat32  = C.GDT_Float32
	gdtFloat64  = C.GDT_Float64
	gdtCInt16   = C.GDT_CInt16
	gdtCInt32   = C.GDT_CInt32
	gdtCFloat32 = C.GDT_CFloat32
	gdtCFloat64 = C.GDT_CFloat64
)

// readBand reads rows [y0, y0+ny) × columns [x0, x0+nx) of band b (1-based)
// as gdt into buf (C order).
func (d *dataset) readBandLocked(b int, x0, y0, nx, ny int64, gdt int, buf []byte) error {
	band := C.GDALGetRasterBand(d.h, C.int(b))
	if band == nil {
		return gdalErr("GDALGetRasterBand")
	}
	if C.GDALRasterIO(band, C.GF_Read, C.int(x0), C.int(y0), C.int(nx), C.int(ny), unsafe.Pointer(&buf[0]),
		C.int(nx), C.int(ny), C.GDALDataType(gdt), 0, 0) != C.CE_None {
		return gdalErr(fmt.Sprintf("GDALRasterIO band %d", b))
	}
	return nil
}

// mdArray is one array of the multidimensional API.
type mdArray struct {
	h     C.GDALMDArrayH
	gdt   int
	shape []int64
	dims  []string
	attrs []omni.Attribute
	path  string
}

// walk lists the arrays below the root group, groups first by name.
func (d *dataset) walkLocked(maxArrays int) ([]*mdArray, [][2]string, error) {
	var arrs []*mdArray
	var groups [][2]string // path, parent path
	var rec func(g C.GDALGroupH, path string, depth int) error
	rec = func(g C.GDALGroupH, path string, depth int) error {
		if depth > 32 {
			return fmt.Errorf("groups nested deeper than 32: %w", omni.ErrNotSupported)
		}
		names := C.GDALGroupGetMDArrayNames(g, nil)
		for _, n := range goStrings(names) {
			if len(arrs) >= maxArrays {
				C.CSLDestroy(names)
				return fmt.Errorf("more than %d arrays: %w", maxArrays, omni.ErrNotSupported)
			}
			a, err := openArray(g, n, omni.JoinPath(path, n))
			if err != nil {
				C.CSLDestroy(names)
				return err
			}
			if a != nil {
				d.arrs = append(d.arrs, a.h)
				arrs = append(arrs, a)
			}
		}
		C.CSLDestroy(names)
		gn := C.GDALGroupGetGroupNames(g, nil)
		defer C.CSLDestroy(gn)
		for _, n := range goStrings(gn) {
			cn := C.CString(n)
			sub := C.GDALGroupOpenGroup(g, cn, nil)
			C.free(unsafe.Pointer(cn))
			if sub == nil {
				return gdalErr("GDALGroupOpenGroup " + n)
			}
			p := omni.JoinPath(path, n)
			groups = append(groups, [2]string{p, path})
			err := rec(sub, p, depth+1)
			C.GDALGroupRelease(sub)
			if err != nil {
				return err
			}
		}
		return nil
	}
	return arrs, groups, rec(d.root, "/", 0)
}

// openArray opens the array name of g; nil (no error) for an array of
// a type that is not numeric.
func openArray(g C.GDALGroupH, name, path string) (*mdArray, error) {
	cn := C.CString(name)
	h := C.GDALGroupOpenMDArray(g, cn, nil)
	C.free(unsafe.Pointer(cn))
	if h == nil {
		return nil, gdalErr("GDALGroupOpenMDArray " + name)
	}
	dt := C.GDALMDArrayGetDataType(h)
	defer C.GDALExtendedDataTypeRelease(dt)
	if C.GDALExtendedDataTypeGetClass(dt) != C.GEDTC_NUMERIC {
		C.GDALMDArrayRelease(h)
		return nil, nil
	}
	a := &mdArray{h: h, gdt: int(C.GDALExtendedDataTypeGetNumericDataType(dt)), path: path}
	var n C.size_t
	dims := C.GDALMDArrayGetDimensions(h, &n)
	for _, dm := range unsafe.Slice(dims, int(n)) {
		a.dims = append(a.dims, C.GoString(C.GDALDimensionGetName(dm)))
		a.shape = append(a.shape, int64(C.GDALDimensionGetSize(dm)))
	}
	C.GDALReleaseDimensions(dims, n)
	var na C.size_t
	attrs := C.GDALMDArrayGetAttributes(h, &na, nil)
	a.attrs = readAttrs(attrs, na)
	C.GDALReleaseAttributes(attrs, na)
	return a, nil
}

// groupAttrs reads the attributes of the root group.
func (d *dataset) groupAttrsLocked() []omni.Attribute {
	var n C.size_t
	attrs := C.GDALGroupGetAttributes(d.root, &n, nil)
	defer C.GDALReleaseAttributes(attrs, n)
	return readAttrs(attrs, n)
}

// readAttrs converts numeric and string attributes (of at most 1<<20
// values each); others are left out.
func readAttrs(attrs *C.GDALAttributeH, n C.size_t) []omni.Attribute {
	var out []omni.Attribute
	for _, at := range unsafe.Slice(attrs, int(n)) {
		name := C.GoString(C.GDALAttributeGetName(at))
		if C.GDALAttributeGetTotalElementsCount(at) > 1<<20 {
			continue
		}
		dt := C.GDALAttributeGetDataType(at)
		switch C.GDALExtendedDataTypeGetClass(dt) {
		case C.GEDTC_STRING:
			ss := C.GDALAttributeReadAsStringArray(at)
			out = append(out, omni.StringAttr(name, goStrings(ss)...))
			C.CSLDestroy(ss)
		case C.GEDTC_NUMERIC:
			var cnt C.size_t
			p := C.GDALAttributeReadAsDoubleArray(at, &cnt)
			if p != nil {
				vals := make([]float64, int(cnt))
				for i, x := range unsafe.Slice(p, int(cnt)) {
					vals[i] = float64(x)
				}
				C.CPLFree(unsafe.Pointer(p))
				out = append(out, omni.FloatAttr(name, vals...))
			}
		}
		C.GDALExtendedDataTypeRelease(dt)
	}
	return out
}

// readArray reads the selection h of a into dst as a's own type.
func (d *dataset) readArrayLocked(a *mdArray, h omni.Hyperslab, dst []byte) error {
	n := len(a.shape)
	start := make([]C.GUInt64, max(n, 1))
	count := make([]C.size_t, max(n, 1))
	step := make([]C.GInt64, max(n, 1))
	for i := range n {
		start[i], count[i], step[i] = C.GUInt64(h.Start[i]), C.size_t(h.Count[i]), C.GInt64(h.StrideAt(i))
	}
	dt := C.GDALExtendedDataTypeCreate(C.GDALDataType(a.gdt))
	defer C.GDALExtendedDataTypeRelease(dt)
	if C.GDALMDArrayRead(a.h, &start[0], &count[0], &step[0], nil, dt, unsafe.Pointer(&dst[0]),
		unsafe.Pointer(&dst[0]), C.size_t(len(dst))) == 0 {
		return gdalErr("GDALMDArrayRead " + a.path)
	}
	return nil
}

// The calls of the package, each run on the libgdal thread.

func openDataset(p string, allowed []string, multi bool) (d *dataset, err error) {
	onThread(func() { d, err = openDatasetLocked(p, allowed, multi) })
	return
}

func (d *dataset) close() { onThread(d.closeLocked) }

func (d *dataset) info() (r rasterInfo) {
	onThread(func() { r = d.infoLocked() })
	return
}

func (d *dataset) readBand(b int, x0, y0, nx, ny int64, gdt int, buf []byte) (err error) {
	onThread(func() { err = d.readBandLocked(b, x0, y0, nx, ny, gdt, buf) })
	return
}

func (d *dataset) walk(maxArrays int) (arrs []*mdArray, groups [][2]string, err error) {
	onThread(func() { arrs, groups, err = d.walkLocked(maxArrays) })
	return
}

func (d *dataset) groupAttrs() (as []omni.Attribute) {
	onThread(func() { as = d.groupAttrsLocked() })
	return
}

func (d *dataset) readArray(a *mdArray, h omni.Hyperslab, dst []byte) (err error) {
	onThread(func() { err = d.readArrayLocked(a, h, dst) })
	return
}

// warmUp opens PROJ's database on the libgdal thread, where PROJ keeps
// it open for the process: the tests call it before the leak check's
// first snapshot of open fds.
func warmUp() {
	onThread(func() {
		h := C.OSRNewSpatialReference(nil)
		C.OSRImportFromEPSG(h, 4326)
		C.OSRDestroySpatialReference(h)
	})
}
