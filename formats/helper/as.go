package helper

import (
	"context"
	"fmt"
	"path/filepath"
)

// As is who a request's helper runs as and what it may read. The daemon
// sets it from the FUSE request's caller (WithAs): a view must never
// read what the calling user could not, and HDF5 external storage and
// virtual datasets make a file name other files, which the library
// opens by itself.
type As struct {
	// Uid, Gid, Groups: the helper's credentials (setuid/setgid before
	// exec); Set false keeps the pool's own.
	Set      bool
	Uid, Gid uint32
	Groups   []uint32
	// Root, when not "", confines the helper to reading below it (and
	// the system's libraries): Landlock where the kernel has it, and
	// the readers refuse external storage and virtual-dataset sources
	// outside it.
	Root string
}

type asKey struct{}

// WithAs returns ctx whose pool requests run as a.
func WithAs(ctx context.Context, a As) context.Context {
	if a.Root != "" {
		a.Root = filepath.Clean(a.Root)
	}
	return context.WithValue(ctx, asKey{}, a)
}

func asOf(ctx context.Context) As {
	a, _ := ctx.Value(asKey{}).(As)
	return a
}

// key identifies the helpers that may serve a: one identity and root per
// helper process.
func (a As) key() string {
	if !a.Set {
		return "self\x00" + a.Root
	}
	return fmt.Sprintf("%d:%d:%v\x00%s", a.Uid, a.Gid, a.Groups, a.Root)
}
