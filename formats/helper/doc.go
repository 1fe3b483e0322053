// Package helper runs the format readers (formats/hdf5, formats/netcdf,
// formats/zarr, formats/tabular) in helper processes, so that a crafted
// file that makes libhdf5 or libnetcdf crash, abort, loop or eat memory
// costs a helper, never the caller: the daemon holds dirty buffers and
// must not parse files in its own address space.
//
// A Pool keeps up to Size helpers, reused across requests (opening a
// file is cached per helper and revalidated by size and mtime), started
// lazily and restarted after one dies. A helper whose request failed
// inside a format library (libhdf5 keeps state across files) is retired
// after its reply and serves no other request. Each request has a deadline: a
// helper that misses it is killed (SIGKILL) and the request fails with
// ErrTimeout; a helper that dies fails it with ErrCrashed; both carry
// the helper's last words (the first line of its crash report), logged
// once through Options.Logf.
//
// Helpers are the caller's own binary re-executed (/proc/self/exe) with
// IOWARP_FORMAT_HELPER=1 in the environment: this package's init then
// serves requests on fd 3 and exits, before main runs. One binary means
// nothing to install next to iowarp and no version skew between daemon
// and helper; test binaries that import this package are helpers too.
// Helpers die with their parent (PR_SET_PDEATHSIG), run with
// oom_score_adj 1000 (the OOM killer takes them before the daemon), an
// address-space limit (Options.MemoryLimit, default DefaultMemoryLimit;
// MALLOC_ARENA_MAX=2 so that glibc's arenas do not eat it), an empty
// working directory and a seccomp filter (no exec, sockets, ptrace,
// mounts, setuid …).
//
// Confinement (As, set per request with WithAs): a helper runs as one
// identity and root. With As.Set it runs with the request's uid, gid
// and groups (the daemon passes the FUSE caller), so that it reads only
// what that user could. With As.Root it reads only below Root and the
// system's libraries: Landlock, applied on one thread that then re-execs
// the binary so that every thread of the serving helper is confined (a
// kernel without Landlock: logged once, the uid drop alone remains); and
// the HDF5 reader refuses external storage and virtual-dataset sources
// outside Root (their reads fail with os.ErrPermission). Relative
// external and VDS names resolve next to the file (HDF5_EXTFILE_PREFIX,
// HDF5_VDS_PREFIX = ${ORIGIN}), never in the cwd. Helpers are kept per
// identity; past Size, an idle helper of another identity is stopped.
//
// Wire: a SOCK_SEQPACKET socketpair; each request and reply is one JSON
// datagram that may carry one file descriptor (SCM_RIGHTS). Data comes
// back through shared memory: for Read the caller creates a memfd of the
// result's size and passes it; the helper maps it and the library decodes
// straight into it (H5Dread/nc_get_vars write the caller's pages), so
// isolation costs no copy. ReadTo lets the caller pass its own fd and
// offset (a buffer-pool segment). Schemas come back in a memfd the helper
// fills.
//
// The helper reads the file by the path it is given. The daemon must give
// a path whose bytes are current (its backing file after a flush, or a
// view it serves); if that path is on the daemon's own FUSE mount, the
// daemon must not hold locks a FUSE request needs while it waits on a
// helper (the helper waits on the daemon): a pool request never holds a
// lock while it waits, and its deadline breaks any such cycle.
//
// A Pool is safe for concurrent use; requests run in parallel up to Size.
package helper
