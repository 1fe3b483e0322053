package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/iowarp/iowarp/formats/omni"
)

func decompressor(id string) (func(io.Reader) (io.ReadCloser, error), error) {
	switch id {
	case "zlib":
		return zlib.NewReader, nil
	case "gzip":
		return func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) }, nil
	case "zstd":
		return func(r io.Reader) (io.ReadCloser, error) {
			d, err := zstd.NewReader(r)
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		}, nil
	}
	return nil, fmt.Errorf("compressor %q: %w", id, omni.ErrNotSupported)
}

func (a *array) chunkKey(idx []int64) string {
	sep := a.meta.Separator
	if sep == "" {
		sep = "."
	}
	parts := make([]string, len(idx))
	for i, n := range idx {
		parts[i] = strconv.FormatInt(n, 10)
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, sep)
}

// chunk returns the decoded chunk idx, or nil if it was never written.
func (a *array) chunk(idx []int64) ([]byte, error) {
	want := omni.NumElements(a.meta.Chunks) * int64(a.size)
	raw, err := os.ReadFile(filepath.Join(a.dir, filepath.FromSlash(a.chunkKey(idx))))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if a.meta.Compressor != nil {
		dec, _ := decompressor(a.meta.Compressor.ID)
		r, err := dec(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("chunk %v: %w: %v", idx, omni.ErrCorrupt, err)
		}
		out := make([]byte, want)
		_, err = io.ReadFull(r, out)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("chunk %v: %w: %v", idx, omni.ErrCorrupt, err)
		}
		raw = out
	}
	if int64(len(raw)) < want {
		return nil, fmt.Errorf("chunk %v: %d bytes, want %d: %w", idx, len(raw), want, omni.ErrCorrupt)
	}
	if a.swap {
		swapBytes(raw[:want], a.size)
	}
	return raw[:want], nil
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
	a := s.arrays[path.Clean("/"+p)]
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
		first[i] = h.Start[i] / a.meta.Chunks[i]
		last[i] = (h.Start[i] + (h.Count[i]-1)*h.StrideAt(i)) / a.meta.Chunks[i]
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
		c := a.meta.Chunks[i]
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
			in = in*a.meta.Chunks[i] + ins[i][pos[i]]
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
		le.PutUint32(out, math.Float32bits(float32(f)))
	case omni.Float64:
		le.PutUint64(out, math.Float64bits(f))
	}
}

var _ = json.Marshal
