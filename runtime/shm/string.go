package shm

import "fmt"

// String is a mutable byte string in shared memory: a header holding its
// length and the offset of its bytes. It is safe for concurrent use by
// goroutines and processes (one lock in its header).
type String struct{ object }

const (
	stringMagic = 0x53545231 // "STR1"
	sLen        = 8
	sData       = 16
	stringHdr   = 24
)

// NewString allocates a String holding v.
func NewString(s *Segment, v string) (*String, error) {
	o, err := newObject(s, stringMagic, stringHdr)
	if err != nil {
		return nil, fmt.Errorf("new string: %w", err)
	}
	x := &String{o}
	if err := x.storeLocked(v, false); err != nil {
		s.Free(o.Pointer())
		return nil, fmt.Errorf("new string: %w", err)
	}
	o.publish()
	return x, nil
}

// OpenString returns the String whose header is at p.
func OpenString(s *Segment, p Pointer) (*String, error) {
	o, err := openObject(s, p, stringMagic, stringHdr)
	if err != nil {
		return nil, fmt.Errorf("open string: %w", err)
	}
	return &String{o}, nil
}

// bytesLocked returns the current contents, validated.
func (x *String) bytesLocked() ([]byte, error) {
	return x.s.buffer(x.u64(sData), x.u64(sLen))
}

// Load returns a copy of the string.
func (x *String) Load() (string, error) {
	if err := x.lock(); err != nil {
		return "", err
	}
	defer x.unlock()
	b, err := x.bytesLocked()
	if err != nil {
		return "", fmt.Errorf("string %v: %w", x.Pointer(), err)
	}
	return string(b), nil
}

// Len returns the length in bytes.
func (x *String) Len() (int, error) {
	if err := x.lock(); err != nil {
		return 0, err
	}
	defer x.unlock()
	if _, err := x.bytesLocked(); err != nil {
		return 0, err
	}
	return int(x.u64(sLen)), nil
}

// Store replaces the contents with v.
func (x *String) Store(v string) error {
	if err := x.lock(); err != nil {
		return err
	}
	defer x.unlock()
	return x.storeLocked(v, false)
}

// Append adds v at the end (amortised O(len(v)): the buffer doubles).
func (x *String) Append(v string) error {
	if err := x.lock(); err != nil {
		return err
	}
	defer x.unlock()
	return x.storeLocked(v, true)
}

func (x *String) storeLocked(v string, appendTo bool) error {
	old, err := x.bytesLocked()
	if err != nil {
		return fmt.Errorf("string %v: %w", x.Pointer(), err)
	}
	n := uint64(len(v))
	if appendTo {
		n += uint64(len(old))
	}
	if n == 0 {
		x.set64(sLen, 0)
		return nil
	}
	dataOff := x.u64(sData)
	var buf []byte
	if dataOff != 0 {
		full, _ := x.s.Bytes(Pointer{x.s.id, dataOff}) // validated by bytesLocked
		if uint64(len(full)) >= n {
			buf = full
		}
	}
	if buf == nil {
		grow := n
		if appendTo {
			grow = max(n, 2*uint64(len(old)))
		}
		p, err := x.s.Alloc(grow)
		if err != nil {
			return fmt.Errorf("string %v: %w", x.Pointer(), err)
		}
		buf, _ = x.s.Bytes(p)
		if appendTo {
			copy(buf, old)
		}
		if err := x.s.freeOffset(dataOff); err != nil {
			x.s.Free(p)
			return fmt.Errorf("string %v: %w", x.Pointer(), err)
		}
		x.set64(sData, p.Offset)
	}
	if appendTo {
		copy(buf[len(old):], v)
	} else {
		copy(buf, v)
	}
	x.set64(sLen, n)
	return nil
}

// Free releases the string's memory. Other handles to it then fail with
// ErrCorrupt (as long as the memory was not reused).
func (x *String) Free() error {
	return x.free(sData)
}
