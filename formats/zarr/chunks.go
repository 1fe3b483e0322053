package zarr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// chunkLayout says where the chunks of an array are and how they decode.
type chunkLayout struct {
	chunks  []int64                  // the unit read: a chunk, or a shard's inner chunk
	strides []int64                  // element step in a decoded chunk along each axis
	key     func(idx []int64) string // the file (relative, slash-separated) of chunk idx
	codecs  []bytesCodec             // bytes-to-bytes decoders, in decoding order
	exact   bool                     // the decoded chunk must be exactly its size
	shard   *sharding                // nil unless chunks are inner chunks of shards
}

// cStrides are the element strides of a C-order array of shape.
func cStrides(shape []int64) []int64 {
	st := make([]int64, len(shape))
	n := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = n
		n *= shape[i]
	}
	return st
}

// permutedStrides are the strides of axis order[j] when the chunk is
// stored as its transpose by order (C order of the permuted shape).
func permutedStrides(shape []int64, order []int) []int64 {
	ps := make([]int64, len(shape))
	for j, ax := range order {
		ps[j] = shape[ax]
	}
	cs := cStrides(ps)
	st := make([]int64, len(shape))
	for j, ax := range order {
		st[ax] = cs[j]
	}
	return st
}

// keyFunc joins a chunk's indices with sep after prefix ("c" for Zarr
// v3's default encoding, whose rank-0 key is "c"); rank-0 keys are
// prefix, or "0" without one.
func keyFunc(prefix, sep string) func([]int64) string {
	return func(idx []int64) string {
		parts := make([]string, 0, len(idx)+1)
		if prefix != "" {
			parts = append(parts, prefix)
		}
		for _, n := range idx {
			parts = append(parts, strconv.FormatInt(n, 10))
		}
		if len(parts) == 0 {
			return "0"
		}
		return strings.Join(parts, sep)
	}
}

// maxEncoded bounds the stored size of a chunk of want decoded bytes:
// no codec here expands incompressible data by more than a small header
// and framing, so a larger chunk is corrupt and is not read into memory.
func maxEncoded(want int64) int64 { return 2*want + 1<<16 }

// readChunkFile reads a chunk file of at most max bytes; nil if there
// is none.
func readChunkFile(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%d bytes stored, over %d: %w", st.Size(), max, omni.ErrCorrupt)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// chunk returns the decoded chunk idx, or nil if it was never written.
func (a *array) chunk(idx []int64) ([]byte, error) {
	want := omni.NumElements(a.chunks) * int64(a.size)
	var raw []byte
	var err error
	if a.shard != nil {
		raw, err = a.shard.inner(a, idx, maxEncoded(want))
	} else {
		raw, err = readChunkFile(filepath.Join(a.dir, filepath.FromSlash(a.key(idx))), maxEncoded(want))
	}
	if err != nil {
		return nil, fmt.Errorf("chunk %v: %w", idx, err)
	}
	if raw == nil {
		return nil, nil
	}
	data, err := decodeChain(a.codecs, raw, int(want), a.exact)
	if err != nil {
		return nil, fmt.Errorf("chunk %v: %w", idx, err)
	}
	if a.swap {
		swapBytes(data, a.size)
	}
	return data, nil
}

func swapBytes(b []byte, size int) {
	for i := 0; i+size <= len(b); i += size {
		for j, k := i, i+size-1; j < k; j, k = j+1, k-1 {
			b[j], b[k] = b[k], b[j]
		}
	}
}

// ReadInto reads the selection h of a variable into dst, chunk by chunk.
func (s *Store) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	a := s.arrays[p] // exact first (omni.EscapeName)
	if a == nil {
		a = s.arrays[path.Clean("/"+p)]
	}
	if a == nil {
		return fmt.Errorf("variable %s: %w", p, omni.ErrNotFound)
	}
	if err := h.Check(a.v.Shape); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if a.readErr != nil {
		return fmt.Errorf("%s: %w", p, a.readErr)
	}
	if int64(len(dst)) != h.Bytes(a.v.DType) {
		return fmt.Errorf("%s: buffer of %d bytes for %d: %w", p, len(dst), h.Bytes(a.v.DType), omni.ErrInvalid)
	}
	if h.Len() == 0 {
		return nil
	}
	rank := len(h.Count)
	// For each axis, the selected indices grouped by chunk.
	first, last := make([]int64, rank), make([]int64, rank)
	for i := range rank {
		first[i] = h.Start[i] / a.chunks[i]
		last[i] = (h.Start[i] + (h.Count[i]-1)*h.StrideAt(i)) / a.chunks[i]
	}
	ci := append([]int64(nil), first...)
	for {
		if err := a.copyChunk(ci, h, dst); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if !advance(ci, first, last) {
			return nil
		}
	}
}

