package ebpf

import "unsafe"

// sizeofEvent and sizeofPathEvent are the sizes of the kernel's struct
// event and struct path_event (an event, then the path).
const (
	sizeofEvent     = unsafe.Sizeof(traceEvent{})
	sizeofPathEvent = unsafe.Sizeof(tracePathEvent{})
	sizeofAggEvent  = unsafe.Sizeof(traceAggEvent{})
)

// unsafePointer views a ring-buffer sample as the kernel's struct event
// (the caller checked its length; samples are 8-byte aligned).
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
