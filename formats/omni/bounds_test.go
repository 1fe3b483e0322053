package omni

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestFixStringsBound: one long string among many short ones does not
// make count × longest bytes.
func TestFixStringsBound(t *testing.T) {
	ss := make([]string, 70000)
	ss[0] = strings.Repeat("x", 4000)
	if _, _, err := FixStrings(EncodeStrings(ss)); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("FixStrings of %d strings up to 4000 bytes: %v, want ErrNotSupported", len(ss), err)
	}
	dt, b, err := FixStrings(EncodeStrings([]string{"ab", "c"}))
	if err != nil || dt != FixedString(2) || string(b) != "abc\x00" {
		t.Fatalf("small: %v %q %v", dt, b, err)
	}
}

// TestCapAttrs: large attribute values are left out with their size,
// small ones stay, and the omission survives schema.json.
func TestCapAttrs(t *testing.T) {
	ds := NewDataset("x", "test")
	ds.Root.Attrs = []Attribute{StringAttr("big", strings.Repeat("y", MaxAttrBytes+1)), StringAttr("small", "s"),
		FloatAttr("many", make([]float64, MaxAttrBytes/8+1)...)}
	CapAttrs(ds)
	a := ds.Root.Attrs
	if a[0].Omitted <= MaxAttrBytes || a[0].Len() != 0 || !strings.Contains(a[0].String(), "omitted") {
		t.Errorf("big: %+v", a[0].Omitted)
	}
	if a[1].Omitted != 0 || a[1].String() != "s" {
		t.Errorf("small: %+v", a[1])
	}
	if a[2].Omitted == 0 || a[2].Type != Float64 {
		t.Errorf("many: omitted %d type %s", a[2].Omitted, a[2].Type)
	}
	b, err := ds.Schema()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSchema(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Root.Attrs[0]; got.Omitted != a[0].Omitted || got.Len() != 0 {
		t.Errorf("after schema.json: %+v", got)
	}
}

// TestVariableBytesBound: a schema is refused when a variable's bytes
// (not only its elements) pass MaxVariableBytes: a float64 of 2^60+1
// elements would be a negative size, one of 2^62 elements a size of 0.
func TestVariableBytesBound(t *testing.T) {
	cases := []struct {
		dtype DType
		shape []int64
		ok    bool
	}{
		{Float64, []int64{1<<60 + 1}, false},
		{Float64, []int64{1 << 62}, false},
		{Float64, []int64{1 << 31, 1 << 31}, false},
		{Float64, []int64{1 << 59}, true},
		{Int8, []int64{1 << 62}, true},
		{FixedString(16), []int64{1 << 59}, false},
		{Float32, []int64{0, 1 << 62}, true},
	}
	for _, tc := range cases {
		ds := NewDataset("x", "test")
		dims := make([]string, len(tc.shape))
		for i := range dims {
			dims[i] = string(rune('a' + i))
		}
		ds.Root.Variables = []*Variable{{Name: "v", Path: "/v", DType: tc.dtype, Shape: tc.shape, Dims: dims}}
		err := ds.Validate()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s %v: Validate = %v, want ok=%v", tc.dtype, tc.shape, err, tc.ok)
		}
		if b, _ := json.Marshal(ds); err == nil {
			if _, derr := DecodeSchema(b); derr != nil {
				t.Errorf("%s %v: valid but DecodeSchema: %v", tc.dtype, tc.shape, derr)
			}
		}
	}
}
