package files

import "container/list"

// DefaultMaxIdleFiles bounds the files kept cached while nobody has them
// open: each holds a backing fd and, while resident, a segment fd.
const DefaultMaxIdleFiles = 4096

// idleList is the LRU of files nobody holds. Guarded by FS.mu.
type idleList struct{ l list.List }

func (il *idleList) remove(f *file) {
	if f.idleElem != nil {
		il.l.Remove(f.idleElem)
		f.idleElem = nil
	}
}

// idleFile puts f, whose last reference just went, on the idle LRU and
// retires the coldest idle files past the bound.
func (fs *FS) idleFile(f *file) {
	fs.mu.Lock()
	if fs.files[f.key] == f && f.idleElem == nil {
		f.idleElem = fs.idle.l.PushBack(f)
	}
	var victims []*file
	for e := fs.idle.l.Front(); e != nil && fs.idle.l.Len()-len(victims) > fs.maxIdle; e = e.Next() {
		victims = append(victims, e.Value.(*file))
	}
	fs.mu.Unlock()
	for _, v := range victims {
		v.retire()
	}
}

// retireIfOver retires f after its write-back when it is idle and the
// idle list is over its bound: dirty idle files were passed over when
// they were released, and would otherwise keep their fds until some
// later release.
func (fs *FS) retireIfOver(f *file) {
	fs.mu.Lock()
	over := f.idleElem != nil && fs.idle.l.Len() > fs.maxIdle
	fs.mu.Unlock()
	if over {
		f.retire()
	}
}

// retire drops an idle file's cache if it is clean and still idle; a
// dirty one stays until the write-back cleaned it.
func (f *file) retire() {
	f.lockBacking()
	defer f.unlockBacking()
	if f.unwritten() {
		return
	}
	fs := f.fs
	fs.mu.Lock()
	f.stateMu.Lock()
	ok := f.refs == 0 && !f.dropped && fs.files[f.key] == f
	if ok {
		delete(fs.files, f.key)
		fs.idle.remove(f)
		f.dropped = true
	}
	f.stateMu.Unlock()
	fs.mu.Unlock()
	if ok {
		fs.pool.DeleteBucket(f.bucket.Name())
		f.direct.close()
		f.backing.Close()
	}
}

// unwritten reports whether f has data or metadata not yet written back.
// Exact with backingMu held (no write-back pass runs); without it, what
// was true a moment ago: a pass in progress has not marked its pages
// clean yet.
func (f *file) unwritten() bool {
	if f.fs.scratch {
		return true
	}
	f.stateMu.Lock()
	md := f.mtimeDirty
	f.stateMu.Unlock()
	return md || f.bucket.HasDirty()
}
