//go:debug containermaxprocs=0

package main

// #cgo CFLAGS: -O2 -Wall -Wno-unused-function -fvisibility=default
// #cgo LDFLAGS: -ldl -lpthread
import "C"

// iowarpGoInit is the one Go call the C constructor makes: it returns once
// the Go runtime is up, so that no fork can catch it half started.
//
//export iowarpGoInit
func iowarpGoInit() {}

func main() {}
