package bufferpool

import (
	"fmt"
	"time"
)

// checkNamed validates a named-blob access.
func (b *Bucket) checkNamed(op, name string, off int64) error {
	if b.pageSize > 0 {
		return fmt.Errorf("%s %q: bucket %s is a page bucket: %w", op, name, b.Name(), ErrInvalid)
	}
	if name == "" || hiddenName(name) || off < 0 || off > maxOffset {
		return fmt.Errorf("%s %q at %d in bucket %s: %w", op, name, off, b.Name(), ErrInvalid)
	}
	return nil
}

// PutOptions modify a Put.
type PutOptions struct {
	// Durable returns once the blob is in the blob store on the file
	// tier and the store is synced (durable.go): it survives kill -9.
	Durable bool
}

// putMode says what a put does besides writing the pool.
type putMode int

const (
	putPlain   putMode = iota // drops a stored copy
	putDurable                // stores the blob
	putRestore                // recovery: the store already holds it
)

func modeOf(o PutOptions) putMode {
	if o.Durable {
		return putDurable
	}
	return putPlain
}

// Put creates or replaces blob name with data (dirty).
func (b *Bucket) Put(name string, data []byte) error {
	return b.put("put", name, 0, data, false, putPlain)
}

// PutWith is Put with options.
func (b *Bucket) PutWith(name string, data []byte, o PutOptions) error {
	return b.put("put", name, 0, data, false, modeOf(o))
}

// PartialPut writes data at off inside the blob, growing it if needed
// (creating it if absent).
func (b *Bucket) PartialPut(name string, off int64, data []byte) error {
	return b.put("partial put", name, off, data, true, putPlain)
}

// PartialPutWith is PartialPut with options.
func (b *Bucket) PartialPutWith(name string, off int64, data []byte, o PutOptions) error {
	return b.put("partial put", name, off, data, true, modeOf(o))
}

