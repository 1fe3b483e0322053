// Package posixtest is iowarp's POSIX conformance suite, run against every
// door (FUSE mount, shim) and every mode of the file layer.
//
// Each case performs a fixed sequence of operations in a directory and
// returns a Transcript: one line per operation with its outcome (the errno
// name, or the facts observed: sizes, modes, contents digests). Lines hold
// only what is portable between file systems (no inode numbers, block
// counts, directory sizes or absolute times), so the transcript of a case
// run on tmpfs is the expected transcript of the same case run on any
// mount: Compare runs a case on both and reports the difference. Cases also
// fail the test directly on a violated invariant (data read back differs
// from what was written) so they are useful on their own.
//
// Expectations are real Linux behaviour: the suite's own tests run every
// case on two tmpfs directories, which must agree (and pass the invariants).
package posixtest
