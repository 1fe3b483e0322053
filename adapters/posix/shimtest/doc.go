// Package shimtest holds the end-to-end tests of libiowarp.so
// (adapters/posix): real programs run under LD_PRELOAD on a real mount
// (root and /dev/fuse needed), each compared with the same run on tmpfs,
// and the per-process IOWARP_REPORT lines checked for the path that carried
// the bytes. The package has no non-test code.
package shimtest
