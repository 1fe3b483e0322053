package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Task arguments are a flat little-endian encoding written with ArgWriter
// and read with ArgReader: fixed-size integers, and strings or byte strings
// as a u32 length followed by the bytes. There are no tags: both sides
// agree on the order, per method. The reader never panics and never reads
// past its input: the first problem sticks (Err) and every later read
// returns a zero value, so a method decodes everything and checks once.

// ArgWriter appends encoded arguments to a buffer. The zero value is ready.
type ArgWriter struct{ buf []byte }

// NewArgWriter starts from buf[:0] (to reuse its capacity).
func NewArgWriter(buf []byte) *ArgWriter { return &ArgWriter{buf: buf[:0]} }

// Bytes returns the encoding so far.
func (w *ArgWriter) Bytes() []byte { return w.buf }

// U8 appends one byte.
func (w *ArgWriter) U8(v uint8) *ArgWriter { w.buf = append(w.buf, v); return w }

// U32 appends a 32-bit integer.
func (w *ArgWriter) U32(v uint32) *ArgWriter {
	w.buf = binary.LittleEndian.AppendUint32(w.buf, v)
	return w
}

// U64 appends a 64-bit integer.
func (w *ArgWriter) U64(v uint64) *ArgWriter {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, v)
	return w
}

// I64 appends a signed 64-bit integer.
func (w *ArgWriter) I64(v int64) *ArgWriter { return w.U64(uint64(v)) }

// F64 appends a float64.
func (w *ArgWriter) F64(v float64) *ArgWriter { return w.U64(math.Float64bits(v)) }

// Bool appends a boolean as one byte.
func (w *ArgWriter) Bool(v bool) *ArgWriter {
	if v {
		return w.U8(1)
	}
	return w.U8(0)
}

// String appends a length-prefixed string.
func (w *ArgWriter) String(s string) *ArgWriter {
	w.U32(uint32(len(s)))
	w.buf = append(w.buf, s...)
	return w
}

// Blob appends a length-prefixed byte string.
func (w *ArgWriter) Blob(b []byte) *ArgWriter {
	w.U32(uint32(len(b)))
	w.buf = append(w.buf, b...)
	return w
}

// ArgReader decodes arguments. It is not safe for concurrent use.
type ArgReader struct {
	b   []byte
	err error
}

// NewArgReader reads b. b must not change while it is read: callers that
// got it from shared memory copy it first.
func NewArgReader(b []byte) *ArgReader { return &ArgReader{b: b} }

// Err is the first decoding error, wrapping ErrBadArgs.
func (r *ArgReader) Err() error { return r.err }

// Done returns Err, or an error if bytes are left over.
func (r *ArgReader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Len is the number of bytes not yet read.
func (r *ArgReader) Len() int { return len(r.b) }

// Failf records a decoding error found by the caller (a count over its
// limit, say): Err wraps ErrBadArgs and later reads return zero values.
func (r *ArgReader) Failf(format string, args ...any) { r.fail(format, args...) }

func (r *ArgReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBadArgs)
	}
	r.b = nil
}

func (r *ArgReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail("%s: need %d bytes, have %d", what, n, len(r.b))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// U8 reads one byte.
func (r *ArgReader) U8() uint8 {
	if b := r.take(1, "u8"); b != nil {
		return b[0]
	}
	return 0
}

// U32 reads a 32-bit integer.
func (r *ArgReader) U32() uint32 {
	if b := r.take(4, "u32"); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// U64 reads a 64-bit integer.
func (r *ArgReader) U64() uint64 {
	if b := r.take(8, "u64"); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// I64 reads a signed 64-bit integer.
func (r *ArgReader) I64() int64 { return int64(r.U64()) }

// F64 reads a float64.
func (r *ArgReader) F64() float64 { return math.Float64frombits(r.U64()) }

// Bool reads a boolean; bytes other than 0 and 1 are an error.
func (r *ArgReader) Bool() bool {
	switch v := r.U8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bool byte %d", v)
		return false
	}
}

// Blob reads a length-prefixed byte string of at most max bytes. The
// result aliases the reader's input.
func (r *ArgReader) Blob(max int) []byte {
	n := r.U32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.fail("length %d over limit %d", n, max)
		return nil
	}
	return r.take(int(n), "bytes")
}

// String reads a length-prefixed string of at most max bytes.
func (r *ArgReader) String(max int) string { return string(r.Blob(max)) }
