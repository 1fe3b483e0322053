package omni

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// DType names an element type: int8 … int64, uint8 … uint64, float32,
// float64, bool (one byte), S<n> (fixed-size byte string of n bytes) and
// string (variable length, see EncodeStrings).
type DType string

// The element types.
const (
	Int8    DType = "int8"
	Int16   DType = "int16"
	Int32   DType = "int32"
	Int64   DType = "int64"
	Uint8   DType = "uint8"
	Uint16  DType = "uint16"
	Uint32  DType = "uint32"
	Uint64  DType = "uint64"
	Float32 DType = "float32"
	Float64 DType = "float64"
	Bool    DType = "bool"
	String  DType = "string"
)

var dtypeSizes = map[DType]int{
	Int8: 1, Int16: 2, Int32: 4, Int64: 8, Uint8: 1, Uint16: 2, Uint32: 4, Uint64: 8,
	Float32: 4, Float64: 8, Bool: 1, Datetime64: 8,
}

// FixedString is the DType of byte strings of n bytes.
func FixedString(n int) DType { return DType("S" + strconv.Itoa(n)) }

// Size is the element size in bytes; 0 for variable-length strings.
func (t DType) Size() int {
	if n, ok := dtypeSizes[t]; ok {
		return n
	}
	if n, ok := t.fixedLen(); ok {
		return n
	}
	return 0
}

func (t DType) fixedLen() (int, bool) {
	if !strings.HasPrefix(string(t), "S") {
		return 0, false
	}
	n, err := strconv.Atoi(string(t[1:]))
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, false
	}
	return n, true
}

// Valid reports whether t is one of the known types.
// Datetime64 is not one: only decoding makes it.
func (t DType) Valid() bool { return t == String || t.Size() > 0 && t != Datetime64 }

// IsString reports fixed or variable-length strings.
func (t DType) IsString() bool {
	_, fixed := t.fixedLen()
	return fixed || t == String
}

// IsFloat reports float32 and float64.
func (t DType) IsFloat() bool { return t == Float32 || t == Float64 }

// IsSigned reports signed integers.
func (t DType) IsSigned() bool { return t == Int8 || t == Int16 || t == Int32 || t == Int64 }

// IsUnsigned reports unsigned integers and bool.
func (t DType) IsUnsigned() bool {
	return t == Uint8 || t == Uint16 || t == Uint32 || t == Uint64 || t == Bool
}

// NumpyDescr is the NumPy array-protocol type string ("<f4", "|S5").
// Variable-length strings have none.
func (t DType) NumpyDescr() (string, error) {
	switch {
	case t == Bool:
		return "|b1", nil
	case t == Datetime64:
		return "<M8[ns]", nil
	case t.IsFloat():
		return fmt.Sprintf("<f%d", t.Size()), nil
	case t.IsSigned():
		return fmt.Sprintf("<i%d", t.Size()), nil
	case t.IsUnsigned():
		if t.Size() == 1 {
			return "|u1", nil
		}
		return fmt.Sprintf("<u%d", t.Size()), nil
	}
	if n, ok := t.fixedLen(); ok {
		return fmt.Sprintf("|S%d", n), nil
	}
	return "", fmt.Errorf("numpy dtype of %s: %w", t, ErrNotSupported)
}

