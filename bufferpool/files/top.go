package files

import (
	"cmp"
	"slices"
)

// FileDirty is a file and the data of its dirty pages in the pool (not
// yet on the backing store).
type FileDirty struct {
	Path       string `json:"path"`
	DirtyBytes int64  `json:"dirty_bytes"`
	Size       int64  `json:"size"`
}

// TopDirty lists the n files (n > 0) with the most dirty bytes, most
// first (ties by path); files with none are left out. For `iowarp stat
// --watch`: it walks the dirty pages of every live file, so it is for a
// human's refresh rate, not a hot path.
func (fs *FS) TopDirty(n int) []FileDirty {
	out := []FileDirty{} // [] in JSON, not null
	for _, f := range fs.liveFiles() {
		if d := f.dirtyBytes(); d > 0 {
			out = append(out, FileDirty{Path: f.displayName(), DirtyBytes: d, Size: f.size.Load()})
		}
	}
	slices.SortFunc(out, func(a, b FileDirty) int {
		return cmp.Or(cmp.Compare(b.DirtyBytes, a.DirtyBytes), cmp.Compare(a.Path, b.Path))
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
