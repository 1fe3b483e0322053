package files

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/iowarp/iowarp/bufferpool"
)

// FileIO is what the pool did for one file while the daemon held it:
// counters since the file was first opened (or looked up) in this daemon,
// which only grow; a file the daemon forgot (closed, clean, idle) starts
// again from zero. `iowarp trace` takes them before and after a traced
// command and shows the difference next to what the command asked for.
// Reads the shim served from shared memory never reach the daemon and are
// not here.
type FileIO struct {
	Path         string `json:"path"`          // mount-relative
	Hits         uint64 `json:"hits"`          // page reads served from the pool
	RAMHits      uint64 `json:"ram_hits"`      // of them, from a RAM tier
	FileHits     uint64 `json:"file_hits"`     // from a file tier (NVMe, SSD)
	Misses       uint64 `json:"misses"`        // page reads that were not resident
	BytesRead    uint64 `json:"bytes_read"`    // read through the file layer (FUSE, ipc)
	BytesWritten uint64 `json:"bytes_written"` // written through it
	StagedBytes  uint64 `json:"staged_bytes"`  // read from the backing store (demand, read-ahead, read-around)
	StageReads   uint64 `json:"stage_reads"`   // reads of the backing store that read them
	WrittenBack  uint64 `json:"written_back"`  // written to the backing store
}

// fileIO is a file's FileIO counters.
type fileIO struct {
	hits, ramHits, fileHits, misses, read, written, staged, stageReads, flushed atomic.Uint64
}

// hit counts a page read served from the pool, from the tier of kind.
func (c *fileIO) hit(kind string) {
	c.hits.Add(1)
	switch kind {
	case bufferpool.KindRAM:
		c.ramHits.Add(1)
	case bufferpool.KindFile:
		c.fileHits.Add(1)
	}
}

func (c *fileIO) snapshot(path string) FileIO {
	return FileIO{Path: path, Hits: c.hits.Load(), RAMHits: c.ramHits.Load(), FileHits: c.fileHits.Load(),
		Misses: c.misses.Load(), BytesRead: c.read.Load(), BytesWritten: c.written.Load(),
		StagedBytes: c.staged.Load(), StageReads: c.stageReads.Load(), WrittenBack: c.flushed.Load()}
}

// Idle reports whether the counters are all zero.
func (f FileIO) Idle() bool {
	return f.Hits+f.Misses+f.BytesRead+f.BytesWritten+f.StagedBytes+f.StageReads+f.WrittenBack == 0
}

// FileIO returns the counters of every file the daemon holds that did
// something, by path.
func (fs *FS) FileIO() []FileIO {
	out := []FileIO{} // [] in JSON, not null
	for _, f := range fs.liveFiles() {
		if c := f.io.snapshot(f.displayName()); !c.Idle() {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b FileIO) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// Sub is the counters of f since before.
func (f FileIO) Sub(before FileIO) FileIO {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return a // the daemon forgot the file meanwhile: all of a is new
		}
		return a - b
	}
	return FileIO{Path: f.Path, Hits: sub(f.Hits, before.Hits), RAMHits: sub(f.RAMHits, before.RAMHits),
		FileHits: sub(f.FileHits, before.FileHits), Misses: sub(f.Misses, before.Misses),
		BytesRead: sub(f.BytesRead, before.BytesRead), BytesWritten: sub(f.BytesWritten, before.BytesWritten),
		StagedBytes: sub(f.StagedBytes, before.StagedBytes), StageReads: sub(f.StageReads, before.StageReads),
		WrittenBack: sub(f.WrittenBack, before.WrittenBack)}
}
