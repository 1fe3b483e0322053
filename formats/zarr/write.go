package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zlib"

	"github.com/iowarp/iowarp/formats/omni"
)

// manifest is omni.json.
type manifest struct {
	OMNI         int           `json:"omni"`
	CreatedBy    string        `json:"created_by"`
	Created      time.Time     `json:"created"`
	Source       string        `json:"source"`
	SourceFormat string        `json:"source_format"`
	Schema       *omni.Dataset `json:"schema"`
}

const chunkTarget = 1 << 20

// Write creates the Zarr v2 store dir (the OMNI on-disk format) holding
// ds, pulling each variable whole through read. Variable-length strings
// are stored as fixed |S<n> (n the longest); _FillValue goes to the
// array's fill_value.
func Write(dir string, ds *omni.Dataset, read omni.ReadFunc) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := writeGroup(dir, ds.Root, read); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	m := manifest{OMNI: 1, CreatedBy: "iowarp", Created: time.Now().UTC(), Source: ds.Path, SourceFormat: ds.Format, Schema: ds}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, Manifest), b, 0o644)
}

func writeJSON(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

func writeGroup(dir string, g *omni.Group, read omni.ReadFunc) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, ".zgroup"), map[string]int{"zarr_format": 2}); err != nil {
		return err
	}
	if err := writeZattrs(dir, g.Attrs, nil); err != nil {
		return err
	}
	for _, v := range g.Variables {
		if err := writeArray(filepath.Join(dir, v.Name), v, read); err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
	}
	for _, c := range g.Groups {
		if err := writeGroup(filepath.Join(dir, c.Name), c, read); err != nil {
			return err
		}
	}
	return nil
}

// writeZattrs writes attributes as JSON: one value as a scalar, NaN and
// infinities as Python's json literals (what zarr-python writes).
func writeZattrs(dir string, attrs []omni.Attribute, dims []string) error {
	var b bytes.Buffer
	b.WriteString("{")
	n := 0
	item := func(k string, v string) {
		if n > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		fmt.Fprintf(&b, "\n  %s: %s", kb, v)
		n++
	}
	if dims != nil {
		db, _ := json.Marshal(dims)
		item("_ARRAY_DIMENSIONS", string(db))
	}
	for _, a := range attrs {
		if a.Name == "_FillValue" || a.Name == "_ARRAY_DIMENSIONS" || a.Len() == 0 {
			continue
		}
		item(a.Name, attrJSON(a))
	}
	b.WriteString("\n}\n")
	return os.WriteFile(filepath.Join(dir, ".zattrs"), b.Bytes(), 0o644)
}

func attrJSON(a omni.Attribute) string {
	var parts []string
	switch v := a.Value.(type) {
	case []float64:
		for _, f := range v {
			parts = append(parts, pyFloat(f))
		}
	default:
		b, _ := json.Marshal(v)
		s := string(b)
		if a.Len() == 1 {
			return s[1 : len(s)-1]
		}
		return s
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func chunkShape(v *omni.Variable, size int) []int64 {
	out := make([]int64, len(v.Shape))
	if v.Chunks != nil {
		for i, c := range v.Chunks {
			out[i] = max(min(c, v.Shape[i]), 1)
		}
		return out
	}
	row := int64(size)
	for i := len(v.Shape) - 1; i >= 0; i-- {
		out[i] = max(v.Shape[i], 1)
		if i > 0 {
			row *= out[i]
		}
	}
	if len(out) > 0 {
		out[0] = max(1, min(out[0], chunkTarget/max(row, 1)))
	}
	return out
}

func writeArray(dir string, v *omni.Variable, read omni.ReadFunc) error {
	data, err := read(v)
	if err != nil {
		return err
	}
	t := v.DType
	if t == omni.String {
		if t, data, err = omni.FixStrings(data); err != nil {
			return err
		}
	}
	descr, err := t.NumpyDescr()
	if err != nil {
		return err
	}
	if int64(len(data)) != v.Len()*int64(t.Size()) {
		return fmt.Errorf("%d bytes for %d elements of %s: %w", len(data), v.Len(), t, omni.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	chunks := chunkShape(v, t.Size())
	level := 1
	meta := map[string]any{
		"zarr_format": 2, "shape": v.Shape, "chunks": chunks, "dtype": descr,
		"compressor": codec{ID: "zlib", Level: &level}, "fill_value": fillJSON(v, t),
		"order": "C", "filters": nil,
	}
	if err := writeJSON(filepath.Join(dir, ".zarray"), meta); err != nil {
		return err
	}
	if err := writeZattrs(dir, v.Attrs, append([]string{}, v.Dims...)); err != nil {
		return err
	}
	return writeChunks(dir, v.Shape, chunks, t.Size(), data)
}

func fillJSON(v *omni.Variable, t omni.DType) any {
	a, ok := omni.Attr(v.Attrs, "_FillValue")
	if !ok || t.IsString() || a.Float64s() == nil || a.Len() != 1 {
		return nil
	}
	f := a.Float64s()[0]
	if t.IsFloat() {
		if s := pyFloat(f); s == "NaN" || strings.Contains(s, "Infinity") {
			return s
		}
		return f
	}
	if vals, ok := a.Value.([]uint64); ok {
		return vals[0]
	}
	return int64(f)
}

// writeChunks cuts C-order data into chunks (edge chunks padded, as Zarr
// v2 wants) and writes each zlib-compressed.
func writeChunks(dir string, shape, chunks []int64, size int, data []byte) error {
	rank := len(shape)
	nchunks := make([]int64, rank)
	for i := range rank {
		nchunks[i] = (shape[i] + chunks[i] - 1) / chunks[i]
		if nchunks[i] == 0 {
			return nil
		}
	}
	buf := make([]byte, omni.NumElements(chunks)*int64(size))
	ci := make([]int64, rank)
	zero := make([]int64, rank)
	last := make([]int64, rank)
	for i := range rank {
		last[i] = nchunks[i] - 1
	}
	for {
		clear(buf)
		fillChunk(buf, data, shape, chunks, ci, size)
		key := "0"
		if rank > 0 {
			parts := make([]string, rank)
			for i, n := range ci {
				parts[i] = strconv.FormatInt(n, 10)
			}
			key = strings.Join(parts, ".")
		}
		if err := writeChunk(filepath.Join(dir, key), buf); err != nil {
			return err
		}
		if rank == 0 || !advance(ci, zero, last) {
			return nil
		}
	}
}

// fillChunk copies the part of data inside chunk ci into buf, row by row
// along the last axis.
func fillChunk(buf, data []byte, shape, chunks, ci []int64, size int) {
	rank := len(shape)
	if rank == 0 {
		copy(buf, data)
		return
	}
	lo := make([]int64, rank)
	ext := make([]int64, rank)
	for i := range rank {
		lo[i] = ci[i] * chunks[i]
		ext[i] = min(chunks[i], shape[i]-lo[i])
	}
	pos := make([]int64, rank) // position within the chunk, last axis stays 0
	s := int64(size)
	for {
		var src, dst int64
		for i := range rank {
			src = src*shape[i] + lo[i] + pos[i]
			dst = dst*chunks[i] + pos[i]
		}
		n := ext[rank-1] * s
		copy(buf[dst*s:dst*s+n], data[src*s:src*s+n])
		i := rank - 2
		for ; i >= 0; i-- {
			if pos[i]++; pos[i] < ext[i] {
				break
			}
			pos[i] = 0
		}
		if i < 0 {
			return
		}
	}
}

func writeChunk(p string, raw []byte) error {
	var b bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&b, 1)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(p, b.Bytes(), 0o644)
}
