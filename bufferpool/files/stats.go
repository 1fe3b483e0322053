package files

import (
	"cmp"
	"slices"
	"time"

	"github.com/iowarp/iowarp/internal/hist"
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

// stageRead reads buf at off of f's backing file for a stage-in, timed
// and counted in the FS's and the file's counters: with O_DIRECT where
// that pays (readBacking) when direct, else buffered (a small read served
// around the pool, or through it when the pool is full).
func (f *file) stageRead(buf []byte, off int64, direct bool) (n int, err error) {
	t := time.Now()
	if direct {
		n, err = f.readBacking(buf, off)
	} else {
		n, err = f.backing.ReadAt(buf, off)
	}
	f.fs.stats.stageLat.Since(t)
	f.fs.stats.staged.Add(uint64(n))
	f.io.staged.Add(uint64(n))
	f.io.stageReads.Add(1)
	return n, err
}

// Latencies are the histograms of the write-back's writes to the backing
// store and of the stage-ins' reads from it, for the metrics endpoint.
func (fs *FS) Latencies() (writeBack, stageIn hist.Snapshot) {
	return fs.stats.flushLat.Snapshot(), fs.stats.stageLat.Snapshot()
}
