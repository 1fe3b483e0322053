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
