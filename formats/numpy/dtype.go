package numpy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/iowarp/iowarp/formats/omni"
)

// conv is how file elements become OMNI elements.
type conv int

const (
	plain conv = iota // the same bytes (swapped when swap is set)
	half              // IEEE binary16 widened to float32
	ucs4              // NumPy 'U': UTF-32 code units, read as strings
)

// elem is the mapping of one NumPy dtype.
type elem struct {
	dt       omni.DType // the OMNI element type
	fsz      int        // bytes of one element (of one part, for complex) in the file
	swap     bool       // big-endian in the file
	conv     conv
	complex  bool // two parts per NumPy element: a trailing axis of size 2
	itemsize int  // bytes of one NumPy element
	attrs    []omni.Attribute
}

// timeUnits are the CF units of datetime64/timedelta64 units.
var timeUnits = map[string]string{
	"D": "days", "h": "hours", "m": "minutes", "s": "seconds",
	"ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds",
}

// parseDescr maps a NumPy array-protocol type string to an elem:
// booleans, signed and unsigned integers, float16 (as float32), float32,
// float64, complex64 and complex128 (a trailing axis of real and
// imaginary parts), datetime64 and timedelta64 (int64 with CF units),
// byte strings 'S' and unicode strings 'U'. Either byte order.
func parseDescr(d string) (elem, error) {
	bad := func(err error) (elem, error) { return elem{}, fmt.Errorf("dtype %q: %w", d, err) }
	if len(d) < 2 || strings.IndexByte("<>|=", d[0]) < 0 {
		return bad(omni.ErrCorrupt)
	}
	if strings.IndexByte("OV", d[1]) >= 0 { // pickled objects, raw/structured void
		return bad(omni.ErrNotSupported)
	}
	order, kind, rest := d[0], d[1], d[2:]
	unit := ""
	if kind == 'M' || kind == 'm' {
		if i := strings.IndexByte(rest, '['); i >= 0 && strings.HasSuffix(rest, "]") {
			rest, unit = rest[:i], rest[i+1:len(rest)-1]
		}
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 || n > 1<<20 {
		return bad(omni.ErrCorrupt)
	}
	e := elem{fsz: n, itemsize: n, swap: order == '>' && n > 1}
	intType := func(signed bool) omni.DType {
		if signed {
			return omni.DType("int" + strconv.Itoa(n*8))
		}
		return omni.DType("uint" + strconv.Itoa(n*8))
	}
	switch {
	case kind == 'b' && n == 1:
		e.dt = omni.Bool
	case (kind == 'i' || kind == 'u') && (n == 1 || n == 2 || n == 4 || n == 8):
		e.dt = intType(kind == 'i')
	case kind == 'f' && n == 2:
		e.dt, e.conv = omni.Float32, half
	case kind == 'f' && (n == 4 || n == 8):
		e.dt = omni.DType("float" + strconv.Itoa(n*8))
	case kind == 'c' && (n == 8 || n == 16):
		e.dt, e.fsz, e.complex = omni.DType("float"+strconv.Itoa(n*4)), n/2, true
	case (kind == 'M' || kind == 'm') && n == 8:
		e.dt = omni.Int64
		if u, ok := timeUnits[unit]; ok {
			if kind == 'M' {
				u += " since 1970-01-01T00:00:00"
				e.attrs = append(e.attrs, omni.StringAttr("calendar", "proleptic_gregorian"))
			}
			e.attrs = append(e.attrs, omni.StringAttr("units", u))
		}
		e.attrs = append(e.attrs, omni.IntAttr("_FillValue", math.MinInt64)) // NaT
	case kind == 'S':
		e.dt = omni.FixedString(n)
	case kind == 'U':
		e.dt, e.conv, e.fsz, e.itemsize = omni.String, ucs4, 4*n, 4*n
	default:
		return bad(omni.ErrNotSupported)
	}
	if e.dt != omni.String && !e.dt.Valid() {
		return bad(omni.ErrNotSupported)
	}
	e.attrs = append(e.attrs, omni.StringAttr("numpy_dtype", d))
	return e, nil
}

// osz is the size of one OMNI element (one part, for complex).
func (e elem) osz() int {
	if e.conv == ucs4 {
		return e.fsz
	}
	return e.dt.Size()
}

// convert writes n elements of src (sstep bytes apart) into dst (dstep
// bytes apart) in OMNI form.
func (e elem) convert(dst []byte, dstep int, src []byte, sstep, n int) {
	sz := e.fsz
	switch {
	case e.conv == half:
		for k := 0; k < n; k++ {
			s := src[k*sstep : k*sstep+2]
			var u uint16
			if e.swap {
				u = binary.BigEndian.Uint16(s)
			} else {
				u = binary.LittleEndian.Uint16(s)
			}
			binary.LittleEndian.PutUint32(dst[k*dstep:], math.Float32bits(halfToFloat(u)))
		}
	case !e.swap || e.conv == ucs4: // ucs4: swapped by decodeUCS4
		if sstep == sz && dstep == sz {
			copy(dst[:n*sz], src[:n*sz])
			return
		}
		for k := 0; k < n; k++ {
			copy(dst[k*dstep:k*dstep+sz], src[k*sstep:])
		}
	default:
		for k := 0; k < n; k++ {
			d, s := dst[k*dstep:k*dstep+sz], src[k*sstep:k*sstep+sz]
			for i := range sz {
				d[i] = s[sz-1-i]
			}
		}
	}
}

// halfToFloat widens an IEEE 754 binary16 value exactly.
func halfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, nan
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0:
		return math.Float32frombits(sign)
	}
	// subnormal: normalise
	e := uint32(113)
	for frac&0x400 == 0 {
		frac <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (frac&0x3ff)<<13)
}

// decodeUCS4 decodes NumPy 'U' elements of raw (fsz bytes each) into
// strings, trailing NULs dropped; code units that are not Unicode scalar
// values are an error.
func (e elem) decodeUCS4(raw []byte) ([]string, error) {
	out := make([]string, 0, len(raw)/e.fsz)
	var sb strings.Builder
	for off := 0; off+e.fsz <= len(raw); off += e.fsz {
		sb.Reset()
		b := raw[off : off+e.fsz]
		end := len(b)
		for end >= 4 && b[end-1]|b[end-2]|b[end-3]|b[end-4] == 0 {
			end -= 4
		}
		for i := 0; i < end; i += 4 {
			var c uint32
			if e.swap {
				c = binary.BigEndian.Uint32(b[i:])
			} else {
				c = binary.LittleEndian.Uint32(b[i:])
			}
			if c > utf8.MaxRune || (c >= 0xd800 && c < 0xe000) {
				return nil, fmt.Errorf("unicode string: code point %#x: %w", c, omni.ErrCorrupt)
			}
			sb.WriteRune(rune(c))
		}
		out = append(out, sb.String())
	}
	return out, nil
}
