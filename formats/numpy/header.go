package numpy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// Magic starts every .npy file.
var Magic = []byte("\x93NUMPY")

// maxHeader bounds the header dictionary (NumPy itself refuses more than
// 10,000 bytes unless told otherwise).
const maxHeader = 1 << 20

// Header is the parsed header of a .npy file.
type Header struct {
	Descr   string  // array-protocol type string: "<f8", "|b1", "<M8[ns]"
	Fortran bool    // fortran_order
	Shape   []int64 // () for a scalar
	Offset  int64   // where the data starts
}

// ParseHeader parses the header at the start of b (the file's first
// bytes: all of the header must be there). Versions 1.0, 2.0 and 3.0.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < 10 || !bytes.HasPrefix(b, Magic) {
		return Header{}, fmt.Errorf("npy: no magic: %w", omni.ErrCorrupt)
	}
	major := b[6]
	var n, start int64
	switch major {
	case 1:
		n, start = int64(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return Header{}, fmt.Errorf("npy: truncated header length: %w", omni.ErrCorrupt)
		}
		n, start = int64(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return Header{}, fmt.Errorf("npy: format version %d.%d: %w", major, b[7], omni.ErrNotSupported)
	}
	if n > maxHeader {
		return Header{}, fmt.Errorf("npy: header of %d bytes (at most %d): %w", n, maxHeader, omni.ErrCorrupt)
	}
	if start+n > int64(len(b)) {
		return Header{}, fmt.Errorf("npy: header of %d bytes past the end: %w", n, omni.ErrCorrupt)
	}
	h, err := parseDict(string(b[start : start+n]))
	if err != nil {
		return Header{}, fmt.Errorf("npy: header: %w", err)
	}
	if _, err := parseDescr(h.Descr); err != nil {
		return Header{}, fmt.Errorf("npy: header: %w", err)
	}
	h.Offset = start + n
	return h, nil
}

// HeaderSize returns how many bytes of the file ParseHeader needs, from
// its first 12 bytes.
func HeaderSize(b []byte) (int64, error) {
	if len(b) < 10 || !bytes.HasPrefix(b, Magic) {
		return 0, fmt.Errorf("npy: no magic: %w", omni.ErrCorrupt)
	}
	switch b[6] {
	case 1:
		return 10 + int64(binary.LittleEndian.Uint16(b[8:])), nil
	case 2, 3:
		if len(b) < 12 {
			return 0, fmt.Errorf("npy: truncated header length: %w", omni.ErrCorrupt)
		}
		return 12 + int64(binary.LittleEndian.Uint32(b[8:])), nil
	}
	return 0, fmt.Errorf("npy: format version %d.%d: %w", b[6], b[7], omni.ErrNotSupported)
}

// parseDict parses the header's Python dict literal:
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
func parseDict(s string) (Header, error) {
	p := &lit{s: s}
	var h Header
	seen := map[string]bool{}
	if !p.take('{') {
		return h, p.fail("'{'")
	}
	for !p.take('}') {
		key, ok := p.str()
		if !ok {
			return h, p.fail("a key")
		}
		if !p.take(':') {
			return h, p.fail("':'")
		}
		if seen[key] {
			return h, fmt.Errorf("key %q twice: %w", key, omni.ErrCorrupt)
		}
		seen[key] = true
		var err error
		switch key {
		case "descr":
			if p.peek() == '[' {
				return h, fmt.Errorf("structured dtype: %w", omni.ErrNotSupported)
			}
			var ok bool
			if h.Descr, ok = p.str(); !ok {
				return h, p.fail("a dtype string")
			}
		case "fortran_order":
			h.Fortran, err = p.boolean()
		case "shape":
			h.Shape, err = p.shape()
		default:
			return h, fmt.Errorf("unknown key %q: %w", key, omni.ErrCorrupt)
		}
		if err != nil {
			return h, err
		}
		if !p.take(',') && p.peek() != '}' {
			return h, p.fail("',' or '}'")
		}
	}
	if p.skip(); p.i != len(p.s) {
		return h, p.fail("the end")
	}
	if !seen["descr"] || !seen["fortran_order"] || !seen["shape"] {
		return h, fmt.Errorf("descr, fortran_order and shape are required: %w", omni.ErrCorrupt)
	}
	return h, nil
}

// lit scans a Python literal.
type lit struct {
	s string
	i int
}

func (p *lit) fail(want string) error {
	return fmt.Errorf("at byte %d: want %s: %w", p.i, want, omni.ErrCorrupt)
}

func (p *lit) skip() {
	for p.i < len(p.s) && strings.IndexByte(" \t\n\r", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *lit) peek() byte {
	if p.skip(); p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *lit) take(c byte) bool {
	if p.peek() == c && c != 0 {
		p.i++
		return true
	}
	return false
}

// str scans a quoted string without escapes (dtype strings have none).
func (p *lit) str() (string, bool) {
	q := p.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", false
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	p.i += end + 2
	return v, true
}

func (p *lit) boolean() (bool, error) {
	p.skip()
	for _, w := range []string{"True", "False"} {
		if strings.HasPrefix(p.s[p.i:], w) {
			p.i += len(w)
			return w == "True", nil
		}
	}
	return false, p.fail("True or False")
}

// shape scans a tuple of non-negative ints: (), (3,), (3, 4).
func (p *lit) shape() ([]int64, error) {
	if !p.take('(') {
		return nil, p.fail("'('")
	}
	shape := []int64{}
	for !p.take(')') {
		if len(shape) >= 32 {
			return nil, fmt.Errorf("rank above 32: %w", omni.ErrCorrupt)
		}
		p.skip()
		j := p.i
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		if j < len(p.s) && p.s[j] == 'L' { // Python 2 longs
			j++
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(p.s[p.i:j], "L"), 10, 64)
		if err != nil || n < 0 {
			return nil, p.fail("a dimension size")
		}
		p.i = j
		shape = append(shape, n)
		if !p.take(',') && p.peek() != ')' {
			return nil, p.fail("',' or ')'")
		}
	}
	// Element counts (and so byte sizes) must fit an int64.
	total := int64(1)
	for _, n := range shape {
		if n != 0 && total > math.MaxInt64/n {
			return nil, fmt.Errorf("shape %v overflows: %w", shape, omni.ErrCorrupt)
		}
		total *= n
	}
	return shape, nil
}
