package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/iowarp/iowarp/internal/sys"
	"golang.org/x/sys/unix"
)

// shmDir is where Linux keeps POSIX shared memory objects (shm_open).
const shmDir = "/dev/shm"

// maxBackendSize bounds a mapping (64 TiB): larger sizes are a caller error.
const maxBackendSize = 1 << 46

var (
	_ Backend = (*PosixShm)(nil)
	_ Backend = (*Memfd)(nil)
	_ Backend = (*MmapFile)(nil)
)

// mapping is the part every file-descriptor backend shares: the fd and its
// MAP_SHARED mapping.
type mapping struct {
	kind string
	name string

	mu  sync.Mutex
	f   *os.File
	mem []byte
}

func mapFile(kind, name string, f *os.File, size int64) (*mapping, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s %s (%d bytes): %w", kind, name, size, err)
	}
	return &mapping{kind: kind, name: name, f: f, mem: mem}, nil
}

func (m *mapping) Kind() string  { return m.kind }
func (m *mapping) Name() string  { return m.name }
func (m *mapping) Bytes() []byte { return m.mem }

// Close unmaps the region and closes the descriptor. It is idempotent.
func (m *mapping) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	if m.mem != nil {
		if err := unix.Munmap(m.mem); err != nil {
			errs = append(errs, fmt.Errorf("munmap %s: %w", m.name, err))
		}
		m.mem = nil
	}
	if m.f != nil {
		if err := m.f.Close(); err != nil {
			errs = append(errs, err)
		}
		m.f = nil
	}
	return errors.Join(errs...)
}

func checkSize(size int64) error {
	if size <= 0 || size > maxBackendSize {
		return fmt.Errorf("segment size %d out of range (1..%d): %w", size, int64(maxBackendSize), ErrNoSpace)
	}
	return nil
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := checkSize(st.Size()); err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return st.Size(), nil
}

// createMapped creates path exclusively (mode 0600), sizes it and maps it.
func createMapped(kind, name, path string, size int64) (*mapping, error) {
	if err := checkSize(size); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", kind, name, err)
	}
	m, err := sizeAndMap(kind, name, f, size)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return m, nil
}

func sizeAndMap(kind, name string, f *os.File, size int64) (*mapping, error) {
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, fmt.Errorf("size %s %s to %d: %w", kind, name, size, err)
	}
	m, err := mapFile(kind, name, f, size)
	if err != nil {
		f.Close()
	}
	return m, err
}

// openMapped opens an existing path read-write and maps all of it.
func openMapped(kind, name, path string) (*mapping, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s %s: %w", kind, name, err)
	}
	size, err := fileSize(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	m, err := mapFile(kind, name, f, size)
	if err != nil {
		f.Close()
	}
	return m, err
}

// PosixShm is a named POSIX shared memory object, /dev/shm/NAME, as
// shm_open(3) creates it: mode 0600, so only the owning user can attach.
type PosixShm struct{ *mapping }

func posixPath(name string) (string, error) {
	name = strings.TrimPrefix(name, "/")
	if name == "" || len(name) > 250 || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return "", fmt.Errorf("posix shm name %q: must be one path component", name)
	}
	return filepath.Join(shmDir, name), nil
}

// CreatePosix creates the shared memory object name (O_EXCL: it must not
// exist) of size bytes and maps it.
func CreatePosix(name string, size int64) (*PosixShm, error) {
	path, err := posixPath(name)
	if err != nil {
		return nil, err
	}
	m, err := createMapped("posix", name, path, size)
	if err != nil {
		return nil, err
	}
	return &PosixShm{m}, nil
}

// OpenPosix maps the existing shared memory object name, all of it.
func OpenPosix(name string) (*PosixShm, error) {
	path, err := posixPath(name)
	if err != nil {
		return nil, err
	}
	m, err := openMapped("posix", name, path)
	if err != nil {
		return nil, err
	}
	return &PosixShm{m}, nil
}

// Destroy closes the mapping and unlinks the name (shm_unlink).
func (p *PosixShm) Destroy() error {
	path, _ := posixPath(p.name)
	return errors.Join(p.Close(), removeIfExists(path))
}

// Memfd is an anonymous shared memory file (memfd_create). It has no name in
// any namespace: other processes get it by inheriting or receiving the fd
// (SCM_RIGHTS), and it vanishes when the last fd and mapping go away.
type Memfd struct{ *mapping }

// CreateMemfd makes a memfd of size bytes (close-on-exec) and maps it.
func CreateMemfd(name string, size int64) (*Memfd, error) {
	if err := checkSize(size); err != nil {
		return nil, err
	}
	f, err := sys.MemfdCreate(name)
	if err != nil {
		return nil, err
	}
	m, err := sizeAndMap("memfd", name, f, size)
	if err != nil {
		return nil, err
	}
	return &Memfd{m}, nil
}

// OpenMemfd maps a memfd received from another process; it takes ownership
// of f (Close closes it).
func OpenMemfd(f *os.File) (*Memfd, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	m, err := mapFile("memfd", f.Name(), f, size)
	if err != nil {
		return nil, err
	}
	return &Memfd{m}, nil
}

// File is the memfd, for passing over SCM_RIGHTS or exec.Cmd.ExtraFiles.
// It stays owned by the Memfd; nil after Close.
func (m *Memfd) File() *os.File {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.f
}

// Destroy is Close: a memfd has no name to remove.
func (m *Memfd) Destroy() error { return m.Close() }

// MmapFile is a regular file mapped MAP_SHARED: its contents survive the
// processes that use it (and, after Sync, a crash of the machine's page
// cache owner), so a segment can be re-attached later.
type MmapFile struct{ *mapping }

// CreateMmapFile creates path (O_EXCL, mode 0600) of size bytes and maps it.
func CreateMmapFile(path string, size int64) (*MmapFile, error) {
	m, err := createMapped("file", path, path, size)
	if err != nil {
		return nil, err
	}
	return &MmapFile{m}, nil
}

// OpenMmapFile maps an existing file, all of it.
func OpenMmapFile(path string) (*MmapFile, error) {
	m, err := openMapped("file", path, path)
	if err != nil {
		return nil, err
	}
	return &MmapFile{m}, nil
}

// Sync writes dirty pages of the mapping back to the file (msync MS_SYNC).
func (f *MmapFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mem == nil {
		return os.ErrClosed
	}
	if err := unix.Msync(f.mem, unix.MS_SYNC); err != nil {
		return fmt.Errorf("msync %s: %w", f.name, err)
	}
	return nil
}

// Destroy closes the mapping and removes the file.
func (f *MmapFile) Destroy() error {
	return errors.Join(f.Close(), removeIfExists(f.name))
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
