package omni

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Datetime64 is the type of decoded CF times: int64 nanoseconds since
// 1970-01-01T00:00:00 (proleptic Gregorian, UTC), NumPy's datetime64[ns],
// NaT being the smallest int64. Only decoding makes it (Decoding.Out): it
// is no type a schema may declare.
const Datetime64 DType = "datetime64[ns]"

// NaT is the Datetime64 of a masked time.
const NaT = math.MinInt64

// CF attributes of packed and masked data.
const (
	AttrFillValue    = "_FillValue"
	AttrMissingValue = "missing_value"
	AttrScaleFactor  = "scale_factor"
	AttrAddOffset    = "add_offset"
	AttrUnsigned     = "_Unsigned"
)

// Decoding is how the stored values of a variable become the values
// xarray's open_dataset shows by default (mask_and_scale=True,
// decode_times=True), applied in its order:
//
//  1. _Unsigned = "true" (or "false") reads signed (unsigned) integers as
//     their unsigned (signed) twin;
//  2. values equal to _FillValue or any missing_value become NaN; an
//     integer variable with such values becomes float32 (1 or 2 bytes)
//     or float64 (xarray's maybe_promote): integers have no NaN, so a
//     masked integer is shown as NaN in a float, as xarray shows it;
//  3. scale_factor and add_offset: x·scale + offset, in float32 for
//     floats of up to 4 bytes and for integers of up to 2 bytes without
//     add_offset, else in float64 (xarray's _choose_float_dtype);
//  4. CF time ("<unit> since <date>" units) in the standard, gregorian or
//     proleptic_gregorian calendar: datetime64[ns] (Datetime64), the
//     product truncated toward zero as NumPy's astype(int64) does. Other
//     calendars, for which xarray makes cftime objects, keep their numbers
//     (the fallback: their units and calendar are in the attributes); a
//     time outside datetime64[ns]'s range (years 1678 to 2262) fails the
//     read, naming data.raw.
//
// The zero Decoding (Identity) changes nothing.
type Decoding struct {
	Raw DType // the stored type
	In  DType // Raw as read (_Unsigned)
	Out DType // the decoded type

	fills []float64 // masked values (in In)
	// exact are the masked values of 64-bit integer data, compared as
	// integers (float64 cannot tell 2^63-2 from its neighbours).
	exact         []uint64
	scale, offset float64
	hasScale      bool
	hasOffset     bool
	scaleType     DType // the type the scaling computes in (Float32, Float64)
	attrBits      int   // 32 when scale_factor/add_offset are float32 (for String)

	time   bool
	timeIn DType // the type the time values are in before decoding
	unitNs int64 // nanoseconds per time unit
	epoch  int64 // the epoch in ns since 1970
}

// Identity reports a decoding that changes nothing.
func (d Decoding) Identity() bool {
	return d.Out == "" || d.Out == d.Raw && !d.masks() && !d.hasScale && !d.hasOffset && !d.time
}

func (d Decoding) masks() bool { return len(d.fills) > 0 }

// Masks reports whether some values may be masked (NaN or NaT).
func (d Decoding) Masks() bool { return d.masks() }

// Time reports whether the values decode to Datetime64.
func (d Decoding) Time() bool { return d.time }

// DecodingOf returns v's decoding (Identity for strings, bool, and
// variables without CF packing, masking or time units).
func DecodingOf(v *Variable) Decoding {
	t := v.DType
	if t.IsString() || t == Bool || t.Size() == 0 {
		return Decoding{}
	}
	d := Decoding{Raw: t, In: t}
	switch strings.ToLower(AttrString(v.Attrs, AttrUnsigned)) {
	case "true":
		d.In = twin(t, true)
	case "false":
		d.In = twin(t, false)
	}
	cur := d.In
	for _, name := range []string{AttrMissingValue, AttrFillValue} {
		a, ok := Attr(v.Attrs, name)
		if !ok || a.Type.IsString() {
			continue
		}
		for _, f := range a.Float64s() {
			if math.IsNaN(f) {
				continue
			}
			if d.In == Float32 {
				// NumPy (1.x, the reference here) compares float32 data
				// with a float64 fill value in float32.
				f = float64(float32(f))
			}
			d.fills = append(d.fills, f)
		}
		if d.In.Size() == 8 && !d.In.IsFloat() {
			switch vals := a.Value.(type) {
			case []int64:
				for _, x := range vals {
					d.exact = append(d.exact, uint64(x))
				}
			case []uint64:
				d.exact = append(d.exact, vals...)
			}
		}
	}
	if d.masks() && !cur.IsFloat() {
		cur = Float64
		if d.In.Size() <= 2 {
			cur = Float32
		}
	}
	d.attrBits = 64
	if s, ok := numAttr(v.Attrs, AttrScaleFactor); ok {
		d.scale, d.hasScale = s, true
		if a, _ := Attr(v.Attrs, AttrScaleFactor); a.Type == Float32 {
			d.attrBits = 32
		}
	}
	if o, ok := numAttr(v.Attrs, AttrAddOffset); ok {
		d.offset, d.hasOffset = o, true
	}
	if d.hasScale || d.hasOffset {
		cur = chooseFloat(cur, d.hasOffset)
		d.scaleType = cur
	}
	if u := v.Units(); strings.Contains(u, "since") {
		if tu, err := ParseTimeUnits(u, v.Calendar()); err == nil && standardCalendar(v.Calendar()) {
			if ns, ok := epochNs(tu.Epoch); ok {
				d.time, d.unitNs, d.epoch, d.timeIn = true, int64(math.Round(tu.Unit*1e9)), ns, cur
				cur = Datetime64
			}
		}
	}
	d.Out = cur
	if d.Identity() {
		return Decoding{}
	}
	return d
}

