//go:debug containermaxprocs=0

package main

// #cgo CFLAGS: -O2 -Wall -Wno-unused-function -fvisibility=default
// #cgo LDFLAGS: -ldl -lpthread
// #include <stdint.h>
import "C"

// iowarpGoInit is the one Go call the C constructor makes: it returns once
// the Go runtime is up, so that no fork can catch it half started.
//
//export iowarpGoInit
func iowarpGoInit() {}

// iowarpGoDetach drops the Go-side state of a fast-path attachment.
//
//export iowarpGoDetach
func iowarpGoDetach(h C.uintptr_t) {}

func main() {}
