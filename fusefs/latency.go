package fusefs

// timedFS mirrors go-fuse's fuse.RawFileSystem (v2.12) method for method;
// a method go-fuse adds later is passed through by the embedding, untimed,
// until it is added here.

import (
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iowarp/iowarp/internal/hist"
)

// RequestMetrics counts the FUSE requests of a mount: a latency histogram
// per opcode (from the request reaching the file system to its reply being
// ready; the kernel's queue and the copy to it are not in it) and the
// replies that were EIO. Set Options.Metrics to one to have a mount fill
// it; the zero value is ready. Safe for concurrent use.
type RequestMetrics struct {
	ops [numOps]opMetrics
}

type opMetrics struct {
	lat hist.Histogram
	eio atomic.Uint64
}

// opNames are the opcodes RequestMetrics counts, in order.
var opNames = [numOps]string{
	opLookup:        "LOOKUP",
	opGetattr:       "GETATTR",
	opSetattr:       "SETATTR",
	opMknod:         "MKNOD",
	opMkdir:         "MKDIR",
	opUnlink:        "UNLINK",
	opRmdir:         "RMDIR",
	opRename:        "RENAME",
	opLink:          "LINK",
	opSymlink:       "SYMLINK",
	opReadlink:      "READLINK",
	opAccess:        "ACCESS",
	opGetxattr:      "GETXATTR",
	opListxattr:     "LISTXATTR",
	opSetxattr:      "SETXATTR",
	opRemovexattr:   "REMOVEXATTR",
	opCreate:        "CREATE",
	opTmpfile:       "TMPFILE",
	opOpen:          "OPEN",
	opRead:          "READ",
	opLseek:         "LSEEK",
	opGetlk:         "GETLK",
	opSetlk:         "SETLK",
	opSetlkw:        "SETLKW",
	opRelease:       "RELEASE",
	opWrite:         "WRITE",
	opCopyFileRange: "COPY_FILE_RANGE",
	opIoctl:         "IOCTL",
	opFlush:         "FLUSH",
	opFsync:         "FSYNC",
	opFallocate:     "FALLOCATE",
	opOpendir:       "OPENDIR",
	opReaddir:       "READDIR",
	opReaddirplus:   "READDIRPLUS",
	opFsyncdir:      "FSYNCDIR",
	opStatfs:        "STATFS",
	opStatx:         "STATX",
	opForget:        "FORGET",
	opReleasedir:    "RELEASEDIR",
}

const (
	opLookup = iota
	opGetattr
	opSetattr
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opAccess
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opCreate
	opTmpfile
	opOpen
	opRead
	opLseek
	opGetlk
	opSetlk
	opSetlkw
	opRelease
	opWrite
	opCopyFileRange
	opIoctl
	opFlush
	opFsync
	opFallocate
	opOpendir
	opReaddir
	opReaddirplus
	opFsyncdir
	opStatfs
	opStatx
	opForget
	opReleasedir
	numOps
)

// Each calls f for every opcode that was seen, with its latencies and
// its EIO replies.
func (m *RequestMetrics) Each(f func(op string, lat hist.Snapshot, eio uint64)) {
	for i := range m.ops {
		s := m.ops[i].lat.Snapshot()
		if s.Count > 0 {
			f(opNames[i], s, m.ops[i].eio.Load())
		}
	}
}

// note records one request of op that started at t and ended with st.
func (m *RequestMetrics) note(op int, t time.Time, st fuse.Status) {
	m.ops[op].lat.Since(t)
	if st == fuse.EIO {
		m.ops[op].eio.Add(1)
	}
}

// timedFS is a RawFileSystem that times each request of the one it wraps.
type timedFS struct {
	fuse.RawFileSystem
	m *RequestMetrics
}

var _ fuse.RawFileSystem = (*timedFS)(nil)

func (w *timedFS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Lookup(cancel, header, name, out)
	w.m.note(opLookup, t, st)
	return st
}

func (w *timedFS) GetAttr(cancel <-chan struct{}, input *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.GetAttr(cancel, input, out)
	w.m.note(opGetattr, t, st)
	return st
}

func (w *timedFS) SetAttr(cancel <-chan struct{}, input *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.SetAttr(cancel, input, out)
	w.m.note(opSetattr, t, st)
	return st
}

func (w *timedFS) Mknod(cancel <-chan struct{}, input *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Mknod(cancel, input, name, out)
	w.m.note(opMknod, t, st)
	return st
}

func (w *timedFS) Mkdir(cancel <-chan struct{}, input *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Mkdir(cancel, input, name, out)
	w.m.note(opMkdir, t, st)
	return st
}

func (w *timedFS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Unlink(cancel, header, name)
	w.m.note(opUnlink, t, st)
	return st
}

func (w *timedFS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Rmdir(cancel, header, name)
	w.m.note(opRmdir, t, st)
	return st
}

func (w *timedFS) Rename(cancel <-chan struct{}, input *fuse.RenameIn, oldName string, newName string) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Rename(cancel, input, oldName, newName)
	w.m.note(opRename, t, st)
	return st
}

func (w *timedFS) Link(cancel <-chan struct{}, input *fuse.LinkIn, filename string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Link(cancel, input, filename, out)
	w.m.note(opLink, t, st)
	return st
}

func (w *timedFS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
	w.m.note(opSymlink, t, st)
	return st
}

