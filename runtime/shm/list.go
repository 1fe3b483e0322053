package shm

import "fmt"

// List is a doubly linked list of T in shared memory, one allocation per
// node. T must be pointer-free and fixed-size. Safe for concurrent use by
// goroutines and processes (one lock in its header). Walks are bounded by
// the stored length, so a cycle planted in shared memory is an error, not a
// hang.
type List[T any] struct {
	object
	esz uint64
}

const (
	listMagic = 0x4C535431 // "LST1"
	lLen      = 16
	lHead     = 24
	lTail     = 32
	listHdr   = 40

	nodeMagic = 0x4E4F4445 // "NODE"
	nMagic    = 0
	nNext     = 8
	nPrev     = 16
	nValue    = 24
)

// NewList allocates an empty list.
func NewList[T any](s *Segment) (*List[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("new list: %w", err)
	}
	o, err := newObject(s, listMagic, listHdr)
	if err != nil {
		return nil, fmt.Errorf("new list: %w", err)
	}
	o.set32(cElemSize, uint32(sizeOf[T]()))
	o.set32(cTag, layoutTag(t))
	o.publish()
	return &List[T]{object: o, esz: sizeOf[T]()}, nil
}

// OpenList returns the List[T] whose header is at p.
func OpenList[T any](s *Segment, p Pointer) (*List[T], error) {
	t := typeOf[T]()
	if err := checkType(t); err != nil {
		return nil, fmt.Errorf("open list: %w", err)
	}
	o, err := openObject(s, p, listMagic, listHdr)
	if err != nil {
		return nil, fmt.Errorf("open list: %w", err)
	}
	if err := checkElem(o, sizeOf[T](), layoutTag(t)); err != nil {
		return nil, fmt.Errorf("open list: %w", err)
	}
	return &List[T]{object: o, esz: sizeOf[T]()}, nil
}

// node validates the node at off and returns its bytes.
func (l *List[T]) node(off uint64) ([]byte, error) {
	buf, err := l.s.buffer(off, nValue+l.esz)
	if err != nil || load32(l.s.mem, off+nMagic) != nodeMagic {
		return nil, fmt.Errorf("list %v node %#x: %w", l.Pointer(), off, ErrCorrupt)
	}
	return buf, nil
}

// ends validates head and tail against the length.
func (l *List[T]) endsLocked() (head, tail, n uint64, err error) {
	head, tail, n = l.u64(lHead), l.u64(lTail), l.u64(lLen)
	if (n == 0) != (head == 0) || (n == 0) != (tail == 0) {
		return 0, 0, 0, fmt.Errorf("list %v: len %d head %#x tail %#x: %w", l.Pointer(), n, head, tail, ErrCorrupt)
	}
	return head, tail, n, nil
}

// Len returns the number of elements.
func (l *List[T]) Len() (int, error) {
	if err := l.lock(); err != nil {
		return 0, err
	}
	defer l.unlock()
	_, _, n, err := l.endsLocked()
	return int(n), err
}

// PushBack appends x.
func (l *List[T]) PushBack(x T) error { return l.push(x, true) }

// PushFront prepends x.
func (l *List[T]) PushFront(x T) error { return l.push(x, false) }

func (l *List[T]) push(x T, back bool) error {
	if err := l.lock(); err != nil {
		return err
	}
	defer l.unlock()
	head, tail, n, err := l.endsLocked()
	if err != nil {
		return err
	}
	// The neighbour is validated before anything changes.
	nb := head
	if back {
		nb = tail
	}
	if nb != 0 {
		if _, err := l.node(nb); err != nil {
			return err
		}
	}
	p, err := l.s.Alloc(nValue + l.esz)
	if err != nil {
		return fmt.Errorf("list %v push: %w", l.Pointer(), err)
	}
	off := p.Offset
	copy(l.s.mem[off+nValue:off+nValue+l.esz], valueBytes(&x))
	store32(l.s.mem, off+nMagic, nodeMagic)
	if back {
		store64(l.s.mem, off+nPrev, nb)
		l.linkAfter(nb, off, lHead, nNext)
		l.set64(lTail, off)
	} else {
		store64(l.s.mem, off+nNext, nb)
		l.linkAfter(nb, off, lTail, nPrev)
		l.set64(lHead, off)
	}
	l.set64(lLen, n+1)
	return nil
}

