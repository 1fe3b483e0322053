package shm

import (
	"bytes"
	"fmt"
)

// Map is a hash map from K to V in shared memory: open addressing with
// linear probing and backward-shift deletion (no tombstones), grown by
// doubling at 3/4 load. Keys are hashed and compared as bytes (FNV-1a, the
// same in every process), so K must be pointer-free and without padding;
// float keys compare by bit pattern. Safe for concurrent use by goroutines
// and processes (one lock in its header). Probes are bounded by the table
// size, so a table filled with garbage is an error, not a hang.
type Map[K comparable, V any] struct {
	object
	ksz, vsz, slot uint64
}

const (
	mapMagic = 0x4D415031 // "MAP1"
	mKeySize = 8          // u32
	mValSize = 12         // u32
	mTag     = 16         // u32
	mLen     = 24
	mCap     = 32 // slots, a power of two
	mTable   = 40
	mapHdr   = 48

	mapMinCap = 8
	// A slot is an 8-byte hash word (0 = empty, else hash|1<<63), the key
	// bytes, then the value bytes, rounded up to 8.
	slotHash = 0
	slotKey  = 8
)

// NewMap allocates an empty map.
func NewMap[K comparable, V any](s *Segment) (*Map[K, V], error) {
	tag, err := mapTypes[K, V]()
	if err != nil {
		return nil, fmt.Errorf("new map: %w", err)
	}
	o, err := newObject(s, mapMagic, mapHdr)
	if err != nil {
		return nil, fmt.Errorf("new map: %w", err)
	}
	m := newMapHandle[K, V](o)
	o.set32(mKeySize, uint32(m.ksz))
	o.set32(mValSize, uint32(m.vsz))
	o.set32(mTag, tag)
	o.publish()
	return m, nil
}

// OpenMap returns the Map[K,V] whose header is at p.
func OpenMap[K comparable, V any](s *Segment, p Pointer) (*Map[K, V], error) {
	tag, err := mapTypes[K, V]()
	if err != nil {
		return nil, fmt.Errorf("open map: %w", err)
	}
	o, err := openObject(s, p, mapMagic, mapHdr)
	if err != nil {
		return nil, fmt.Errorf("open map: %w", err)
	}
	m := newMapHandle[K, V](o)
	if uint64(o.u32(mKeySize)) != m.ksz || uint64(o.u32(mValSize)) != m.vsz || o.u32(mTag) != tag {
		return nil, fmt.Errorf("open map %v: key/value layout differs: %w", p, ErrBadType)
	}
	return m, nil
}

func mapTypes[K comparable, V any]() (uint32, error) {
	kt, vt := typeOf[K](), typeOf[V]()
	if err := checkKeyType(kt); err != nil {
		return 0, err
	}
	if err := checkType(vt); err != nil {
		return 0, err
	}
	return layoutTag(kt, vt), nil
}

func newMapHandle[K comparable, V any](o object) *Map[K, V] {
	ksz, vsz := sizeOf[K](), sizeOf[V]()
	return &Map[K, V]{object: o, ksz: ksz, vsz: vsz, slot: (slotKey + ksz + vsz + 7) &^ 7}
}

// hashKey is FNV-1a 64 with a final avalanche, never 0.
func hashKey(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range key {
		h ^= uint64(b)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h | 1<<63
}

// tableLocked validates the header and returns the slot array and its size.
func (m *Map[K, V]) tableLocked() ([]byte, uint64, error) {
	n, c := m.u64(mLen), m.u64(mCap)
	if c == 0 && n == 0 && m.u64(mTable) == 0 {
		return nil, 0, nil
	}
	size, ok := mulSize(c, m.slot)
	if !ok || c < mapMinCap || c&(c-1) != 0 || n >= c {
		return nil, 0, fmt.Errorf("map %v: len %d cap %d: %w", m.Pointer(), n, c, ErrCorrupt)
	}
	tab, err := m.s.buffer(m.u64(mTable), size)
	if err != nil {
		return nil, 0, fmt.Errorf("map %v: %w", m.Pointer(), err)
	}
	return tab, c, nil
}

func (m *Map[K, V]) slotAt(tab []byte, i uint64) []byte { return tab[i*m.slot : (i+1)*m.slot] }

// findLocked returns the slot index holding key, or the empty slot where it
// would go (found false).
func (m *Map[K, V]) findLocked(tab []byte, c uint64, key []byte, h uint64) (uint64, bool, error) {
	for i, probes := h&(c-1), uint64(0); probes < c; i, probes = (i+1)&(c-1), probes+1 {
		sl := m.slotAt(tab, i)
		sh := load64(sl, slotHash)
		if sh == 0 {
			return i, false, nil
		}
		if sh == h && bytes.Equal(sl[slotKey:slotKey+m.ksz], key) {
			return i, true, nil
		}
	}
	return 0, false, fmt.Errorf("map %v: no empty slot in %d: %w", m.Pointer(), c, ErrCorrupt)
}

// Get returns the value stored under k.
func (m *Map[K, V]) Get(k K) (V, bool, error) {
	var v V
	if err := m.lock(); err != nil {
		return v, false, err
	}
	defer m.unlock()
	tab, c, err := m.tableLocked()
	if err != nil || c == 0 {
		return v, false, err
	}
	key := valueBytes(&k)
	i, ok, err := m.findLocked(tab, c, key, hashKey(key))
	if ok {
		copy(valueBytes(&v), m.slotAt(tab, i)[slotKey+m.ksz:])
	}
	return v, ok, err
}

// Put stores v under k, replacing any previous value.
func (m *Map[K, V]) Put(k K, v V) error {
	return m.Update(k, func(V, bool) V { return v })
}

// Update stores fn(old, present) under k, atomically with respect to every
// other user of the map. fn runs with the map locked: it must be short and
// must not use the map.
func (m *Map[K, V]) Update(k K, fn func(old V, ok bool) V) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.unlock()
	tab, c, err := m.tableLocked()
	if err != nil {
		return err
	}
	if (m.u64(mLen)+1)*4 > c*3 {
		if tab, c, err = m.growLocked(tab, c); err != nil {
			return err
		}
	}
	key := valueBytes(&k)
	h := hashKey(key)
	i, ok, err := m.findLocked(tab, c, key, h)
	if err != nil {
		return err
	}
	sl := m.slotAt(tab, i)
	var old V
	if ok {
		copy(valueBytes(&old), sl[slotKey+m.ksz:])
	}
	nv := fn(old, ok)
	copy(sl[slotKey+m.ksz:], valueBytes(&nv))
	if !ok {
		copy(sl[slotKey:], key)
		store64(sl, slotHash, h)
		m.set64(mLen, m.u64(mLen)+1)
	}
	return nil
}