func advance(idx, first, last []int64) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		if idx[i]++; idx[i] <= last[i] {
			return true
		}
		idx[i] = first[i]
	}
	return false
}

// copyChunk copies the selected elements that lie in chunk ci to dst.
func (a *array) copyChunk(ci []int64, h omni.Hyperslab, dst []byte) error {
	rank := len(ci)
	// per axis: output positions k and positions within the chunk
	outs, ins := make([][]int64, rank), make([][]int64, rank)
	for i := range rank {
		c := a.chunks[i]
		lo, hi := ci[i]*c, ci[i]*c+c
		st := h.StrideAt(i)
		k0 := max(int64(0), (lo-h.Start[i]+st-1)/st)
		for k := k0; k < h.Count[i]; k++ {
			x := h.Start[i] + k*st
			if x >= hi {
				break
			}
			outs[i] = append(outs[i], k)
			ins[i] = append(ins[i], x-lo)
		}
		if len(outs[i]) == 0 {
			return nil
		}
	}
	data, err := a.chunk(ci)
	if err != nil {
		return err
	}
	size := int64(a.size)
	pos := make([]int, rank)
	for {
		var o, in int64
		for i := range rank {
			o = o*h.Count[i] + outs[i][pos[i]]
			in += a.strides[i] * ins[i][pos[i]]
		}
		if data == nil {
			copy(dst[o*size:(o+1)*size], a.fill)
		} else {
			copy(dst[o*size:(o+1)*size], data[in*size:(in+1)*size])
		}
		i := rank - 1
		for ; i >= 0; i-- {
			if pos[i]++; pos[i] < len(outs[i]) {
				break
			}
			pos[i] = 0
		}
		if i < 0 {
			return nil
		}
	}
}

// ReadStrings: Zarr v2 strings are fixed-size here; there are no
// variable-length string arrays.
func (s *Store) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	return nil, fmt.Errorf("%s: %w", p, omni.ErrNotSupported)
}

// The quiet NaNs numpy (and C's NAN) use for a "NaN" fill value.
const (
	nan32 = 0x7fc00000
	nan64 = 0x7ff8000000000000
)

func encodeNumber(t omni.DType, f float64, out []byte) {
	le := binary.LittleEndian
	switch t {
	case omni.Int8, omni.Uint8, omni.Bool:
		out[0] = byte(int64(f))
	case omni.Int16, omni.Uint16:
		le.PutUint16(out, uint16(int64(f)))
	case omni.Int32, omni.Uint32:
		le.PutUint32(out, uint32(int64(f)))
	case omni.Int64:
		le.PutUint64(out, uint64(int64(f)))
	case omni.Uint64:
		le.PutUint64(out, uint64(f))
	case omni.Float32:
		if math.IsNaN(f) {
			le.PutUint32(out, nan32) // numpy's NaN, not Go's math.NaN bits
			return
		}
		le.PutUint32(out, math.Float32bits(float32(f)))
	case omni.Float64:
		if math.IsNaN(f) {
			le.PutUint64(out, nan64)
			return
		}
		le.PutUint64(out, math.Float64bits(f))
	}
}
