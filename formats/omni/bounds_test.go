package omni

import (
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
