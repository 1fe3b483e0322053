// Package fs is the runtime module that serves the file layer
// (bufferpool/files) to tasks: stat of a path under the mount, sync (syncfs:
// every dirty page to the backing store) and the layer's statistics. Data
// calls on files go through FUSE or the shim, not through this module.
//
// Safe for concurrent use (files.FS is).
package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"syscall"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/runtime"
)

// Name is the module's name.
const Name = "fs"

// Method names, in id order.
const (
	MStat  = "stat"  // (path) Out: Stat
	MSync  = "sync"  // ()
	MStats = "stats" // () Out: JSON of files.Stats
)

// MaxPath bounds a path argument.
const MaxPath = 4096

// Module serves a files.FS.
type Module struct {
	runtime.MethodTable
	fs *files.FS
}

var _ runtime.Module = (*Module)(nil)

// New returns the module over fsys (owned and closed by the caller).
func New(fsys *files.FS) *Module {
	m := &Module{fs: fsys}
	m.MethodTable = runtime.MethodTable{{MStat, m.stat}, {MSync, m.sync}, {MStats, m.stats}}
	return m
}

func (m *Module) Name() string                  { return Name }
func (m *Module) Methods() []string             { return m.Names() }
func (m *Module) Initialize(*runtime.Env) error { return nil }
func (m *Module) Shutdown() error               { return nil }

// Stat is what fs.stat answers.
type Stat struct {
	Mode  uint32
	Size  int64
	Nlink uint64
	UID   uint32
	GID   uint32
	Ino   uint64
	Mtime int64 // ns since the epoch
}

// WriteStat appends the encoding of st.
func WriteStat(w *runtime.ArgWriter, st Stat) {
	w.U32(st.Mode).I64(st.Size).U64(st.Nlink).U32(st.UID).U32(st.GID).U64(st.Ino).I64(st.Mtime)
}

// ReadStat decodes a Stat (check r.Err).
func ReadStat(r *runtime.ArgReader) Stat {
	return Stat{Mode: r.U32(), Size: r.I64(), Nlink: r.U64(), UID: r.U32(), GID: r.U32(), Ino: r.U64(), Mtime: r.I64()}
}

func wrap(err error) error {
	var errno syscall.Errno
	switch {
	case err == nil:
		return nil
	case errors.As(err, &errno) && errno == syscall.ENOENT:
		return fmt.Errorf("%w: %w", runtime.ErrNoEntry, err)
	case errors.As(err, &errno) && (errno == syscall.EINVAL || errno == syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	case errors.Is(err, files.ErrNoSpace):
		return fmt.Errorf("%w: %w", runtime.ErrNoSpace, err)
	}
	return err
}

func (m *Module) stat(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	r := runtime.NewArgReader(t.Args)
	p := r.String(MaxPath)
	if err := r.Done(); err != nil {
		return runtime.Result{}, err
	}
	st, err := m.fs.Lstat(p)
	if err != nil {
		return runtime.Result{}, wrap(err)
	}
	w := runtime.NewArgWriter(nil)
	WriteStat(w, Stat{Mode: st.Mode, Size: st.Size, Nlink: uint64(st.Nlink), UID: st.Uid, GID: st.Gid,
		Ino: st.Ino, Mtime: st.Mtim.Nano()})
	return t.Reply(w.Bytes())
}

func (m *Module) sync(context.Context, *runtime.Task) (runtime.Result, error) {
	return runtime.Result{}, wrap(m.fs.Sync())
}

func (m *Module) stats(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	b, err := json.Marshal(m.fs.Stats())
	if err != nil {
		return runtime.Result{}, fmt.Errorf("%w: %w", runtime.ErrInternal, err)
	}
	return t.Reply(b)
}
