package omni

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// rangeModel: time(6) with its coordinate, temp(time, y=2, x=3) float32
// (records of 24 bytes), mask(y, x) and a string label(time).
func rangeModel() *Dataset {
	ds := NewDataset("/x.nc", "netcdf4")
	ds.Root.AddDim(&Dimension{Name: "time", Size: 6, Unlimited: true})
	ds.Root.AddDim(&Dimension{Name: "y", Size: 2})
	ds.Root.AddDim(&Dimension{Name: "x", Size: 3})
	ds.Root.AddVariable(&Variable{Name: "time", DType: Float64, Shape: []int64{6}, Dims: []string{"time"}})
	ds.Root.AddVariable(&Variable{Name: "temp", DType: Float32, Shape: []int64{6, 2, 3}, Dims: []string{"time", "y", "x"}})
	ds.Root.AddVariable(&Variable{Name: "mask", DType: Int8, Shape: []int64{2, 3}, Dims: []string{"y", "x"}})
	ds.Root.AddVariable(&Variable{Name: "label", DType: String, Shape: []int64{6}, Dims: []string{"time"}})
	return ds
}

// storedBytes is what a reader returns for the stored variable v: element
// i of a numeric variable is the little-endian i (in its width), of a
// string "s<i>".
func storedBytes(v *Variable) []byte {
	if v.DType == String {
		ss := make([]string, v.Len())
		for i := range ss {
			ss[i] = "s" + string(rune('0'+i))
		}
		return EncodeStrings(ss)
	}
	es := v.DType.Size()
	b := make([]byte, v.Len()*int64(es))
	for i := range v.Len() {
		var e [8]byte
		binary.LittleEndian.PutUint64(e[:], uint64(i))
		copy(b[i*int64(es):], e[:es])
	}
	return b
}

