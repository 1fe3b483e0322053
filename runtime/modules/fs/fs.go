// Package fs is the runtime module that serves the file layer
// (bufferpool/files) to tasks: stat of a path under the mount, sync (syncfs:
// every dirty page to the backing store) and the layer's statistics. Data
// calls on files go through FUSE or the shim; the shim's misses (reads of
// pages not resident, writes to such pages inside the file) come here as
// pread and pwrite on the daemon-side handle of the shim's open, named by
// its grant and token (Shim, set by the daemon: fusefs.ShimHandle), so
// that they cost an ipc round trip instead of a FUSE request.
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
	// MPread reads Out's length at off: (ShimOpen, off i64); Result.N.
	MPread = "pread"
	// MPwrite writes In at off, inside the file: (ShimOpen, off i64);
	// Result.Value = bytes written. A write that would end past the size
	// fails with ErrInvalid (the shim then uses the kernel).
	MPwrite = "pwrite"
	// MLease asks for a shim lease of at least need pages on the file of a
	// read-write open: (ShimOpen, need i64); Result.Value = the pages the
	// lease holds now (files.Handle.RefillShimLease).
	MLease = "lease"
)

// MaxIO bounds one pread or pwrite.
const MaxIO = 4 << 20

// ShimOpen names a shim's open: its grant, inode, access mode and token
// (fusefs.Capability).
type ShimOpen struct {
	Grant, Ino uint64
	AccMode    uint32
	Token      [32]byte
}

// WriteShimOpen appends the encoding of o.
func WriteShimOpen(w *runtime.ArgWriter, o ShimOpen) {
	w.U64(o.Grant).U64(o.Ino).U32(o.AccMode).Blob(o.Token[:])
}

// ShimResolver returns the handle of a shim's open after checking its
// token against the caller's pid and uid (fusefs.ShimHandle).
type ShimResolver func(grant, ino uint64, pid, uid, acc uint32, token []byte, write bool) (*files.Handle, error)

// MaxPath bounds a path argument.
const MaxPath = 4096

// Module serves a files.FS.
type Module struct {
	runtime.MethodTable
	fs   *files.FS
	shim ShimResolver
}

var _ runtime.Module = (*Module)(nil)

// New returns the module over fsys (owned and closed by the caller).
func New(fsys *files.FS) *Module {
	m := &Module{fs: fsys}
	m.MethodTable = runtime.MethodTable{{MStat, m.stat}, {MSync, m.sync}, {MStats, m.stats},
		{MPread, m.pread}, {MPwrite, m.pwrite}, {MLease, m.lease}}
	return m
}

// WithShim serves the shim's pread and pwrite through r (without it they
// fail with ErrInvalid). Call before registering the module.
func (m *Module) WithShim(r ShimResolver) *Module {
	m.shim = r
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

// ReadStat decodes a Stat (check r.Err); the zero Stat if it fails.
func ReadStat(r *runtime.ArgReader) Stat {
	st := Stat{Mode: r.U32(), Size: r.I64(), Nlink: r.U64(), UID: r.U32(), GID: r.U32(), Ino: r.U64(), Mtime: r.I64()}
	if r.Err() != nil {
		return Stat{}
	}
	return st
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

// shimHandle decodes a ShimOpen and off from t and resolves the handle,
// with the caller's credentials from its session (an in-process task has
// none: refused).
func (m *Module) shimHandle(t *runtime.Task, write bool) (*files.Handle, int64, error) {
	r := runtime.NewArgReader(t.Args)
	grant, ino, acc := r.U64(), r.U64(), r.U32()
	tok := r.Blob(32)
	off := r.I64()
	if err := r.Done(); err != nil {
		return nil, 0, err
	}
	if m.shim == nil || t.Session == nil || t.Session.PID <= 0 {
		return nil, 0, fmt.Errorf("shim %s: no shim opens here: %w", t.Method, runtime.ErrInvalid)
	}
	h, err := m.shim(grant, ino, uint32(t.Session.PID), t.Session.UID, acc, tok, write)
	if err != nil {
		return nil, 0, fmt.Errorf("shim %s of inode %d: %w", t.Method, ino, shimErr(err))
	}
	return h, off, nil
}

// shimErr keeps the errno and adds the runtime's sentinel, which the wire
// preserves.
func shimErr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && (errno == syscall.EPERM || errno == syscall.EBADF || errno == syscall.ESTALE) {
		return fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	}
	return wrap(err)
}

func (m *Module) pread(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	h, off, err := m.shimHandle(t, false)
	if err != nil {
		return runtime.Result{}, err
	}
	if len(t.Out) > MaxIO {
		return runtime.Result{}, fmt.Errorf("pread of %d bytes: %w", len(t.Out), runtime.ErrInvalid)
	}
	n, err := h.ReadAt(t.Out, off)
	if err != nil {
		return runtime.Result{}, shimErr(err)
	}
	return runtime.Result{N: n}, nil
}

func (m *Module) pwrite(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	h, off, err := m.shimHandle(t, true)
	if err != nil {
		return runtime.Result{}, err
	}
	if len(t.In) > MaxIO {
		return runtime.Result{}, fmt.Errorf("pwrite of %d bytes: %w", len(t.In), runtime.ErrInvalid)
	}
	n, err := h.WriteInside(t.In, off)
	if errors.Is(err, files.ErrPastEOF) {
		return runtime.Result{}, fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	}
	if err != nil {
		return runtime.Result{Value: uint64(n)}, shimErr(err)
	}
	return runtime.Result{Value: uint64(n)}, nil
}

func (m *Module) lease(_ context.Context, t *runtime.Task) (runtime.Result, error) {
	h, need, err := m.shimHandle(t, true)
	if err != nil {
		return runtime.Result{}, err
	}
	return runtime.Result{Value: uint64(max(h.RefillShimLease(need), 0))}, nil
}