func (w *timedFS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	t := time.Now()
	b, st := w.RawFileSystem.Readlink(cancel, header)
	w.m.note(opReadlink, t, st)
	return b, st
}

func (w *timedFS) Access(cancel <-chan struct{}, input *fuse.AccessIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Access(cancel, input)
	w.m.note(opAccess, t, st)
	return st
}

func (w *timedFS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := w.RawFileSystem.GetXAttr(cancel, header, attr, dest)
	w.m.note(opGetxattr, t, st)
	return n, st
}

func (w *timedFS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := w.RawFileSystem.ListXAttr(cancel, header, dest)
	w.m.note(opListxattr, t, st)
	return n, st
}

func (w *timedFS) SetXAttr(cancel <-chan struct{}, input *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.SetXAttr(cancel, input, attr, data)
	w.m.note(opSetxattr, t, st)
	return st
}

func (w *timedFS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.RemoveXAttr(cancel, header, attr)
	w.m.note(opRemovexattr, t, st)
	return st
}

func (w *timedFS) Create(cancel <-chan struct{}, input *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Create(cancel, input, name, out)
	w.m.note(opCreate, t, st)
	return st
}

func (w *timedFS) Tmpfile(cancel <-chan struct{}, input *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Tmpfile(cancel, input, out)
	w.m.note(opTmpfile, t, st)
	return st
}

func (w *timedFS) Open(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Open(cancel, input, out)
	w.m.note(opOpen, t, st)
	return st
}

func (w *timedFS) Read(cancel <-chan struct{}, input *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := time.Now()
	r, st := w.RawFileSystem.Read(cancel, input, buf)
	w.m.note(opRead, t, st)
	return r, st
}

func (w *timedFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Lseek(cancel, in, out)
	w.m.note(opLseek, t, st)
	return st
}

func (w *timedFS) GetLk(cancel <-chan struct{}, input *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.GetLk(cancel, input, out)
	w.m.note(opGetlk, t, st)
	return st
}

func (w *timedFS) SetLk(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.SetLk(cancel, input)
	w.m.note(opSetlk, t, st)
	return st
}

func (w *timedFS) SetLkw(cancel <-chan struct{}, input *fuse.LkIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.SetLkw(cancel, input)
	w.m.note(opSetlkw, t, st)
	return st
}

func (w *timedFS) Release(cancel <-chan struct{}, input *fuse.ReleaseIn) {
	t := time.Now()
	w.RawFileSystem.Release(cancel, input)
	w.m.note(opRelease, t, fuse.OK)
}

func (w *timedFS) Write(cancel <-chan struct{}, input *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := w.RawFileSystem.Write(cancel, input, data)
	w.m.note(opWrite, t, st)
	return n, st
}

func (w *timedFS) Writev(cancel <-chan struct{}, input *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := w.RawFileSystem.Writev(cancel, input, data)
	w.m.note(opWrite, t, st)
	return n, st
}

func (w *timedFS) CopyFileRange(cancel <-chan struct{}, input *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	t := time.Now()
	n, st := w.RawFileSystem.CopyFileRange(cancel, input)
	w.m.note(opCopyFileRange, t, st)
	return n, st
}

func (w *timedFS) Ioctl(cancel <-chan struct{}, input *fuse.IoctlIn, inbuf []byte, output *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
	w.m.note(opIoctl, t, st)
	return st
}

func (w *timedFS) Flush(cancel <-chan struct{}, input *fuse.FlushIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Flush(cancel, input)
	w.m.note(opFlush, t, st)
	return st
}

func (w *timedFS) Fsync(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Fsync(cancel, input)
	w.m.note(opFsync, t, st)
	return st
}

func (w *timedFS) Fallocate(cancel <-chan struct{}, input *fuse.FallocateIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Fallocate(cancel, input)
	w.m.note(opFallocate, t, st)
	return st
}

func (w *timedFS) OpenDir(cancel <-chan struct{}, input *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.OpenDir(cancel, input, out)
	w.m.note(opOpendir, t, st)
	return st
}

func (w *timedFS) ReadDir(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.ReadDir(cancel, input, out)
	w.m.note(opReaddir, t, st)
	return st
}

func (w *timedFS) ReadDirPlus(cancel <-chan struct{}, input *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.ReadDirPlus(cancel, input, out)
	w.m.note(opReaddirplus, t, st)
	return st
}

func (w *timedFS) FsyncDir(cancel <-chan struct{}, input *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.FsyncDir(cancel, input)
	w.m.note(opFsyncdir, t, st)
	return st
}

func (w *timedFS) StatFs(cancel <-chan struct{}, input *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.StatFs(cancel, input, out)
	w.m.note(opStatfs, t, st)
	return st
}

func (w *timedFS) Statx(cancel <-chan struct{}, input *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	t := time.Now()
	st := w.RawFileSystem.Statx(cancel, input, out)
	w.m.note(opStatx, t, st)
	return st
}

func (w *timedFS) Forget(nodeid, nlookup uint64) {
	t := time.Now()
	w.RawFileSystem.Forget(nodeid, nlookup)
	w.m.note(opForget, t, fuse.OK)
}

func (w *timedFS) ReleaseDir(input *fuse.ReleaseIn) {
	t := time.Now()
	w.RawFileSystem.ReleaseDir(input)
	w.m.note(opReleasedir, t, fuse.OK)
}
