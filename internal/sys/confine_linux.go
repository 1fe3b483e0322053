package sys

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoLandlock: the kernel has no Landlock (not built, not enabled at
// boot, or too old).
var ErrNoLandlock = errors.New("landlock unavailable")

// Landlock access rights (ABI 1) that LandlockRestrict handles: every
// file-system access is denied except what a rule allows.
const (
	LandlockExecute  = unix.LANDLOCK_ACCESS_FS_EXECUTE
	LandlockReadFile = unix.LANDLOCK_ACCESS_FS_READ_FILE
	LandlockReadDir  = unix.LANDLOCK_ACCESS_FS_READ_DIR
	landlockABI1     = 0x1fff // EXECUTE … MAKE_SYM
)

// LandlockRule allows Access below Path (a directory, or a single file
// for the file rights).
type LandlockRule struct {
	Path   string
	Access uint64
}

// rulesetAttr is struct landlock_ruleset_attr of ABI 1 (the kernel takes
// the smaller size of older ABIs).
type rulesetAttr struct{ handledAccessFS uint64 }

// LandlockABI returns the kernel's Landlock ABI version, or
// ErrNoLandlock.
func LandlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, fmt.Errorf("%w: %v", ErrNoLandlock, e)
	}
	return int(v), nil
}

// LandlockRestrict confines the calling thread (and what it execs) to
// rules, after setting no_new_privs. Landlock domains are per thread: a
// Go program calls it on a locked OS thread and then execs, so that the
// new image starts confined in every thread. A rule whose path does not
// exist or that the caller cannot reach is skipped (nothing below it is
// readable then).
func LandlockRestrict(rules []LandlockRule) error {
	if _, err := LandlockABI(); err != nil {
		return err
	}
	attr := rulesetAttr{handledAccessFS: landlockABI1}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	for _, r := range rules {
		if err := addRule(int(fd), r); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

func addRule(ruleset int, r LandlockRule) error {
	pfd, err := unix.Open(r.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock rule %s: %w", r.Path, err)
	}
	defer unix.Close(pfd)
	access := r.Access
	var st unix.Stat_t
	if unix.Fstat(pfd, &st) == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= LandlockExecute | LandlockReadFile | unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	}
	pb := struct {
		allowed uint64
		parent  int32
	}{access, int32(pfd)}
	// struct landlock_path_beneath_attr is packed: 12 bytes.
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock rule %s: %w", r.Path, e)
	}
	return nil
}

// SeccompDeny installs, for every thread of the process (TSYNC), a
// seccomp filter under which the system calls nrs fail with EPERM; the
// others run. It sets no_new_privs first (needed without CAP_SYS_ADMIN).
func SeccompDeny(nrs []uint32) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		arch = 4 // offsetof(struct seccomp_data, arch)
	)
	deny := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	prog := []unix.SockFilter{
		{Code: ld, K: arch},
		{Code: jeq, Jt: 1, K: auditArch()},
		{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: ld, K: 0}, // nr
	}
	for _, nr := range nrs {
		prog = append(prog, unix.SockFilter{Code: jeq, Jf: 1, K: nr}, unix.SockFilter{Code: ret, K: deny})
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// auditArch is the AUDIT_ARCH_* value of this build's architecture.
func auditArch() uint32 {
	switch runtime.GOARCH {
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	case "riscv64":
		return unix.AUDIT_ARCH_RISCV64
	}
	return unix.AUDIT_ARCH_X86_64
}
