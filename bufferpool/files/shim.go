package files

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// PageSize is the page size of the file system's pool pages (the unit of
// stage-in and write-back, and of the shim's page table).
func (fs *FS) PageSize() int64 { return fs.ps }

// ShimMaps returns the daemon's fds of the file's shared page table and
// RAM-tier segment (see bufferpool.Bucket.PageTable), for a door that
// hands them to a client (the shim), and starts publishing the file's size
// in the table. The fds stay owned by the file's bucket; the door reopens
// them with the access it grants.
//
// writable says the door grants a read-write map: the shim then writes
// resident pages in place and sets their shared dirty bits. Until the
// matching ShimUnmap, those bits are harvested into the pool every
// shimHarvestEvery (and before every write-back, fsync, eviction or
// demotion, by the bucket itself); a harvest that finds some sets the
// mtime, schedules the write-back, and calls notify (the door drops what
// the kernel cached of the file). notify may be nil.
func (h *Handle) ShimMaps(writable bool, notify func()) (tableFd, dataFd int, err error) {
	f := h.f
	if writable {
		// The table made writable and the grant counted in one step
		// against the end of the last grant (ShimUnmap).
		f.shimMu.Lock()
		defer f.shimMu.Unlock()
		if f.snap.shared() {
			return -1, -1, unix.EBUSY // its pages are copied on write (snapshot.go)
		}
	}
	// Exclusive: an append in progress (which reserved no range while no
	// shim could append) ends before shims see the size.
	f.mu.Lock()
	tableFd, dataFd, err = f.bucket.PageTable(writable)
	if err != nil {
		f.mu.Unlock()
		return -1, -1, err
	}
	f.shareSize()
	if writable {
		f.shimmed.Store(true)
	}
	f.mu.Unlock()
	f.bucket.OnShimHarvest(f.shimHarvested)
	if writable {
		shimWatch(f, notify)
		f.refillLease()
	}
	return tableFd, dataFd, nil
}

// shimLeaseBytes is the step in which a file's shim lease of first-tier
// capacity is refilled (bufferpool/lease.go): large, so that a burst of new
// pages costs one refill per step, not a daemon round trip per page.
var shimLeaseBytes int64 = 64 << 20

// refillLease tops the file's shim lease up (a no-op while more than half
// of a step is left).
func (f *file) refillLease() {
	step := max(shimLeaseBytes/f.fs.ps, 1)
	if pages, _ := f.bucket.ShimLease(); pages >= step/2 {
		return
	}
	f.bucket.RefillShimLease(step)
}

// RefillShimLease is a shim's request, over runtime/ipc, for a lease of
// at least need pages on the file of this read-write handle: its lease
// ran out in the middle of a burst, and it asks instead of taking the
// kernel path until the next harvest. The lease is topped up to a step
// (shimLeaseBytes) or to twice need if that is more, as the first tier's room
// allows; it returns the pages the lease holds now (fewer than need: the
// shim takes the kernel path, nothing lost). Read-only handles and files
// without a read-write grant get 0.
func (h *Handle) RefillShimLease(need int64) int64 {
	f := h.f
	if h.flags&unix.O_ACCMODE == unix.O_RDONLY || !f.shimmed.Load() || need <= 0 {
		return 0
	}
	step := max(shimLeaseBytes/f.fs.ps, 1)
	f.harvestShim() // the pages created so far leave the lease, and go to write-back
	// Twice the need: the bucket tops up only a lease under half its
	// target, and one of need pages must be refilled.
	return f.bucket.RefillShimLease(max(step, 2*min(need, maxLeaseNeed)))
}

// maxLeaseNeed bounds one request (pages; the pool caps a lease at a
// quarter of the tier's room anyway).
const maxLeaseNeed = 1 << 20

// claimAppend returns where an append of n bytes goes, with f.mu held
// exclusively: the end of the file, reserved against shims' appends in
// the shared size (bufferpool.Bucket.ClaimSharedSize), so that appends
// through both doors land one after the other. (One too large for the
// file claims nothing: writeOnce refuses it.)
func (f *file) claimAppend(n int64) int64 {
	for {
		f.syncShim()
		off := f.size.Load()
		if !f.shimmed.Load() || n > maxFileSize-off || f.bucket.ClaimSharedSize(off, off+n) {
			return off
		}
	}
}

// syncShim folds what shims did to the file into the pool's view: their
// dirty bits and new pages (the bucket's harvest, whose count stays for
// harvestShim) and the size they raised. Reports whether the size grew.
// Cheap for a file that never had a read-write shim map. Every reader of
// the size for another process (stat, read, lseek, write-back, append)
// calls it first, so the kernel path answers what the shims wrote.
func (f *file) syncShim() bool {
	if !f.shimmed.Load() {
		return false
	}
	f.bucket.HarvestShim()
	s := f.bucket.SharedSize()
	if s <= f.size.Load() {
		return false
	}
	// A shim raises the size only past a page it placed first (fast.c), so
	// a size whose last byte is in no page is not one a write made: a
	// hostile or broken client wrote it, and it is ignored. Without this
	// a scribbled word made the file 7 EB long and its write-back EFBIG.
	// A page a shim created and is still copying into counts (an append
	// reserves its range before the copy): a FUSE-door append waiting
	// for that size must not wait for the harvest, nor forever for a
	// client killed in the copy.
	if ps := f.bucket.PageSize(); s > maxFileSize || !f.bucket.ShimPlaced((s-1)/ps) {
		return false
	}
	growTo(&f.size, s)
	f.shimChanged()
	return true
}

