package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/zarr/blosc"
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
	w := &writer{read: read, meta: map[string][]byte{}}
	if err := w.group(dir, "", ds.Root); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := w.consolidate(dir); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	m := manifest{OMNI: 1, CreatedBy: "iowarp", Created: time.Now().UTC(), Source: ds.Path, SourceFormat: ds.Format, Schema: ds}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, Manifest), b, 0o644)
}

// writer writes a store and keeps every metadata document it wrote, by
// key, for .zmetadata.
type writer struct {
	read omni.ReadFunc
	meta map[string][]byte
}

// doc writes the metadata document name (JSON text b) of the node rel.
func (w *writer) doc(dir, rel, name string, b []byte) error {
	w.meta[path.Join(rel, name)] = b
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

func (w *writer) json(dir, rel, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return w.doc(dir, rel, name, b)
}

// consolidate writes .zmetadata (zarr.consolidate_metadata's layout),
// as text: attribute documents hold Python's NaN literals, which
// encoding/json would refuse.
func (w *writer) consolidate(dir string) error {
	keys := make([]string, 0, len(w.meta))
	for k := range w.meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	b.WriteString("{\n  \"metadata\": {")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		fmt.Fprintf(&b, "\n    %s: %s", kb, bytes.TrimSpace(w.meta[k]))
	}
	b.WriteString("\n  },\n  \"zarr_consolidated_format\": 1\n}\n")
	return os.WriteFile(filepath.Join(dir, ".zmetadata"), b.Bytes(), 0o644)
}

func (w *writer) group(dir, rel string, g *omni.Group) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := w.json(dir, rel, ".zgroup", map[string]int{"zarr_format": 2}); err != nil {
		return err
	}
	if err := w.doc(dir, rel, ".zattrs", zattrs(g.Attrs, nil)); err != nil {
		return err
	}
	for _, v := range g.Variables {
		n := omni.ExportName(v.Name)
		if err := w.array(filepath.Join(dir, n), path.Join(rel, n), v); err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
	}
	for _, c := range g.Groups {
		n := omni.ExportName(c.Name)
		if err := w.group(filepath.Join(dir, n), path.Join(rel, n), c); err != nil {
			return err
		}
	}
	return nil
}

// zattrs encodes attributes as JSON: one value as a scalar, NaN and
// infinities as Python's json literals (what zarr-python writes).
func zattrs(attrs []omni.Attribute, dims []string) []byte {
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
		names := make([]string, len(dims))
		for i, d := range dims {
			names[i] = omni.ExportName(d)
		}
		db, _ := json.Marshal(names)
		item("_ARRAY_DIMENSIONS", string(db))
	}
	for _, a := range attrs {
		if a.Name == "_FillValue" || a.Name == "_ARRAY_DIMENSIONS" || a.Len() == 0 {
			continue
		}
		item(omni.ExportName(a.Name), attrJSON(a))
	}
	b.WriteString("\n}\n")
	return b.Bytes()
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

func (w *writer) array(dir, rel string, v *omni.Variable) error {
	data, err := w.read(v)
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
	meta := map[string]any{
		"zarr_format": 2, "shape": v.Shape, "chunks": chunks, "dtype": descr,
		"compressor": map[string]any{"id": "blosc", "cname": writeCName, "clevel": writeLevel, "shuffle": 1, "blocksize": 0},
		"fill_value": fillJSON(v, t), "order": "C", "filters": nil,
	}
	if err := w.json(dir, rel, ".zarray", meta); err != nil {
		return err
	}
	if err := w.doc(dir, rel, ".zattrs", zattrs(v.Attrs, append([]string{}, v.Dims...))); err != nil {
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
// v2 wants) and writes each compressed by Blosc.
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
		if err := writeChunk(filepath.Join(dir, key), buf, size); err != nil {
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

// Exports are Blosc lz4 with byte shuffle, xarray's default compressor.
const (
	writeCName = "lz4"
	writeLevel = 5
)

func writeChunk(p string, raw []byte, size int) error {
	if size > 255 {
		size = 1 // numcodecs' rule for types over Blosc's maximum
	}
	b, err := blosc.Compress(raw, blosc.Options{CName: writeCName, Level: writeLevel, TypeSize: size, Shuffle: true})
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}
