// Package mountinfo parses /proc/self/mountinfo (Mounts, MountAt) and makes
// the checks the daemon runs before it mounts or writes: that a mount
// point is an empty directory nothing is mounted on (CheckMountPoint) and
// that a directory is writable (CheckWritable), each failing with an error
// that says what to do.
package mountinfo