// growLocked moves every entry into a table twice as large.
func (m *Map[K, V]) growLocked(old []byte, oc uint64) ([]byte, uint64, error) {
	nc := max(2*oc, mapMinCap)
	size, ok := mulSize(nc, m.slot)
	if !ok {
		return nil, 0, fmt.Errorf("map %v: %d slots: %w", m.Pointer(), nc, ErrNoSpace)
	}
	p, err := m.s.Alloc(size)
	if err != nil {
		return nil, 0, fmt.Errorf("map %v grow: %w", m.Pointer(), err)
	}
	tab, _ := m.s.buffer(p.Offset, size)
	var n uint64
	for i := uint64(0); i < oc; i++ {
		sl := m.slotAt(old, i)
		h := load64(sl, slotHash)
		if h == 0 {
			continue
		}
		j, _, err := m.findLocked(tab, nc, sl[slotKey:slotKey+m.ksz], h)
		if err != nil || h&(1<<63) == 0 {
			m.s.Free(p)
			return nil, 0, fmt.Errorf("map %v grow: slot %d: %w", m.Pointer(), i, ErrCorrupt)
		}
		copy(m.slotAt(tab, j), sl)
		n++
	}
	if n != m.u64(mLen) {
		m.s.Free(p)
		return nil, 0, fmt.Errorf("map %v: %d entries, header says %d: %w", m.Pointer(), n, m.u64(mLen), ErrCorrupt)
	}
	if err := m.s.freeOffset(m.u64(mTable)); err != nil {
		m.s.Free(p)
		return nil, 0, err
	}
	m.set64(mTable, p.Offset)
	m.set64(mCap, nc)
	return tab, nc, nil
}

// Delete removes k and reports whether it was present.
func (m *Map[K, V]) Delete(k K) (bool, error) {
	if err := m.lock(); err != nil {
		return false, err
	}
	defer m.unlock()
	tab, c, err := m.tableLocked()
	if err != nil || c == 0 {
		return false, err
	}
	key := valueBytes(&k)
	i, ok, err := m.findLocked(tab, c, key, hashKey(key))
	if !ok || err != nil {
		return false, err
	}
	m.shiftBackLocked(tab, c, i)
	m.set64(mLen, m.u64(mLen)-1)
	return true, nil
}

// shiftBackLocked empties slot i and moves later entries of the same probe
// run back so that every entry stays reachable from its home slot.
func (m *Map[K, V]) shiftBackLocked(tab []byte, c, i uint64) {
	mask := c - 1
	for j, probes := (i+1)&mask, uint64(0); probes < c; j, probes = (j+1)&mask, probes+1 {
		sl := m.slotAt(tab, j)
		h := load64(sl, slotHash)
		if h == 0 {
			break
		}
		home := h & mask
		if (j-home)&mask >= (j-i)&mask {
			copy(m.slotAt(tab, i), sl)
			i = j
		}
	}
	store64(m.slotAt(tab, i), slotHash, 0)
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() (int, error) {
	if err := m.lock(); err != nil {
		return 0, err
	}
	defer m.unlock()
	_, _, err := m.tableLocked()
	return int(m.u64(mLen)), err
}

// All returns a copy of the map.
func (m *Map[K, V]) All() (map[K]V, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.unlock()
	tab, c, err := m.tableLocked()
	if err != nil {
		return nil, err
	}
	out := make(map[K]V, m.u64(mLen))
	for i := uint64(0); i < c; i++ {
		sl := m.slotAt(tab, i)
		if load64(sl, slotHash) == 0 {
			continue
		}
		var k K
		var v V
		copy(valueBytes(&k), sl[slotKey:])
		copy(valueBytes(&v), sl[slotKey+m.ksz:])
		out[k] = v
	}
	if uint64(len(out)) != m.u64(mLen) {
		return nil, fmt.Errorf("map %v: %d entries, header says %d: %w", m.Pointer(), len(out), m.u64(mLen), ErrCorrupt)
	}
	return out, nil
}

// Free releases the map's memory.
func (m *Map[K, V]) Free() error {
	return m.free(mTable)
}
