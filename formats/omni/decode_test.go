package omni

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestDecodingTypes: the decoded dtype follows xarray's rules
// (maybe_promote for masked integers, _choose_float_dtype for packed
// values, datetime64[ns] for standard-calendar CF times).
func TestDecodingTypes(t *testing.T) {
	f32 := func(name string, x float64) Attribute {
		return Attribute{Name: name, Type: Float32, Value: []float64{x}}
	}
	i := func(name string, x int64) Attribute { return IntAttr(name, x) }
	cases := []struct {
		name  string
		dtype DType
		attrs []Attribute
		want  DType // "" = identity
	}{
		{"plain", Int16, nil, ""},
		{"nan fill", Float32, []Attribute{f32("_FillValue", math.NaN())}, ""},
		{"masked int16", Int16, []Attribute{i("_FillValue", -1)}, Float32},
		{"masked int32", Int32, []Attribute{i("missing_value", -1)}, Float64},
		{"masked float64", Float64, []Attribute{FloatAttr("_FillValue", -999)}, Float64},
		{"scaled int16", Int16, []Attribute{f32("scale_factor", 0.5)}, Float32},
		{"offset int16", Int16, []Attribute{f32("scale_factor", 0.5), f32("add_offset", 1)}, Float64},
		{"masked offset int16", Int16, []Attribute{i("_FillValue", 0), f32("add_offset", 1)}, Float32},
		{"scaled int32", Int32, []Attribute{f32("scale_factor", 0.5)}, Float64},
		{"unsigned", Int8, []Attribute{StringAttr("_Unsigned", "true")}, Uint8},
		{"time", Int32, []Attribute{StringAttr("units", "days since 2000-01-01")}, Datetime64},
		{"noleap", Int32, []Attribute{StringAttr("units", "days since 2000-01-01"), StringAttr("calendar", "noleap")}, ""},
		{"months", Int32, []Attribute{StringAttr("units", "months since 2000-01-01")}, ""},
		{"strings", String, []Attribute{i("_FillValue", 1)}, ""},
	}
	for _, c := range cases {
		d := DecodingOf(&Variable{Name: "v", DType: c.dtype, Attrs: c.attrs})
		got := d.Out
		if d.Identity() {
			got = ""
		}
		if got != c.want {
			t.Errorf("%s: decoded %q, want %q", c.name, got, c.want)
		}
	}
}

// TestDecodeInPlace: a growing decoding (int16 → float32) in one buffer
// gives each element's value; times out of datetime64[ns] fail.
func TestDecodeInPlace(t *testing.T) {
	v := &Variable{DType: Int16, Attrs: []Attribute{IntAttr("_FillValue", -1), FloatAttr("scale_factor", 2)}}
	d := DecodingOf(v)
	raw := []int16{3, -1, 7, 0, -5}
	buf := make([]byte, 4*len(raw))
	for k, x := range raw {
		binary.LittleEndian.PutUint16(buf[2*k:], uint16(x))
	}
	if err := d.DecodeInPlace(buf, int64(len(raw))); err != nil {
		t.Fatal(err)
	}
	for k, x := range raw {
		got := math.Float32frombits(binary.LittleEndian.Uint32(buf[4*k:]))
		if x == -1 && !math.IsNaN(float64(got)) || x != -1 && got != float32(x)*2 {
			t.Errorf("element %d: %v from %d", k, got, x)
		}
	}
	if n := CountMasked(Float32, buf); n != 1 {
		t.Errorf("%d masked, want 1", n)
	}
	tv := &Variable{DType: Int64, Attrs: []Attribute{StringAttr("units", "days since 2000-01-01")}}
	td := DecodingOf(tv)
	b := binary.LittleEndian.AppendUint64(nil, uint64(1<<40))
	if err := td.DecodeInPlace(b, 1); err == nil {
		t.Errorf("2^40 days decoded to %d, want an error", int64(binary.LittleEndian.Uint64(b)))
	}
	b = binary.LittleEndian.AppendUint64(nil, 366)
	if err := td.DecodeInPlace(b, 1); err != nil || FormatTime(int64(binary.LittleEndian.Uint64(b))) != "2001-01-01T00:00:00" {
		t.Errorf("366 days: %v %s", err, FormatTime(int64(binary.LittleEndian.Uint64(b))))
	}
}