func TestApplyRange(t *testing.T) {
	// The records (of 24 bytes) whose first byte lies in the range.
	for _, c := range []struct {
		off, size    int64
		start, count int64
	}{
		{0, 24, 0, 1}, {1, 24, 1, 1}, {24, 48, 1, 2}, {23, 2, 1, 1}, {48, 0, 2, 4}, {0, 1 << 62, 0, 6}, {100, 1 << 62, 5, 1},
	} {
		ds := rangeModel()
		cut, err := ds.ApplyRange(Range{Off: c.off, Size: c.size})
		if err != nil {
			t.Fatalf("range %d+%d: %v", c.off, c.size, err)
		}
		if cut.Var != "/temp" || cut.Dim != "time" || cut.Record != 24 || cut.Start != c.start || cut.Count != c.count {
			t.Errorf("range %d+%d: cut %+v, want records %d+%d of /temp", c.off, c.size, cut, c.start, c.count)
		}
		temp, _ := ds.Var("/temp")
		tm, _ := ds.Var("/time")
		mask, _ := ds.Var("/mask")
		d, _ := ds.Dim("/", "time")
		if !slices.Equal(temp.Shape, []int64{c.count, 2, 3}) || !slices.Equal(tm.Shape, []int64{c.count}) ||
			!slices.Equal(mask.Shape, []int64{2, 3}) || d.Size != c.count {
			t.Errorf("range %d+%d: shapes temp %v time %v mask %v, dim %d", c.off, c.size, temp.Shape, tm.Shape, mask.Shape, d.Size)
		}
		// Reads map to the stored records.
		sv, h := cut.Stored(temp, Hyperslab{Start: []int64{0, 1, 0}, Count: []int64{1, 1, 3}})
		if !slices.Equal(sv.Shape, []int64{6, 2, 3}) || !slices.Equal(h.Start, []int64{c.start, 1, 0}) {
			t.Errorf("range %d+%d: stored %v %+v", c.off, c.size, sv.Shape, h)
		}
		if sv, _ := cut.Stored(mask, All(mask.Shape)); sv != mask {
			t.Errorf("mask is not cut, but maps to %+v", sv)
		}
		readAll := func(v *Variable) ([]byte, error) { return storedBytes(v), nil }
		b, err := cut.ReadAll(temp, readAll)
		if err != nil || len(b) != int(c.count)*24 || binary.LittleEndian.Uint32(b) != uint32(c.start*6) ||
			binary.LittleEndian.Uint32(b[len(b)-4:]) != uint32((c.start+c.count)*6-1) {
			t.Errorf("range %d+%d: ReadAll temp %v %x", c.off, c.size, err, b)
		}
		b, err = cut.ReadAll(tm, readAll)
		if err != nil || len(b) != int(c.count)*8 || binary.LittleEndian.Uint64(b) != uint64(c.start) {
			t.Errorf("range %d+%d: ReadAll time %v %x", c.off, c.size, err, b)
		}
		label, _ := ds.Var("/label")
		b, err = cut.ReadAll(label, readAll)
		ss, _ := DecodeStrings(b)
		if err != nil || len(ss) != int(c.count) || ss[0] != "s"+string(rune('0'+c.start)) {
			t.Errorf("range %d+%d: ReadAll label %v %q", c.off, c.size, err, ss)
		}
	}
	// Ranges that follow each other share no record and miss none.
	for _, s := range []int64{1, 7, 24, 25, 50, 200} {
		var got []int64
		for off := int64(0); off < 6*24; off += s {
			cut, err := rangeModel().ApplyRange(Range{Off: off, Size: s})
			if err != nil {
				continue // no record starts in this one
			}
			for i := range cut.Count {
				got = append(got, cut.Start+i)
			}
		}
		if !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5}) {
			t.Errorf("ranges of %d bytes keep records %v", s, got)
		}
	}
	// A filter chooses the reference among the variables it keeps.
	cut, err := rangeModel().ApplyRange(Range{Off: 8, Size: 16, Filter: "/time"})
	if err != nil || cut.Var != "/time" || cut.Start != 1 || cut.Count != 2 {
		t.Errorf("range on /time: %+v %v", cut, err)
	}
	if cut, err := rangeModel().ApplyRange(Range{}); cut != nil || err != nil {
		t.Errorf("zero range: %+v %v", cut, err)
	}
	for _, r := range []Range{{Off: 6 * 24}, {Off: 1, Size: 23}, {Off: -1}, {Off: 0, Size: 8, Filter: "/label"}, {Off: 0, Size: 8, Filter: "/nosuch"}} {
		if _, err := rangeModel().ApplyRange(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("range %+v: %v, want ErrInvalid", r, err)
		}
	}
}

// FuzzApplyRange: any range either fails with ErrInvalid or keeps, of the
// 6 records of 24 bytes, exactly those whose first byte lies in it, with
// every variable on time cut alike and reads mapped inside the stored shape.
func FuzzApplyRange(f *testing.F) {
	for _, c := range [][2]int64{{0, 0}, {0, 24}, {23, 2}, {-1, 5}, {1 << 62, 1 << 62}, {144, 0}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, off, size int64) {
		ds := rangeModel()
		cut, err := ds.ApplyRange(Range{Off: off, Size: size})
		var want []int64
		for i := int64(0); i < 6; i++ {
			if b := i * 24; off >= 0 && size >= 0 && b >= off && (size == 0 || b-off < size) {
				want = append(want, i)
			}
		}
		if off == 0 && size == 0 {
			if cut != nil || err != nil {
				t.Fatalf("zero range: %+v %v", cut, err)
			}
			return
		}
		if len(want) == 0 {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("range %d+%d keeps no record: %+v %v", off, size, cut, err)
			}
			return
		}
		if err != nil || cut.Start != want[0] || cut.Count != int64(len(want)) {
			t.Fatalf("range %d+%d: %+v %v, want records %v", off, size, cut, err, want)
		}
		for _, p := range []string{"/time", "/temp", "/label"} {
			v, _ := ds.Var(p)
			if v.Shape[0] != cut.Count {
				t.Fatalf("%s shape %v after a cut of %d", p, v.Shape, cut.Count)
			}
			sv, h := cut.Stored(v, All(v.Shape))
			if err := h.Check(sv.Shape); err != nil {
				t.Fatalf("%s: stored selection %+v: %v", p, h, err)
			}
		}
	})
}
