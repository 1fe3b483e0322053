// Package python holds the iowarp Python package (python/iowarp: ctypes
// over libiowarp_py.so, built from adapters/capi) and its tests: the Go
// test here builds the binary and the library, starts a real daemon with
// a mount, installs the package with pip (--no-build-isolation, offline)
// and runs python/tests under /usr/bin/python3.
package python