// shimChanged stamps a change of the file's bytes that shims made: at the
// mtime they stamped in the page table (their last write's time), so that
// the kernel path's stat and the shims' cached fstat (served from that
// word, adapters/posix/fast.c) agree; now when they stamped none.
func (f *file) shimChanged() {
	ns := f.bucket.ShimMtime()
	if ns <= 0 {
		f.dataChanged()
		return
	}
	t := time.Unix(0, ns)
	f.lastWrite.Store(time.Now().UnixNano())
	f.stateMu.Lock()
	if !f.mtimeDirty || t.After(f.mtime) {
		f.mtime, f.mtimeDirty = t, true
	}
	f.stateMu.Unlock()
}

// ShimUnmap ends one read-write grant of ShimMaps. At the last one the
// pending shim writes are harvested and, since no live handle holds a
// read-write map any more, a writer count left by a client killed inside
// a write is reset (bufferpool.Bucket.ResetShimWriters).
//
// The kernel sends the release of an fd in the background, so the next
// open of the file (often the next process of a job step) may be granted
// its maps while the last one ends: the reset happens only if no grant
// came meanwhile (under shimMu, which ShimMaps holds while it makes the
// table writable, counts its grant and leases), else it would take the
// new grant's lease and writable flag away. A writer count left by a dead
// client then stays until that grant ends (the file is poisoned for shim
// writes meanwhile; nothing is lost).
func (h *Handle) ShimUnmap() {
	f := h.f
	if !shimUnwatch(f) {
		return
	}
	f.harvestShim()
	if testHookShimUnmap != nil {
		testHookShimUnmap()
	}
	f.shimMu.Lock()
	defer f.shimMu.Unlock()
	if !shimWatched(f) {
		f.bucket.ResetShimWriters() // returns the lease too
	}
}

// testHookShimUnmap, if set, runs in ShimUnmap between the last grant's
// end and the reset (tests: a grant racing with it).
var testHookShimUnmap func()

// shareSize publishes the size in the bucket's page table (a no-op until
// ShimMaps created it).
func (f *file) shareSize() { f.bucket.SetSharedSize(f.size.Load()) }

// shimHarvested is the bucket's harvest callback (under its write lock;
// stateMu is a leaf): shim writes changed the data now.
func (f *file) shimHarvested(int) { f.shimChanged() }

// harvestShim folds pending shim writes into the pool and, if any were
// found (here or by a harvest inside the bucket), schedules them like
// any write. Reports whether there were some.
func (f *file) harvestShim() bool {
	grew := f.syncShim()
	if f.bucket.HarvestShimWrites() == 0 && !grew {
		return false
	}
	// shimHarvested stamped the change; write it back like any write.
	if f.fs.opts.Mode == Writethrough {
		f.writeBack(syncNone)
	} else {
		f.schedule()
	}
	return true
}

// shimHarvestEvery is how often files with read-write shim maps are
// harvested in the background (write-back then picks the pages up).
const shimHarvestEvery = 50 * time.Millisecond

// shimFiles are the files with read-write shim grants, watched by one
// harvester goroutine that runs while the set is not empty.
var shimFiles struct {
	mu      sync.Mutex
	m       map[*file]*shimWatcher
	running bool
}

type shimWatcher struct {
	grants int
	notify func()
}

func shimWatch(f *file, notify func()) {
	shimFiles.mu.Lock()
	defer shimFiles.mu.Unlock()
	if shimFiles.m == nil {
		shimFiles.m = make(map[*file]*shimWatcher)
	}
	w := shimFiles.m[f]
	if w == nil {
		w = &shimWatcher{}
		shimFiles.m[f] = w
	}
	w.grants++
	if notify != nil {
		w.notify = notify
	}
	if !shimFiles.running {
		shimFiles.running = true
		go shimHarvester()
	}
}

// shimWatched reports whether f has read-write grants.
func shimWatched(f *file) bool {
	shimFiles.mu.Lock()
	defer shimFiles.mu.Unlock()
	return shimFiles.m[f] != nil
}

// shimUnwatch drops one grant and reports whether it was the last.
func shimUnwatch(f *file) bool {
	shimFiles.mu.Lock()
	defer shimFiles.mu.Unlock()
	w := shimFiles.m[f]
	if w == nil {
		return false
	}
	if w.grants--; w.grants > 0 {
		return false
	}
	delete(shimFiles.m, f)
	return true
}

func shimHarvester() {
	t := time.NewTicker(shimHarvestEvery)
	defer t.Stop()
	type item struct {
		f      *file
		notify func()
	}
	var batch []item
	for range t.C {
		shimFiles.mu.Lock()
		if len(shimFiles.m) == 0 {
			shimFiles.running = false
			shimFiles.mu.Unlock()
			return
		}
		batch = batch[:0]
		for f, w := range shimFiles.m {
			batch = append(batch, item{f, w.notify})
		}
		shimFiles.mu.Unlock()
		for _, it := range batch {
			if it.f.harvestShim() && it.notify != nil {
				it.notify()
			}
			it.f.refillLease()
		}
	}
}