// linkAfter points nb's link field at off, or the list end field when the
// list was empty.
func (l *List[T]) linkAfter(nb, off, endField, link uint64) {
	if nb == 0 {
		l.set64(endField, off)
	} else {
		store64(l.s.mem, nb+link, off)
	}
}

// PopFront removes and returns the first element, or ErrEmpty.
func (l *List[T]) PopFront() (T, error) { return l.pop(false) }

// PopBack removes and returns the last element, or ErrEmpty.
func (l *List[T]) PopBack() (T, error) { return l.pop(true) }

func (l *List[T]) pop(back bool) (T, error) {
	var x T
	if err := l.lock(); err != nil {
		return x, err
	}
	defer l.unlock()
	head, tail, n, err := l.endsLocked()
	if err != nil {
		return x, err
	}
	if n == 0 {
		return x, ErrEmpty
	}
	off, link, endField, otherEnd, backLink := head, uint64(nNext), uint64(lHead), uint64(lTail), uint64(nPrev)
	if back {
		off, link, endField, otherEnd, backLink = tail, nPrev, lTail, lHead, nNext
	}
	buf, err := l.node(off)
	if err != nil {
		return x, err
	}
	nb := load64(l.s.mem, off+link)
	if (nb == 0) != (n == 1) {
		return x, fmt.Errorf("list %v: node %#x link %#x with len %d: %w", l.Pointer(), off, nb, n, ErrCorrupt)
	}
	if nb != 0 {
		if _, err := l.node(nb); err != nil {
			return x, err
		}
		store64(l.s.mem, nb+backLink, 0)
	} else {
		l.set64(otherEnd, 0)
	}
	copy(valueBytes(&x), buf[nValue:])
	l.set64(endField, nb)
	l.set64(lLen, n-1)
	store32(l.s.mem, off+nMagic, 0)
	if err := l.s.freeOffset(off); err != nil {
		return x, err
	}
	return x, nil
}

// Values returns a copy of all elements, front to back.
func (l *List[T]) Values() ([]T, error) {
	if err := l.lock(); err != nil {
		return nil, err
	}
	defer l.unlock()
	return l.valuesLocked()
}

func (l *List[T]) valuesLocked() ([]T, error) {
	head, tail, n, err := l.endsLocked()
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, min(n, 4096))
	off, prev := head, uint64(0)
	for i := uint64(0); i < n; i++ {
		buf, err := l.node(off)
		if err != nil {
			return nil, err
		}
		if load64(l.s.mem, off+nPrev) != prev {
			return nil, fmt.Errorf("list %v: node %#x back link: %w", l.Pointer(), off, ErrCorrupt)
		}
		var x T
		copy(valueBytes(&x), buf[nValue:])
		out = append(out, x)
		prev, off = off, load64(l.s.mem, off+nNext)
	}
	if off != 0 || prev != tail {
		return nil, fmt.Errorf("list %v: chain does not end at tail after %d nodes: %w", l.Pointer(), n, ErrCorrupt)
	}
	return out, nil
}

// Free releases every node and the list.
func (l *List[T]) Free() error {
	if err := l.lock(); err != nil {
		return err
	}
	var firstErr error
	off := l.u64(lHead)
	for i, n := uint64(0), l.u64(lLen); off != 0 && i < n; i++ {
		if _, err := l.node(off); err != nil {
			firstErr = err
			break
		}
		next := load64(l.s.mem, off+nNext)
		store32(l.s.mem, off+nMagic, 0)
		if err := l.s.freeOffset(off); err != nil {
			firstErr = err
			break
		}
		off = next
	}
	if err := l.destroy(); firstErr == nil {
		firstErr = err
	}
	return firstErr
}
