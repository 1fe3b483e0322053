package files

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

var errBadDirent = errors.New("malformed directory entry")

// parseDirents appends the linux_dirent64 records of buf to out, skipping
// "." and "..". On a malformed record it returns nil and an error.
func parseDirents(buf []byte, out []DirEntry) ([]DirEntry, error) {
	for len(buf) > 0 {
		if len(buf) < 19 {
			return nil, errBadDirent
		}
		ino := binary.NativeEndian.Uint64(buf[0:8])
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		typ := buf[18]
		if reclen < 19 || reclen > len(buf) {
			return nil, errBadDirent
		}
		name := buf[19:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		buf = buf[reclen:]
		if s := string(name); s != "." && s != ".." {
			out = append(out, DirEntry{Name: s, Ino: ino, Mode: direntMode(typ)})
		}
	}
	return out, nil
}

func direntMode(t byte) uint32 {
	switch t {
	case unix.DT_DIR:
		return unix.S_IFDIR
	case unix.DT_LNK:
		return unix.S_IFLNK
	case unix.DT_FIFO:
		return unix.S_IFIFO
	case unix.DT_SOCK:
		return unix.S_IFSOCK
	case unix.DT_CHR:
		return unix.S_IFCHR
	case unix.DT_BLK:
		return unix.S_IFBLK
	default:
		return unix.S_IFREG
	}
}
