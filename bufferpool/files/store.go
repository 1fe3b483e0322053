package files

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// backingStore is how the write-back changes backing files: the operating
// system, or in tests a layer that injects the failures of a sick store
// (EIO, EROFS, ENOSPC at write or at fsync time).
type backingStore interface {
	// WriteAt is pwrite(2) of all of p (os.File semantics).
	WriteAt(f *os.File, p []byte, off int64) (int, error)
	// Truncate is ftruncate(2).
	Truncate(f *os.File, size int64) error
	// Sync is fsync(2), or fdatasync(2) if datasync.
	Sync(f *os.File, datasync bool) error
}

// osStore is the backing store of a real FS.
type osStore struct{}

func (osStore) WriteAt(f *os.File, p []byte, off int64) (int, error) { return f.WriteAt(p, off) }

func (osStore) Truncate(f *os.File, size int64) error {
	if err := unix.Ftruncate(int(f.Fd()), size); err != nil {
		return fmt.Errorf("ftruncate backing file: %w", err)
	}
	return nil
}

func (osStore) Sync(f *os.File, datasync bool) error {
	var err error
	if datasync {
		err = unix.Fdatasync(int(f.Fd()))
	} else {
		err = unix.Fsync(int(f.Fd()))
	}
	if err != nil {
		return fmt.Errorf("fsync backing file: %w", err)
	}
	return nil
}
