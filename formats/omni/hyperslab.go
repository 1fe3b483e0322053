package omni

import "fmt"

// Hyperslab selects, along each axis, Count elements starting at Start,
// Stride apart (HDF5's and NetCDF's start/count/stride). A nil Stride
// means 1 everywhere.
type Hyperslab struct {
	Start  []int64 `json:"start"`
	Count  []int64 `json:"count"`
	Stride []int64 `json:"stride,omitempty"`
}

// All selects the whole of shape.
func All(shape []int64) Hyperslab {
	h := Hyperslab{Start: make([]int64, len(shape)), Count: append([]int64(nil), shape...)}
	return h
}

// StrideAt is the stride of axis i (1 when unset).
func (h Hyperslab) StrideAt(i int) int64 {
	if h.Stride == nil {
		return 1
	}
	return h.Stride[i]
}

// Strides returns the stride of every axis, ones where unset.
func (h Hyperslab) Strides() []int64 {
	out := make([]int64, len(h.Count))
	for i := range out {
		out[i] = h.StrideAt(i)
	}
	return out
}

// Len is the number of selected elements.
func (h Hyperslab) Len() int64 { return NumElements(h.Count) }

// IsAll reports whether h selects the whole of shape.
func (h Hyperslab) IsAll(shape []int64) bool {
	for i := range shape {
		if h.Start[i] != 0 || h.Count[i] != shape[i] || h.StrideAt(i) != 1 {
			return false
		}
	}
	return true
}

// Check verifies h against shape: same rank, counts ≥ 0, strides ≥ 1, and
// every selected index inside the shape.
func (h Hyperslab) Check(shape []int64) error {
	if len(h.Start) != len(shape) || len(h.Count) != len(shape) || (h.Stride != nil && len(h.Stride) != len(shape)) {
		return fmt.Errorf("hyperslab of rank %d/%d/%d on shape %v: %w", len(h.Start), len(h.Count), len(h.Stride), shape, ErrInvalid)
	}
	for i, n := range shape {
		s, c, st := h.Start[i], h.Count[i], h.StrideAt(i)
		if c < 0 || st < 1 || s < 0 || s > n {
			return fmt.Errorf("hyperslab axis %d: start %d count %d stride %d on size %d: %w", i, s, c, st, n, ErrInvalid)
		}
		if c > 0 && (c-1 > (n-1-s)/st) {
			return fmt.Errorf("hyperslab axis %d: start %d count %d stride %d past size %d: %w", i, s, c, st, n, ErrInvalid)
		}
	}
	return nil
}

// Bytes is the size of the selection for element type t (fixed-size types).
func (h Hyperslab) Bytes(t DType) int64 { return h.Len() * int64(t.Size()) }
