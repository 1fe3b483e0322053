// Package hdf5 reads and writes HDF5 files through libhdf5 (cgo), as OMNI
// datasets (formats/omni): groups are groups, datasets of numeric, enum and
// string types are variables, compound datasets are groups whose fields
// are variables, dimension scales are dimensions (and coordinate
// variables), attributes are typed attributes, NeXus NX_class is recorded.
//
// libhdf5 is not hardened against crafted files (it can crash, abort or
// loop): the daemon must call this package only from helper processes
// (formats/helper). Plugin loading is switched off, external and soft
// links are not followed; external raw storage and virtual-dataset
// sources are read only below Root when it is set (the helpers' root).
// Reads convert to the variable's declared dtype (never the narrower
// type H5Tget_native_type picks for a reduced precision) and fail
// unless the memory type fills exactly the destination.
//
// The serial libhdf5 is not thread safe: every call into it holds mu, so a
// File is safe for concurrent use but calls are serialised. No C type
// leaves this package.
package hdf5

/*
#cgo CFLAGS: -I/usr/include/hdf5/serial
#cgo LDFLAGS: -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5_hl -lhdf5
#include "h5.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrLibrary wraps errors reported by libhdf5; the message is the deepest
// entry of its error stack.
var ErrLibrary = errors.New("libhdf5")

// mu serialises every call into libhdf5 (the serial build is not thread safe).
var mu sync.Mutex

func init() {
	mu.Lock()
	C.iw5_quiet()
	mu.Unlock()
}

// h5err returns the error of a failed libhdf5 call; mu must be held.
func h5err(op string) error {
	var buf [768]C.char
	C.iw5_last_error(&buf[0], C.size_t(len(buf)))
	msg := C.GoString(&buf[0])
	if msg == "" {
		msg = "failed"
	}
	return fmt.Errorf("%s: %w: %s", op, ErrLibrary, msg)
}

func cstr(s string) *C.char { return C.CString(s) }

func free(p unsafe.Pointer) { C.free(p) }

// native type indices of t_native.
const (
	nSchar = iota
	nUchar
	nShort
	nUshort
	nInt
	nUint
	nLlong
	nUllong
	nFloat
	nDouble
	nCS1
	sI8
	sU8
	sI16
	sU16
	sI32
	sU32
	sI64
	sU64
	sF32
	sF64
)
