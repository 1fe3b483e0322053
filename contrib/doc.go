// Package contrib holds what `make install` ships besides the binary and
// the shim: the systemd units (systemd/), the Slurm prolog and epilog
// and the script that writes a job's per-node cluster block (slurm/),
// and the example node config (iowarp.yaml). The files carry
// @BINDIR@-style placeholders that the Makefile replaces at install time.
//
// The package has no code; its tests run the tree of one `make install
// DESTDIR=...` (built once per test binary) as an admin would: the
// units' ExecStart under a fake service manager's NOTIFY_SOCKET, the
// Slurm scripts with the variables slurmd sets (a job's cluster on a
// fake 4-node allocation: one daemon per "node" on its own loopback
// address), a mount by an
// unprivileged user, and `iowarp run` finding the installed library.
package contrib