// put writes data at off of blob name; keep preserves the other bytes
// (PartialPut), otherwise the blob becomes exactly data (Put).
func (b *Bucket) put(op, name string, off int64, data []byte, keep bool, mode putMode) error {
	if mode != putRestore {
		if err := b.checkNamed(op, name, off); err != nil {
			return err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.putLocked(op, name, off, data, keep); err != nil {
		return err
	}
	bl := b.named[name]
	if mode == putPlain && b.Durable() {
		mode = putDurable // a durable bucket: every write is
	}
	switch mode {
	case putDurable:
		return b.storeBlobLocked(bl)
	case putPlain:
		return b.unstoreBlobLocked(bl)
	}
	return nil
}

// putLocked writes data at off of blob name in the pool.
func (b *Bucket) putLocked(op, name string, off int64, data []byte, keep bool) error {
	size := off + int64(len(data))
	if size > maxOffset {
		return fmt.Errorf("%s %q: size %d: %w", op, name, size, ErrInvalid)
	}
	now := time.Now().UnixNano()
	if err := b.checkLocked(); err != nil {
		return err
	}
	bl := b.named[name]
	if bl == nil {
		bl = &blob{name: name, page: -1, size: size, alloc: roundUp(size), dirty: true, scoreAt: now}
		t, err := b.p.placeLocked(b, bl.alloc)
		if err != nil {
			return fmt.Errorf("%s %q: %w", op, name, err)
		}
		if err := b.attachLocked(bl, t); err != nil {
			return fmt.Errorf("%s %q: %w", op, name, err)
		}
		b.insertLocked(bl)
	} else {
		if keep {
			size = max(size, bl.size)
		}
		if err := b.plainLocked(bl, keep); err != nil {
			return fmt.Errorf("%s %q: %w", op, name, err)
		}
		if err := b.resizeLocked(bl, size, keep); err != nil {
			return fmt.Errorf("%s %q: %w", op, name, err)
		}
	}
	if len(data) > 0 {
		if err := b.segs[bl.tier].seg.WriteAt(data, bl.off+off); err != nil {
			return fmt.Errorf("%s %q of bucket %s: %w", op, name, b.Name(), err)
		}
	}
	b.wroteLocked(bl, now)
	bl.mtime = now
	return nil
}

// resizeLocked makes bl size bytes long. With keep its first
// min(old, new) bytes are preserved and grown bytes read as zero;
// without, the caller overwrites all of it. On error bl is unchanged.
func (b *Bucket) resizeLocked(bl *blob, size int64, keep bool) error {
	alloc := roundUp(size)
	switch {
	case alloc > bl.alloc:
		if err := b.growLocked(bl, alloc, keep); err != nil {
			return err
		}
	case alloc < bl.alloc:
		b.shrinkLocked(bl, alloc)
	}
	if keep && size > bl.size {
		// Bytes past the old size inside the old extent may be stale.
		if err := b.segs[bl.tier].seg.Punch(bl.off+bl.size, min(size, bl.alloc)-bl.size); err != nil {
			return err
		}
	}
	if bl.dirty {
		b.p.tiers[bl.tier].dirty.Add(size - bl.size)
	}
	bl.size = size
	return nil
}

// shrinkLocked frees the tail of bl's extent past alloc bytes.
func (b *Bucket) shrinkLocked(bl *blob, alloc int64) {
	ts := b.p.tiers[bl.tier]
	s := b.segs[bl.tier]
	s.seg.Punch(bl.off+alloc, bl.alloc-alloc)
	s.ext.release(bl.off+alloc, bl.alloc-alloc)
	ts.release(bl.alloc - alloc)
	if alloc == 0 {
		s.nblobs--
		b.maybeCloseLocked(bl.tier)
		bl.off = 0
	}
	bl.alloc = alloc
}

// growLocked gives bl an extent of alloc bytes: in place if the bytes
// after it are free, else in a new extent of the same tier, else wherever
// placement finds room.
func (b *Bucket) growLocked(bl *blob, alloc int64, keep bool) error {
	ts := b.p.tiers[bl.tier]
	if bl.alloc > 0 && ts.reserve(alloc-bl.alloc) {
		s := b.segs[bl.tier]
		if s.ext.grow(bl.off, bl.alloc, alloc) {
			bl.alloc = alloc
			return nil
		}
		off := s.ext.alloc(alloc)
		if err := b.relocateLocked(bl, s, off, keep); err != nil {
			s.ext.release(off, alloc)
			ts.release(alloc - bl.alloc)
			return err
		}
		s.seg.Punch(bl.off, bl.alloc)
		s.ext.release(bl.off, bl.alloc)
		bl.off, bl.alloc = off, alloc
		return nil
	}
	bl.busy = true
	t, err := b.p.placeLocked(b, alloc)
	bl.busy = false
	if err != nil {
		return err
	}
	nb := &blob{name: bl.name, page: -1, size: bl.size, alloc: alloc}
	if err := b.attachLocked(nb, t); err != nil {
		return err
	}
	if err := b.relocateLocked(bl, b.segs[t], nb.off, keep); err != nil {
		b.detachLocked(nb)
		return err
	}
	// Swap storage: bl takes nb's place, the old storage is freed.
	b.detachLocked(&blob{page: -1, tier: bl.tier, off: bl.off, size: bl.size, alloc: bl.alloc, dirty: bl.dirty})
	if bl.dirty {
		b.p.tiers[t].dirty.Add(bl.size)
	}
	bl.tier, bl.off, bl.alloc = t, nb.off, alloc
	return nil
}

// relocateLocked copies bl's bytes to off of segment s (if keep).
func (b *Bucket) relocateLocked(bl *blob, s *segment, off int64, keep bool) error {
	if !keep || bl.size == 0 || bl.alloc == 0 {
		return nil
	}
	return copySeg(s.seg, off, b.segs[bl.tier].seg, bl.off, bl.size)
}

// Get returns a copy of the blob.
func (b *Bucket) Get(name string) ([]byte, error) {
	if err := b.checkNamed("get", name, 0); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkLocked(); err != nil {
		return nil, err
	}
	bl := b.named[name]
	if bl == nil {
		return nil, fmt.Errorf("get %q of bucket %s: %w", name, b.Name(), ErrNotFound)
	}
	buf := make([]byte, bl.size)
	if err := b.readLocked(bl, 0, buf); err != nil {
		return nil, err
	}
	bl.touch(now, true)
	return buf, nil
}

// readLocked reads buf from off of a named blob.
func (b *Bucket) readLocked(bl *blob, off int64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if err := b.readBlobLocked(bl, off, buf); err != nil {
		return fmt.Errorf("read %q of bucket %s: %w", bl.name, b.Name(), err)
	}
	return nil
}

// PartialGet reads into buf from off; returns bytes read (short at the
// end of the blob).
func (b *Bucket) PartialGet(name string, off int64, buf []byte) (int, error) {
	if err := b.checkNamed("partial get", name, off); err != nil {
		return 0, err
	}
	now := time.Now().UnixNano()
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkLocked(); err != nil {
		return 0, err
	}
	bl := b.named[name]
	if bl == nil {
		return 0, fmt.Errorf("partial get %q of bucket %s: %w", name, b.Name(), ErrNotFound)
	}
	if off > bl.size {
		return 0, fmt.Errorf("partial get %q at %d past size %d: %w", name, off, bl.size, ErrInvalid)
	}
	n := int(min(int64(len(buf)), bl.size-off))
	if err := b.readLocked(bl, off, buf[:n]); err != nil {
		return 0, err
	}
	bl.touch(now, true)
	return n, nil
}
