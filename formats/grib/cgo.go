package grib

/*
#cgo pkg-config: eccodes
#include <stdlib.h>
#include <eccodes.h>

static void iwg_quiet_log(const codes_context *c, int level, const char *msg) {}

static void iwg_quiet(void) {
	codes_context_set_logging_proc(codes_context_get_default(), iwg_quiet_log);
}
*/
import "C"

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// mu serialises every call into libeccodes.
var mu sync.Mutex

// quiet silences eccodes' logging (errors come back as codes; nothing
// on the helper's stderr), at the first message decoded: a process that
// links this package but decodes nothing (the daemon) never calls it.
var quiet sync.Once

// handle is a decoded message (codes_handle).
type handle struct {
	h *C.codes_handle
}

func codesErr(op string, code C.int) error {
	return fmt.Errorf("%s: %w: %s", op, ErrLibrary, C.GoString(C.codes_get_error_message(code)))
}

// newHandle decodes the message msg (eccodes keeps its own copy).
// mu must be held.
func newHandleLocked(msg []byte) (*handle, error) {
	if len(msg) == 0 {
		return nil, fmt.Errorf("empty message: %w", ErrLibrary)
	}
	quiet.Do(func() { C.iwg_quiet() })
	h := C.codes_handle_new_from_message_copy(nil, unsafe.Pointer(&msg[0]), C.size_t(len(msg)))
	if h == nil {
		return nil, fmt.Errorf("codes_handle_new_from_message: %w: not a message eccodes can decode", ErrLibrary)
	}
	return &handle{h: h}, nil
}

func (h *handle) deleteLocked() {
	if h.h != nil {
		C.codes_handle_delete(h.h)
		h.h = nil
	}
}

func (h *handle) definedLocked(key string) bool {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	return C.codes_is_defined(h.h, ck) != 0
}

func (h *handle) longLocked(key string) (int64, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var v C.long
	if e := C.codes_get_long(h.h, ck, &v); e != 0 {
		return 0, codesErr("codes_get_long "+key, e)
	}
	return int64(v), nil
}

func (h *handle) doubleLocked(key string) (float64, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var v C.double
	if e := C.codes_get_double(h.h, ck, &v); e != 0 {
		return 0, codesErr("codes_get_double "+key, e)
	}
	return float64(v), nil
}

func (h *handle) stringLocked(key string) (string, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var buf [1024]C.char
	n := C.size_t(len(buf))
	if e := C.codes_get_string(h.h, ck, &buf[0], &n); e != 0 {
		return "", codesErr("codes_get_string "+key, e)
	}
	return C.GoString(&buf[0]), nil
}

// doublesLocked returns the array key, of at most max values.
func (h *handle) doublesLocked(key string, max int64) ([]float64, error) {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	var n C.size_t
	if e := C.codes_get_size(h.h, ck, &n); e != 0 {
		return nil, codesErr("codes_get_size "+key, e)
	}
	if int64(n) > max || n == 0 {
		return nil, fmt.Errorf("%s: %d values where %d are declared: %w", key, n, max, errCorrupt)
	}
	out := make([]float64, int(n))
	if e := C.codes_get_double_array(h.h, ck, (*C.double)(unsafe.Pointer(&out[0])), &n); e != 0 {
		return nil, codesErr("codes_get_double_array "+key, e)
	}
	return out[:int(n)], nil
}

// missingLong is eccodes' value of a missing integer key.
const missingLong = math.MaxInt32