// BenchmarkDecode: decoding a block of 1 Mi float32 with a _FillValue,
// and of int16 packed with scale_factor/add_offset, against copying the
// same bytes (the baseline of the same run): the cost decoding adds to a
// view read.
func BenchmarkDecode(b *testing.B) {
	const n = 1 << 20
	cases := []struct {
		name string
		v    *Variable
	}{
		{"float32-fill", &Variable{DType: Float32, Attrs: []Attribute{{Name: "_FillValue", Type: Float32, Value: []float64{-999}}}}},
		{"int16-packed", &Variable{DType: Int16, Attrs: []Attribute{FloatAttr("scale_factor", 0.01), FloatAttr("add_offset", 273.15), IntAttr("_FillValue", -32768)}}},
	}
	for _, c := range cases {
		d := DecodingOf(c.v)
		src := make([]byte, n*c.v.DType.Size())
		buf := make([]byte, n*8)
		b.Run(c.name+"/copy", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for range b.N {
				copy(buf, src)
			}
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for range b.N {
				copy(buf, src)
				if err := d.DecodeInPlace(buf, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzDecode: any attributes a file may hold (fill values, scale, offset,
// units, calendar, _Unsigned) and any stored bytes decode without a panic,
// in place, to exactly n elements of the decoded type; only a time out of
// datetime64[ns] fails.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(3), -1.0, 0.5, 1.0, "days since 2000-01-01", "", []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(9), math.NaN(), 0.0, 0.0, "hours since 1990-01-01 06:00", "noleap", []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, kind uint8, fill, scale, offset float64, units, cal string, data []byte) {
		types := []DType{Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Float32, Float64}
		v := &Variable{DType: types[int(kind)%len(types)]}
		if kind&16 != 0 {
			v.Attrs = append(v.Attrs, FloatAttr("_FillValue", fill))
		}
		if kind&32 != 0 {
			v.Attrs = append(v.Attrs, FloatAttr("scale_factor", scale), FloatAttr("add_offset", offset))
		}
		if kind&64 != 0 {
			v.Attrs = append(v.Attrs, StringAttr("units", units), StringAttr("calendar", cal))
		}
		if kind&128 != 0 {
			v.Attrs = append(v.Attrs, StringAttr("_Unsigned", "true"))
		}
		d := DecodingOf(v)
		rs := v.DType.Size()
		data = data[:len(data)/rs*rs]
		out, err := d.Decode(data)
		if err != nil {
			if !d.Time() {
				t.Fatalf("%v without a time decoding", err)
			}
			return
		}
		n := len(data) / rs
		if d.Identity() {
			if len(out) != len(data) {
				t.Fatalf("identity: %d bytes for %d", len(out), len(data))
			}
			return
		}
		if len(out) != n*d.Out.Size() {
			t.Fatalf("%d bytes for %d elements of %s", len(out), n, d.Out)
		}
	})
}

// TestCalendarFormat: dates in the calendars datetime64 cannot hold, as
// cftime writes them.
func TestCalendarFormat(t *testing.T) {
	cases := []struct {
		units, cal string
		x          float64
		want       string
	}{
		{"days since 2001-01-01", "noleap", 59, "2001-03-01T00:00:00"},
		{"days since 2001-01-01", "noleap", 365, "2002-01-01T00:00:00"},
		{"days since 2000-01-01", "360_day", 59.5, "2000-02-30T12:00:00"},
		{"days since 2000-01-01", "all_leap", 59, "2000-02-29T00:00:00"},
		{"hours since 2000-01-01", "noleap", -1, "1999-12-31T23:00:00"},
		{"days since 1970-01-01", "standard", 1, "1970-01-02T00:00:00"},
	}
	for _, c := range cases {
		u, err := ParseTimeUnits(c.units, c.cal)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.Format(c.x); got != c.want {
			t.Errorf("%s %s %g: %s, want %s", c.units, c.cal, c.x, got, c.want)
		}
	}
}

// TestMaskFloat32: a float64 fill value of a float32 variable masks
// the float32 values nearest it, as xarray over NumPy 1.x does (the
// comparison casts the fill to float32).
func TestMaskFloat32(t *testing.T) {
	buf := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1e20))
	buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(-999))
	buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(5))
	d := DecodingOf(&Variable{DType: Float32, Attrs: []Attribute{FloatAttr("_FillValue", 1e20), FloatAttr("missing_value", -999)}})
	if err := d.DecodeInPlace(buf, 3); err != nil {
		t.Fatal(err)
	}
	if n := CountMasked(Float32, buf); n != 2 || math.Float32frombits(binary.LittleEndian.Uint32(buf[8:])) != 5 {
		t.Errorf("%d masked of 1e20, -999, 5; want the first two", n)
	}
}

// TestMaskInt64Exact: int64 data is masked by exact comparison, as NumPy
// compares int64 arrays (NetCDF's default int64 fill is 2^63-2 from the
// bottom, where float64 cannot tell neighbours apart).
func TestMaskInt64Exact(t *testing.T) {
	var fill int64 = -9223372036854775806
	d := DecodingOf(&Variable{DType: Int64, Attrs: []Attribute{IntAttr("_FillValue", fill)}})
	buf := make([]byte, 0, 16)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(fill))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(fill+1))
	if err := d.DecodeInPlace(buf, 2); err != nil {
		t.Fatal(err)
	}
	a, b := math.Float64frombits(binary.LittleEndian.Uint64(buf)), math.Float64frombits(binary.LittleEndian.Uint64(buf[8:]))
	if !math.IsNaN(a) || math.IsNaN(b) {
		t.Errorf("decoded %v, %v: want the fill masked, its neighbour kept", a, b)
	}
}