// twin is the unsigned (or signed) integer type of t's size; t itself
// when t is no integer of the other kind.
func twin(t DType, unsigned bool) DType {
	pairs := map[DType]DType{Int8: Uint8, Int16: Uint16, Int32: Uint32, Int64: Uint64}
	if unsigned {
		if u, ok := pairs[t]; ok {
			return u
		}
		return t
	}
	for s, u := range pairs {
		if u == t {
			return s
		}
	}
	return t
}

// chooseFloat is xarray's _choose_float_dtype.
func chooseFloat(t DType, hasOffset bool) DType {
	switch {
	case t.IsFloat() && t.Size() <= 4:
		return Float32
	case !t.IsFloat() && t.Size() <= 2 && !hasOffset:
		return Float32
	}
	return Float64
}

func numAttr(attrs []Attribute, name string) (float64, bool) {
	a, ok := Attr(attrs, name)
	if !ok || a.Type.IsString() {
		return 0, false
	}
	fs := a.Float64s()
	if len(fs) == 0 {
		return 0, false
	}
	return fs[0], true
}

func standardCalendar(c string) bool {
	switch strings.ToLower(c) {
	case "", "standard", "gregorian", "proleptic_gregorian":
		return true
	}
	return false
}

// epochNs is d in ns since 1970 (proleptic Gregorian), if it fits.
func epochNs(d Date) (int64, bool) {
	if d.Year < 1678 || d.Year > 2261 {
		return 0, false
	}
	t := time.Date(d.Year, time.Month(d.Month), d.Day, 0, 0, 0, 0, time.UTC)
	return t.UnixNano() + int64(math.Round(d.Sec*1e9)), true
}