// ParseNumpyDescr is the inverse of NumpyDescr (little-endian or
// byte-order-free types only).
func ParseNumpyDescr(s string) (DType, error) {
	if len(s) < 3 {
		return "", fmt.Errorf("numpy dtype %q: %w", s, ErrInvalid)
	}
	order, kind, num := s[0], s[1], s[2:]
	if order == '>' {
		if n, _ := strconv.Atoi(num); n > 1 {
			return "", fmt.Errorf("big-endian numpy dtype %q: %w", s, ErrNotSupported)
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return "", fmt.Errorf("numpy dtype %q: %w", s, ErrInvalid)
	}
	var t DType
	switch kind {
	case 'b':
		t = Bool
	case 'f':
		t = DType(fmt.Sprintf("float%d", n*8))
	case 'i':
		t = DType(fmt.Sprintf("int%d", n*8))
	case 'u':
		t = DType(fmt.Sprintf("uint%d", n*8))
	case 'S':
		t = FixedString(n)
	default:
		return "", fmt.Errorf("numpy dtype %q: %w", s, ErrNotSupported)
	}
	if !t.Valid() {
		return "", fmt.Errorf("numpy dtype %q: %w", s, ErrNotSupported)
	}
	return t, nil
}

// Float64s decodes raw data of type t as float64 values (coordinates).
func Float64s(t DType, data []byte) ([]float64, error) {
	size := t.Size()
	if size == 0 || t.IsString() {
		return nil, fmt.Errorf("numeric values of %s: %w", t, ErrNotSupported)
	}
	out := make([]float64, len(data)/size)
	for i := range out {
		out[i] = Float64At(t, data[i*size:])
	}
	return out, nil
}

// Float64At decodes one element of numeric type t at the start of b.
func Float64At(t DType, b []byte) float64 {
	le := binary.LittleEndian
	switch t {
	case Int8:
		return float64(int8(b[0]))
	case Uint8, Bool:
		return float64(b[0])
	case Int16:
		return float64(int16(le.Uint16(b)))
	case Uint16:
		return float64(le.Uint16(b))
	case Int32:
		return float64(int32(le.Uint32(b)))
	case Uint32:
		return float64(le.Uint32(b))
	case Int64:
		return float64(int64(le.Uint64(b)))
	case Uint64:
		return float64(le.Uint64(b))
	case Float32:
		return float64(math.Float32frombits(le.Uint32(b)))
	case Float64:
		return math.Float64frombits(le.Uint64(b))
	}
	return math.NaN()
}

// FormatElement renders one element of t at the start of b as text.
func FormatElement(t DType, b []byte) string {
	le := binary.LittleEndian
	switch t {
	case Int8:
		return strconv.FormatInt(int64(int8(b[0])), 10)
	case Int16:
		return strconv.FormatInt(int64(int16(le.Uint16(b))), 10)
	case Int32:
		return strconv.FormatInt(int64(int32(le.Uint32(b))), 10)
	case Int64:
		return strconv.FormatInt(int64(le.Uint64(b)), 10)
	case Uint8:
		return strconv.FormatUint(uint64(b[0]), 10)
	case Uint16:
		return strconv.FormatUint(uint64(le.Uint16(b)), 10)
	case Uint32:
		return strconv.FormatUint(uint64(le.Uint32(b)), 10)
	case Uint64:
		return strconv.FormatUint(le.Uint64(b), 10)
	case Bool:
		return strconv.FormatBool(b[0] != 0)
	case Datetime64:
		return FormatTime(int64(le.Uint64(b)))
	case Float32:
		return strconv.FormatFloat(float64(math.Float32frombits(le.Uint32(b))), 'g', -1, 32)
	case Float64:
		return strconv.FormatFloat(math.Float64frombits(le.Uint64(b)), 'g', -1, 64)
	}
	if n, ok := t.fixedLen(); ok {
		return strings.TrimRight(string(b[:n]), "\x00")
	}
	return "?"
}

// EncodeStrings encodes variable-length strings: per element a 4-byte
// little-endian length, then the bytes.
func EncodeStrings(ss []string) []byte {
	n := 0
	for _, s := range ss {
		n += 4 + len(s)
	}
	out := make([]byte, 0, n)
	for _, s := range ss {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return out
}

// DecodeStrings is the inverse of EncodeStrings.
func DecodeStrings(b []byte) ([]string, error) {
	var out []string
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("string data: truncated length: %w", ErrInvalid)
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return nil, fmt.Errorf("string data: length %d past the end: %w", n, ErrInvalid)
		}
		out = append(out, string(b[4:4+n]))
		b = b[4+n:]
	}
	return out, nil
}

// Strings decodes string data of type t (fixed or variable) into Go strings.
func Strings(t DType, data []byte) ([]string, error) {
	if t == String {
		return DecodeStrings(data)
	}
	n, ok := t.fixedLen()
	if !ok {
		return nil, fmt.Errorf("strings of %s: %w", t, ErrNotSupported)
	}
	out := make([]string, len(data)/n)
	for i := range out {
		out[i] = strings.TrimRight(string(data[i*n:(i+1)*n]), "\x00")
	}
	return out, nil
}

// MaxFixedStrings bounds what FixStrings makes: one long string among
// many short ones would otherwise make count × longest bytes.
const MaxFixedStrings = 256 << 20

// FixStrings converts variable-length string data to fixed S<n>, n the
// longest string (at least 1): the form NumPy and Zarr v2 store. It
// fails (ErrNotSupported) past MaxFixedStrings bytes.
func FixStrings(data []byte) (DType, []byte, error) {
	ss, err := DecodeStrings(data)
	if err != nil {
		return "", nil, err
	}
	n := 1
	for _, s := range ss {
		n = max(n, len(s))
	}
	if int64(n)*int64(len(ss)) > MaxFixedStrings {
		return "", nil, fmt.Errorf("%d strings of up to %d bytes as fixed-width strings: more than %d bytes: %w",
			len(ss), n, MaxFixedStrings, ErrNotSupported)
	}
	out := make([]byte, n*len(ss))
	for i, s := range ss {
		copy(out[i*n:], s)
	}
	return FixedString(n), out, nil
}
