package numpy

import (
	"archive/zip"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/iowarp/iowarp/formats/omni"
)

// array is one NumPy array: its header and where its bytes are.
type array struct {
	v       *omni.Variable
	e       elem
	src     io.ReaderAt // the file, or the npz member
	base    int64       // offset of the data in src
	strides []int64     // per axis of v.Shape, in file elements (e.fsz bytes)
}

// newArray checks h against the bytes src holds (size) and lays the
// array out.
func newArray(h Header, src io.ReaderAt, size int64) (*array, error) {
	e, err := parseDescr(h.Descr)
	if err != nil {
		return nil, err
	}
	n := omni.NumElements(h.Shape)
	if n > 0 && int64(e.itemsize) > (size-h.Offset)/n {
		return nil, fmt.Errorf("npy: %v elements of %d bytes need more than the %d bytes after the header: %w",
			h.Shape, e.itemsize, max(0, size-h.Offset), omni.ErrCorrupt)
	}
	a := &array{e: e, src: src, base: h.Offset}
	shape := slices.Clone(h.Shape)
	parts := int64(1)
	if e.complex {
		shape, parts = append(shape, 2), 2
	}
	a.strides = make([]int64, len(shape))
	r := len(h.Shape)
	if e.complex {
		a.strides[r] = 1
	}
	if h.Fortran {
		s := parts
		for i := 0; i < r; i++ {
			a.strides[i], s = s, s*h.Shape[i]
		}
	} else {
		s := parts
		for i := r - 1; i >= 0; i-- {
			a.strides[i], s = s, s*h.Shape[i]
		}
	}
	a.v = &omni.Variable{DType: e.dt, Shape: shape, Attrs: slices.Clone(e.attrs)}
	if e.complex {
		a.v.Attrs = append(a.v.Attrs, omni.StringAttr("comment", "complex values: the last axis holds the real and imaginary parts"))
	}
	if h.Fortran {
		a.v.Attrs = append(a.v.Attrs, omni.IntAttr("numpy_fortran_order", 1))
	}
	return a, nil
}

// blockSize is what one read of the file fetches at least.
const blockSize = 1 << 20

// blockReader serves ranges of src from one cached block; reads in
// increasing order of offset touch each block once.
type blockReader struct {
	src io.ReaderAt
	buf []byte
	off int64
	n   int
}

func (b *blockReader) get(off int64, n int) ([]byte, error) {
	if off >= b.off && off+int64(n) <= b.off+int64(b.n) {
		return b.buf[off-b.off : off-b.off+int64(n)], nil
	}
	want := max(n, blockSize)
	if cap(b.buf) < want {
		b.buf = make([]byte, want)
	}
	b.buf = b.buf[:want]
	m, err := b.src.ReadAt(b.buf, off)
	if m < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		b.n = 0
		return nil, fmt.Errorf("npy: read %d bytes at %d: %w: %w", n, off, omni.ErrCorrupt, err)
	}
	b.off, b.n = off, m
	return b.buf[:n], nil
}

// read reads the selection h (checked against a.v.Shape) into dst, C
// order, OMNI form: the axes are walked in the file's order, so the file
// is read front to back (as the inflater of a compressed npz member
// needs), and the axis of the smallest stride runs innermost.
func (a *array) read(h omni.Hyperslab, dst []byte) error {
	rank := len(a.v.Shape)
	if h.Len() == 0 {
		return nil
	}
	osz, fsz := int64(a.e.osz()), int64(a.e.fsz)
	dstr := make([]int64, rank) // output strides, in elements
	s := int64(1)
	for i := rank - 1; i >= 0; i-- {
		dstr[i], s = s, s*h.Count[i]
	}
	br := &blockReader{src: a.src}
	if rank == 0 {
		src, err := br.get(a.base, int(fsz))
		if err != nil {
			return err
		}
		a.e.convert(dst, int(osz), src, int(fsz), 1)
		return nil
	}
	perm := make([]int, rank)
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(x, y int) int { return cmpDesc(a.strides[x], a.strides[y]) })
	in := perm[rank-1]
	outer := perm[:rank-1]
	step := h.StrideAt(in) * a.strides[in]  // file elements between two inner elements
	per := max(1, (blockSize/fsz-1)/step+1) // inner elements per piece
	k := make([]int64, rank)
	for {
		fo, do := int64(0), int64(0)
		for i := range rank {
			fo += (h.Start[i] + k[i]*h.StrideAt(i)) * a.strides[i]
			do += k[i] * dstr[i]
		}
		for j := int64(0); j < h.Count[in]; j += per {
			m := min(per, h.Count[in]-j)
			span := ((m-1)*step + 1) * fsz
			src, err := br.get(a.base+(fo+j*step)*fsz, int(span))
			if err != nil {
				return err
			}
			a.e.convert(dst[(do+j*dstr[in])*osz:], int(dstr[in]*osz), src, int(step*fsz), int(m))
		}
		// next combination of the outer axes, the last of perm fastest
		i := len(outer) - 1
		for ; i >= 0; i-- {
			ax := outer[i]
			if k[ax]++; k[ax] < h.Count[ax] {
				break
			}
			k[ax] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

func cmpDesc(x, y int64) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	}
	return 0
}

// inflater is a ReaderAt over a compressed npz member: it decompresses
// from the start and keeps its place, so reads in increasing order cost
// one pass; a read before its place starts again. Safe for concurrent use.
type inflater struct {
	f *zip.File

	mu  sync.Mutex
	rc  io.ReadCloser
	pos int64
}

func (z *inflater) ReadAt(p []byte, off int64) (int, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.rc == nil || off < z.pos {
		if z.rc != nil {
			z.rc.Close()
		}
		rc, err := z.f.Open()
		if err != nil {
			z.rc = nil
			return 0, err
		}
		z.rc, z.pos = rc, 0
	}
	if off > z.pos {
		n, err := io.CopyN(io.Discard, z.rc, off-z.pos)
		z.pos += n
		if err != nil {
			return 0, err
		}
	}
	n, err := io.ReadFull(z.rc, p)
	z.pos += int64(n)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

func (z *inflater) Close() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.rc != nil {
		z.rc.Close()
		z.rc = nil
	}
	return nil
}