// DecodeInPlace decodes n stored elements at the start of buf into n
// decoded elements at its start; buf holds at least n × the larger of
// the two element sizes. It fails on a time outside datetime64[ns].
func (d Decoding) DecodeInPlace(buf []byte, n int64) error {
	if d.Identity() || n == 0 {
		return nil
	}
	rs, os := int64(d.Raw.Size()), int64(d.Out.Size())
	if int64(len(buf)) < n*max(rs, os) {
		return fmt.Errorf("decode: %d bytes for %d elements: %w", len(buf), n, ErrInvalid)
	}
	if !d.time && d.In == Float32 && d.Out == Float32 && !d.hasScale && !d.hasOffset {
		maskFloat32(buf[:n*4], d.fills)
		return nil
	}
	if !d.time && (d.Out == Float32 || d.Out == Float64) {
		return d.decodeFloats(buf, n, rs, os)
	}
	if os >= rs { // backwards: an output never overwrites a later input
		for i := n - 1; i >= 0; i-- {
			if err := d.element(buf[i*rs:], buf[i*os:]); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range n {
		if err := d.element(buf[i*rs:], buf[i*os:]); err != nil {
			return err
		}
	}
	return nil
}

// maskFloat32 sets the float32 values of b equal to one of fills to NaN,
// in place: the common masked float32 variable in one pass.
func maskFloat32(b []byte, fills []float64) {
	le := binary.LittleEndian
	nan := math.Float32bits(float32(math.NaN()))
	f32 := make([]float32, len(fills))
	for i, f := range fills {
		f32[i] = float32(f)
	}
	for k := 0; k+4 <= len(b); k += 4 {
		x := math.Float32frombits(le.Uint32(b[k:]))
		for _, f := range f32 {
			if x == f {
				le.PutUint32(b[k:], nan)
				break
			}
		}
	}
}

// decodeChunk is how many elements decodeFloats converts at a time.
const decodeChunk = 1024

// decodeFloats is DecodeInPlace to a float type (no time), a chunk of
// elements at a time through a float64 buffer, one type switch per
// chunk: chunks go from the last when the output is wider (it never
// overwrites input not yet read), from the first otherwise.
func (d *Decoding) decodeFloats(buf []byte, n, rs, os int64) error {
	var tmp [decodeChunk]float64
	do := func(i0, i1 int64) {
		x := tmp[:i1-i0]
		loadFloats(d.In, buf[i0*rs:i1*rs], x)
		if d.exact != nil {
			for k := range x {
				raw := binary.LittleEndian.Uint64(buf[(i0+int64(k))*8:])
				for _, e := range d.exact {
					if raw == e {
						x[k] = math.NaN()
						break
					}
				}
			}
		} else if len(d.fills) > 0 {
			for k, v := range x {
				for _, f := range d.fills {
					if v == f {
						x[k] = math.NaN()
						break
					}
				}
			}
		}
		if d.hasScale || d.hasOffset {
			for k, v := range x {
				x[k] = d.scaled(v)
			}
		}
		storeFloats(d.Out, x, buf[i0*os:i1*os])
	}
	if os >= rs {
		for i1 := n; i1 > 0; i1 -= decodeChunk {
			do(max(0, i1-decodeChunk), i1)
		}
		return nil
	}
	for i0 := int64(0); i0 < n; i0 += decodeChunk {
		do(i0, min(n, i0+decodeChunk))
	}
	return nil
}

// loadFloats decodes len(x) elements of t from b.
func loadFloats(t DType, b []byte, x []float64) {
	le := binary.LittleEndian
	switch t {
	case Float32:
		for k := range x {
			x[k] = float64(math.Float32frombits(le.Uint32(b[4*k:])))
		}
	case Float64:
		for k := range x {
			x[k] = math.Float64frombits(le.Uint64(b[8*k:]))
		}
	case Int16:
		for k := range x {
			x[k] = float64(int16(le.Uint16(b[2*k:])))
		}
	case Uint16:
		for k := range x {
			x[k] = float64(le.Uint16(b[2*k:]))
		}
	case Int8:
		for k := range x {
			x[k] = float64(int8(b[k]))
		}
	case Uint8:
		for k := range x {
			x[k] = float64(b[k])
		}
	default:
		size := t.Size()
		for k := range x {
			x[k] = Float64At(t, b[k*size:])
		}
	}
}

// storeFloats encodes x as Float32 or Float64 into b.
func storeFloats(t DType, x []float64, b []byte) {
	le := binary.LittleEndian
	if t == Float32 {
		for k, v := range x {
			le.PutUint32(b[4*k:], math.Float32bits(float32(v)))
		}
		return
	}
	for k, v := range x {
		le.PutUint64(b[8*k:], math.Float64bits(v))
	}
}

// element decodes one element: src and dst may overlap (src is read
// whole first).
func (d Decoding) element(src, dst []byte) error {
	le := binary.LittleEndian
	var raw [8]byte
	copy(raw[:d.Raw.Size()], src)
	if d.time && !d.timeIn.IsFloat() {
		// Integers are multiplied exactly, as xarray does in int64.
		ns, ok := mulAdd(intAt(d.In, raw[:]), d.unitNs, d.epoch)
		if !ok {
			return d.outOfRange(Float64At(d.In, raw[:]))
		}
		le.PutUint64(dst, uint64(ns))
		return nil
	}
	if d.Out == d.In && !d.In.IsFloat() && !d.time {
		copy(dst, raw[:d.In.Size()]) // _Unsigned alone: the same bytes, read as In
		return nil
	}
	x := Float64At(d.In, raw[:])
	for _, f := range d.fills {
		if x == f {
			x = math.NaN()
			break
		}
	}
	if d.hasScale || d.hasOffset {
		x = d.scaled(x)
	}
	switch {
	case d.time:
		if math.IsNaN(x) {
			le.PutUint64(dst, 1<<63)
			return nil
		}
		var prod float64
		if d.timeIn == Float32 {
			prod = float64(float32(float32(x) * float32(d.unitNs)))
		} else {
			prod = x * float64(d.unitNs)
		}
		if math.Abs(prod) >= 9.2e18 {
			return d.outOfRange(x)
		}
		ns, ok := mulAdd(int64(prod), 1, d.epoch)
		if !ok {
			return d.outOfRange(x)
		}
		le.PutUint64(dst, uint64(ns))
	case d.Out == Float32:
		le.PutUint32(dst, math.Float32bits(float32(x)))
	case d.Out == Float64:
		le.PutUint64(dst, math.Float64bits(x))
	default:
		return fmt.Errorf("decode to %s: %w", d.Out, ErrNotSupported)
	}
	return nil
}

// scaled is x·scale + offset in the precision xarray computes it in.
func (d *Decoding) scaled(x float64) float64 {
	if d.scaleType == Float32 {
		y := float32(x)
		if d.hasScale {
			y = float32(y * float32(d.scale))
		}
		if d.hasOffset {
			y = float32(y + float32(d.offset))
		}
		return float64(y)
	}
	if d.hasScale {
		x = float64(x * d.scale)
	}
	if d.hasOffset {
		x = float64(x + d.offset)
	}
	return x
}

func (d Decoding) outOfRange(x float64) error {
	return fmt.Errorf("time value %g is outside datetime64[ns] (years 1678 to 2262); data.raw (query --raw) has the stored numbers: %w", x, ErrNotSupported)
}

// mulAdd is a*b + c, false on overflow (or a result of NaT).
func mulAdd(a, b, c int64) (int64, bool) {
	if a != 0 && b != 0 {
		p := a * b
		if p/b != a || (a == -1 && b == math.MinInt64) {
			return 0, false
		}
		a = p
	}
	s := a + c
	if (c > 0 && s < a) || (c < 0 && s > a) || s == NaT {
		return 0, false
	}
	return s, true
}

// intAt reads an integer element of t as int64 (uint64 above 2^63-1
// wraps; such a time is out of range anyway).
func intAt(t DType, b []byte) int64 {
	le := binary.LittleEndian
	switch t {
	case Int8:
		return int64(int8(b[0]))
	case Uint8, Bool:
		return int64(b[0])
	case Int16:
		return int64(int16(le.Uint16(b)))
	case Uint16:
		return int64(le.Uint16(b))
	case Int32:
		return int64(int32(le.Uint32(b)))
	case Uint32:
		return int64(le.Uint32(b))
	}
	return int64(le.Uint64(b))
}

// FormatTime renders a Datetime64 as ISO 8601 ("2024-01-01T06:00:00",
// with a fraction of a second when there is one), NaT as "NaT".
func FormatTime(ns int64) string {
	if ns == NaT {
		return "NaT"
	}
	t := time.Unix(0, ns).UTC()
	s := t.Format("2006-01-02T15:04:05")
	if f := t.Nanosecond(); f != 0 {
		s += strings.TrimRight("."+fmt.Sprintf("%09d", f), "0")
	}
	return s
}

// Decode decodes a whole raw selection into a new buffer.
func (d Decoding) Decode(raw []byte) ([]byte, error) {
	if d.Identity() {
		return raw, nil
	}
	rs, os := d.Raw.Size(), d.Out.Size()
	n := int64(len(raw) / rs)
	buf := make([]byte, n*int64(max(rs, os)))
	copy(buf, raw)
	if err := d.DecodeInPlace(buf, n); err != nil {
		return nil, err
	}
	return buf[:n*int64(os)], nil
}

// String describes the decoding for `describe` ("int16 → float32:
// _FillValue -32768, scale_factor 0.01").
func (d Decoding) String() string {
	if d.Identity() {
		return ""
	}
	var parts []string
	if d.In != d.Raw {
		parts = append(parts, "_Unsigned → "+string(d.In))
	}
	fillBits := 64
	if d.In == Float32 {
		fillBits = 32
	}
	for _, f := range d.fills {
		parts = append(parts, "masked "+strconv.FormatFloat(f, 'g', -1, fillBits))
	}
	if d.hasScale {
		parts = append(parts, "scale_factor "+strconv.FormatFloat(d.scale, 'g', -1, d.attrBits))
	}
	if d.hasOffset {
		parts = append(parts, "add_offset "+strconv.FormatFloat(d.offset, 'g', -1, d.attrBits))
	}
	if d.time {
		parts = append(parts, "CF time")
	}
	return fmt.Sprintf("%s → %s (%s)", d.Raw, d.Out, strings.Join(parts, ", "))
}

// CountMasked counts the NaN (float) or NaT (Datetime64) values of data,
// of type t: the masked values of a decoded selection.
func CountMasked(t DType, data []byte) int64 {
	le := binary.LittleEndian
	var n int64
	switch t {
	case Float32:
		for i := 0; i+4 <= len(data); i += 4 {
			if f := math.Float32frombits(le.Uint32(data[i:])); f != f {
				n++
			}
		}
	case Float64:
		for i := 0; i+8 <= len(data); i += 8 {
			if math.IsNaN(math.Float64frombits(le.Uint64(data[i:]))) {
				n++
			}
		}
	case Datetime64:
		for i := 0; i+8 <= len(data); i += 8 {
			if int64(le.Uint64(data[i:])) == NaT {
				n++
			}
		}
	}
	return n
}
