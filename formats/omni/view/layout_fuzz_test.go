package view

import (
	"testing"

	"github.com/iowarp/iowarp/formats/omni"
)

// FuzzPlanLayout: for any shape, chunking, selection and block target,
// the blocks of a plan tile [0, size) exactly, in order; each block is a
// valid selection of the variable holding exactly its bytes; blockLen
// and blockAt agree with block; a block fits in its pages.
func FuzzPlanLayout(f *testing.F) {
	f.Add([]byte{3, 10, 20, 30, 5, 5, 5, 0, 0, 0, 10, 20, 30, 1, 1, 1}, int64(4096), uint8(3))
	f.Add([]byte{2, 200, 100, 7, 0, 3, 1, 150, 50, 2, 3}, int64(1000), uint8(1))
	f.Add([]byte{0}, int64(1), uint8(0))
	f.Add([]byte{1, 255, 0, 0, 255, 1}, int64(1<<20), uint8(4))
	f.Fuzz(func(t *testing.T, b []byte, target int64, dt uint8) {
		p, ok := fuzzPlan(b, target, dt)
		if !ok {
			return
		}
		p.layout(max(target%(64<<20), 1))
		if p.size == 0 {
			if p.nblocks != 0 {
				t.Fatalf("empty selection with %d blocks", p.nblocks)
			}
			return
		}
		if p.nblocks <= 0 || p.nblocks > 1<<16 {
			if p.nblocks <= 0 {
				t.Fatalf("size %d in %d blocks", p.size, p.nblocks)
			}
			return // valid, too many to walk here
		}
		es := int64(p.dtype.Size())
		var next int64
		for j := range p.nblocks {
			slab, off, n := p.block(j)
			if off != next || n <= 0 {
				t.Fatalf("block %d at %d+%d, want it at %d (shape %v sel %+v)", j, off, n, next, p.v.Shape, p.h)
			}
			if got := p.blockLen(j); got != n {
				t.Fatalf("blockLen(%d) = %d, block says %d", j, got, n)
			}
			if err := slab.Check(p.v.Shape); err != nil {
				t.Fatalf("block %d: %+v: %v", j, slab, err)
			}
			if slab.Len()*es != n {
				t.Fatalf("block %d: %d elements for %d bytes", j, slab.Len(), n)
			}
			if n > p.ppb*PageSize {
				t.Fatalf("block %d: %d bytes in %d pages", j, n, p.ppb)
			}
			for _, in := range []int64{0, n / 2, n - 1} {
				if bj, bin := p.blockAt(off + in); bj != j || bin != in {
					t.Fatalf("blockAt(%d) = %d,%d, want %d,%d", off+in, bj, bin, j, in)
				}
			}
			next = off + n
		}
		if next != p.size {
			t.Fatalf("blocks end at %d, size %d", next, p.size)
		}
	})
}

// fuzzPlan builds a plan from fuzz bytes: rank, shape, chunks, start,
// count, stride (each a byte per axis, small so that the walk stays
// cheap).
func fuzzPlan(b []byte, target int64, dt uint8) (*Plan, bool) {
	if len(b) == 0 || target <= 0 {
		return nil, false
	}
	rank := int(b[0] % 5)
	b = b[1:]
	if len(b) < 5*rank {
		return nil, false
	}
	take := func() int64 { v := int64(b[0]); b = b[1:]; return v }
	shape, chunks := make([]int64, rank), make([]int64, rank)
	h := omni.Hyperslab{Start: make([]int64, rank), Count: make([]int64, rank), Stride: make([]int64, rank)}
	for i := range rank {
		shape[i] = take()
	}
	for i := range rank {
		chunks[i] = take()%max(shape[i], 1) + 1
	}
	for i := range rank {
		h.Start[i] = take() % max(shape[i], 1)
	}
	for i := range rank {
		h.Stride[i] = take()%4 + 1
	}
	for i := range rank {
		room := (shape[i] - h.Start[i] + h.Stride[i] - 1) / h.Stride[i]
		h.Count[i] = take() % (max(room, 0) + 1)
	}
	types := []omni.DType{omni.Int8, omni.Int16, omni.Float32, omni.Float64, omni.FixedString(3)}
	v := &omni.Variable{Path: "/v", DType: types[int(dt)%len(types)], Shape: shape, Chunks: chunks}
	if err := h.Check(shape); err != nil {
		return nil, false
	}
	return &Plan{v: v, h: h, dtype: v.DType, shape: h.Count}, true
}
