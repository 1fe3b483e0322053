package helper

import (
	"fmt"
	"os"

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
// its address space is limited to limit bytes (0: no limit).
func confine(limit uint64) {
	os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	if limit > 0 {
		unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: limit})
	}
}
