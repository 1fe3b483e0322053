// Package integration holds end-to-end tests: the real iowarp binary
// mounted as a subprocess over a temporary backing directory, exercised by
// real programs (cp, tar, dd, bash, python3, fio). The tests skip unless
// they run as root with /dev/fuse.
//
// Each test starts its own daemon (startMount) and stops it with SIGTERM
// in t.Cleanup, detaching a mount left behind with umount -l, so no test
// shares state with another.
package integration
