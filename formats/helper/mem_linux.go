package helper

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/sys"
)

// mapping is a shared mapping of [off, off+n) of a file.
type mapping struct {
	whole []byte // page-aligned mapping
	b     []byte // the requested range
}

func mapFile(f *os.File, off, n int64, write bool) (*mapping, error) {
	if n == 0 {
		return &mapping{}, nil
	}
	page := int64(os.Getpagesize())
	base := off &^ (page - 1)
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	whole, err := unix.Mmap(int(f.Fd()), base, int(off-base+n), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes at %d: %w", n, off, err)
	}
	return &mapping{whole: whole, b: whole[off-base : off-base+n]}, nil
}

func (m *mapping) unmap() {
	if m.whole != nil {
		unix.Munmap(m.whole)
		m.whole, m.b = nil, nil
	}
}

func newMemfd(name string, size int64) (*os.File, error) {
	f, err := sys.MemfdCreate(name)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func socketpair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "helper-parent"), os.NewFile(uintptr(fds[1]), "helper-child"), nil
}

// confine lowers the helper's standing: the OOM killer takes it first, and
// its address space is limited to limit bytes (0: no limit). Both last
// across the exec of startConfined.
func confine(limit uint64) {
	os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	if limit > 0 {
		unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit})
	}
}

// DefaultMemoryLimit is a helper's address-space limit when Options has
// none: an eighth of the machine's memory, at least 4 GiB (an idle
// helper's Go runtime, libraries and malloc arenas reserve about 1 GiB
// of address space) and at most 16 GiB. A file that makes libhdf5
// allocate past it fails its allocation (EIO, the helper retired), and
// Size helpers at once stay well inside the node.
func DefaultMemoryLimit() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 4 << 30
	}
	return min(max(uint64(si.Totalram)*uint64(si.Unit)/8, 4<<30), 16<<30)
}

// landlockRules are what a confined helper may read: below root, the
// binary and the system's libraries (for its own exec and the dynamic
// loader).
func landlockRules(root string) []sys.LandlockRule {
	read := uint64(sys.LandlockReadFile | sys.LandlockReadDir)
	// The binary by its magic link: its directory may be closed to the
	// helper's user (a test binary under a 0700 build directory).
	rules := []sys.LandlockRule{{Path: root, Access: read}, {Path: "/proc/self/exe", Access: read | sys.LandlockExecute}}
	for _, d := range []string{"/usr/lib", "/usr/lib64", "/lib", "/lib64", "/etc/ld.so.cache", "/usr/share/zoneinfo"} {
		rules = append(rules, sys.LandlockRule{Path: d, Access: read | sys.LandlockExecute})
	}
	// The data files of format libraries: eccodes' definitions and
	// samples, GDAL's and PROJ's tables (absent ones are skipped).
	for _, d := range []string{"/usr/share/eccodes", "/usr/share/gdal", "/usr/share/proj"} {
		rules = append(rules, sys.LandlockRule{Path: d, Access: read})
	}
	return rules
}

// startConfined confines this thread to root with Landlock and re-execs
// the binary from it, so that every thread of the helper that serves is
// confined (Landlock domains are per thread, and a Go process has many).
// It returns only on failure.
func startConfined(root string) error {
	runtime.LockOSThread()
	if err := sys.LandlockRestrict(landlockRules(root)); err != nil {
		return err
	}
	os.Setenv(envHelper, "2")
	return unix.Exec("/proc/self/exe", os.Args, os.Environ())
}

// deniedSyscalls are refused (EPERM) to a serving helper: it reads files
// it is given and answers on its socket, nothing else.
var deniedSyscalls = []uint32{
	unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_SOCKET, unix.SYS_CONNECT, unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_MOUNT, unix.SYS_UMOUNT2,
	unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_CHROOT, unix.SYS_PIVOT_ROOT, unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE,
	unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETRESUID, unix.SYS_SETGROUPS,
}
