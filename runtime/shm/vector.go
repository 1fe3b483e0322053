package shm

import "fmt"

// Vector is a growable array of T in shared memory. T must be pointer-free
// and fixed-size (checked by NewVector/OpenVector). Elements are copied in
// and out; no Go value ever aliases shared memory. Safe for concurrent use
// by goroutines and processes (one lock in its header).
type Vector[T any] struct {
	object
	esz uint64
}

const (
	vectorMagic = 0x56454331 // "VEC1"
	cElemSize   = 8          // u32 element size
	cTag        = 12         // u32 layout tag
	vLen        = 16
	vCap        = 24
	vData       = 32
	vectorHdr   = 40
)

// NewVector allocates an empty vector with room for capHint elements.
func NewVector[T any](s *Segment, capHint int) (*Vector[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("new vector: %w", err)
	}
	o, err := newObject(s, vectorMagic, vectorHdr)
	if err != nil {
		return nil, fmt.Errorf("new vector: %w", err)
	}
	v := &Vector[T]{object: o, esz: sizeOf[T]()}
	o.set32(cElemSize, uint32(v.esz))
	o.set32(cTag, layoutTag(t))
	if capHint > 0 {
		if err := v.growLocked(uint64(capHint)); err != nil {
			s.Free(o.Pointer())
			return nil, fmt.Errorf("new vector: %w", err)
		}
	}
	o.publish()
	return v, nil
}

// OpenVector returns the Vector[T] whose header is at p; T must have the
// layout the vector was made with.
func OpenVector[T any](s *Segment, p Pointer) (*Vector[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("open vector: %w", err)
	}
	o, err := openObject(s, p, vectorMagic, vectorHdr)
	if err != nil {
		return nil, fmt.Errorf("open vector: %w", err)
	}
	if err := checkElem(o, sizeOf[T](), layoutTag(t)); err != nil {
		return nil, fmt.Errorf("open vector: %w", err)
	}
	return &Vector[T]{object: o, esz: sizeOf[T]()}, nil
}

func checkElem(o object, esz uint64, tag uint32) error {
	if uint64(o.u32(cElemSize)) != esz || o.u32(cTag) != tag {
		return fmt.Errorf("%v: element size %d tag %#x, want %d %#x: %w",
			o.Pointer(), o.u32(cElemSize), o.u32(cTag), esz, tag, ErrBadType)
	}
	return nil
}

// dataLocked validates the header and returns the element array (cap
// elements) and the length.
func (v *Vector[T]) dataLocked() ([]byte, uint64, error) {
	n, c := v.u64(vLen), v.u64(vCap)
	bytes, ok := mulSize(c, v.esz)
	if !ok || n > c {
		return nil, 0, fmt.Errorf("vector %v: len %d cap %d: %w", v.Pointer(), n, c, ErrCorrupt)
	}
	buf, err := v.s.buffer(v.u64(vData), bytes)
	if err != nil {
		return nil, 0, fmt.Errorf("vector %v: %w", v.Pointer(), err)
	}
	return buf, n, nil
}

// growLocked reallocates the array to hold at least want elements.
func (v *Vector[T]) growLocked(want uint64) error {
	old, n, err := v.dataLocked()
	if err != nil {
		return err
	}
	c := max(want, 2*v.u64(vCap), 4)
	bytes, ok := mulSize(c, v.esz)
	if !ok {
		return fmt.Errorf("vector %v: %d elements: %w", v.Pointer(), c, ErrNoSpace)
	}
	p, err := v.s.Alloc(bytes)
	if err != nil {
		return fmt.Errorf("vector %v: grow to %d: %w", v.Pointer(), c, err)
	}
	buf, _ := v.s.Bytes(p)
	copy(buf, old[:n*v.esz])
	if err := v.s.freeOffset(v.u64(vData)); err != nil {
		v.s.Free(p)
		return err
	}
	v.set64(vData, p.Offset)
	v.set64(vCap, c)
	return nil
}

func (v *Vector[T]) elem(buf []byte, i uint64) []byte { return buf[i*v.esz : (i+1)*v.esz] }

// withData runs f with the lock held on the validated element array (cap
// elements) and the length; an error taking the lock or validating the
// header is returned without calling f.
func (v *Vector[T]) withData(f func(buf []byte, n uint64) error) error {
	if err := v.lock(); err != nil {
		return err
	}
	defer v.unlock()
	buf, n, err := v.dataLocked()
	if err != nil {
		return err
	}
	return f(buf, n)
}

// Len returns the number of elements.
func (v *Vector[T]) Len() (int, error) {
	var l int
	err := v.withData(func(_ []byte, n uint64) error {
		l = int(n)
		return nil
	})
	return l, err
}

// Get returns element i.
func (v *Vector[T]) Get(i int) (T, error) {
	var x T
	err := v.withData(func(buf []byte, n uint64) error {
		if i < 0 || uint64(i) >= n {
			return fmt.Errorf("vector get %d of %d: %w", i, n, ErrOutOfRange)
		}
		copy(valueBytes(&x), v.elem(buf, uint64(i)))
		return nil
	})
	return x, err
}

// Set replaces element i.
func (v *Vector[T]) Set(i int, x T) error {
	return v.withData(func(buf []byte, n uint64) error {
		if i < 0 || uint64(i) >= n {
			return fmt.Errorf("vector set %d of %d: %w", i, n, ErrOutOfRange)
		}
		copy(v.elem(buf, uint64(i)), valueBytes(&x))
		return nil
	})
}

// Push appends x and returns its index.
func (v *Vector[T]) Push(x T) (int, error) {
	var idx int
	err := v.withData(func(buf []byte, n uint64) error {
		if n == v.u64(vCap) {
			if err := v.growLocked(n + 1); err != nil {
				return err
			}
			var err error
			if buf, _, err = v.dataLocked(); err != nil {
				return err
			}
		}
		copy(v.elem(buf, n), valueBytes(&x))
		v.set64(vLen, n+1)
		idx = int(n)
		return nil
	})
	return idx, err
}

// Pop removes and returns the last element, or ErrEmpty.
func (v *Vector[T]) Pop() (T, error) {
	var x T
	err := v.withData(func(buf []byte, n uint64) error {
		if n == 0 {
			return ErrEmpty
		}
		copy(valueBytes(&x), v.elem(buf, n-1))
		v.set64(vLen, n-1)
		return nil
	})
	return x, err
}

// Truncate shortens the vector to n elements (n <= Len).
func (v *Vector[T]) Truncate(n int) error {
	return v.withData(func(_ []byte, l uint64) error {
		if n < 0 || uint64(n) > l {
			return fmt.Errorf("vector truncate to %d of %d: %w", n, l, ErrOutOfRange)
		}
		v.set64(vLen, uint64(n))
		return nil
	})
}

// Values returns a copy of all elements.
func (v *Vector[T]) Values() ([]T, error) {
	var out []T
	err := v.withData(func(buf []byte, n uint64) error {
		out = make([]T, n)
		copy(sliceBytes(out), buf)
		return nil
	})
	return out, err
}

// Free releases the vector's memory.
func (v *Vector[T]) Free() error {
	return v.free(vData)
}
