// Package zarr reads and writes Zarr directory stores as OMNI datasets
// (formats/omni): groups are groups, arrays are variables, attributes are
// attributes and xarray's _ARRAY_DIMENSIONS (or v3's dimension_names)
// names the axes.
//
// Zarr v2 (.zgroup, .zarray, .zattrs): compressors blosc (package blosc:
// blosclz, lz4, lz4hc, zlib, zstd, snappy, with shuffle or bitshuffle),
// zlib, gzip, zstd and numcodecs' lz4; C and F order; big-endian dtypes
// are swapped. A .zmetadata (consolidated metadata) that describes the
// root group replaces the metadata files, as zarr.open_consolidated does.
// Zarr v3 (zarr.json): data types bool, intN, uintN, floatN; codecs
// transpose, bytes (either endian), blosc, gzip, zstd, crc32c and
// sharding_indexed (index at the end or start, bytes and crc32c index
// codecs, one level); chunk key encodings default and v2. A store whose
// root is an array (a bare-array store, v2 or v3) is a dataset of that one
// array, named after the directory (less its .zarr extension).
//
// One array never fails the store. An array with v2 filters (Delta,
// FixedScaleOffset, ...), another codec or storage transformer not listed
// here is a variable whose reads fail with omni.ErrNotSupported (EIO on a
// view); an array with no OMNI type (v2 unicode, object or structured
// dtypes; v3 string and extension types) or with metadata that cannot be
// read is not a variable. Both are named, with the reason, in the
// attribute zarr_unreadable of their group ("NAME: reason", one string
// each), which `iowarp describe` prints. A chunk is decoded whole, so its
// decoded size is bounded (maxChunk); a sharded array reads one shard's
// index and inner chunk per inner chunk, never the whole shard.
//
// The OMNI on-disk format ("export --format omni" or "zarr") is a Zarr
// v2 store written by Write: CF attributes kept, _ARRAY_DIMENSIONS on
// every array (so xarray.open_zarr reads it), Blosc lz4 chunks with byte
// shuffle (xarray's default), a .zmetadata, and an omni.json manifest at
// the root holding the full typed schema, which this reader prefers for
// attribute types and dimensions.
//
// A Store is safe for concurrent use (it reads files; nothing is cached).
package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// Manifest is the name of the OMNI manifest at the root of a store.
const Manifest = "omni.json"

// AttrUnreadable is the group attribute that names the arrays of the
// group that cannot be read, with the reason ("NAME: reason").
const AttrUnreadable = "zarr_unreadable"

func init() {
	omni.Register(omni.Driver{
		Name:  "zarr",
		Sniff: sniff,
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
		Write: Write,
	})
	omni.Register(omni.Driver{Name: "omni", Write: Write})
}

func sniff(p omni.Probe) bool {
	if p.Head != nil || p.Has == nil {
		return false
	}
	for _, n := range []string{".zgroup", ".zarray", ".zmetadata", v3Meta, Manifest} {
		if p.Has(n) {
			return true
		}
	}
	return false
}

// arrayMeta is .zarray.
type arrayMeta struct {
	ZarrFormat int             `json:"zarr_format"`
	Shape      []int64         `json:"shape"`
	Chunks     []int64         `json:"chunks"`
	DType      string          `json:"dtype"`
	Compressor *codec          `json:"compressor"`
	FillValue  json.RawMessage `json:"fill_value"`
	Order      string          `json:"order"`
	Filters    []codec         `json:"filters"`
	Separator  string          `json:"dimension_separator,omitempty"`
}

type codec struct {
	ID    string `json:"id"`
	Level *int   `json:"level,omitempty"`
}

// Store is an open Zarr store.
type Store struct {
	dir    string
	ds     *omni.Dataset
	arrays map[string]*array
	// cons is the consolidated metadata (.zmetadata) by key, nil if the
	// store has none: then it replaces the .zgroup, .zarray and .zattrs
	// files, as in zarr-python's open_consolidated.
	cons map[string]json.RawMessage
}

type array struct {
	v    *omni.Variable
	dir  string
	size int
	swap bool // big-endian on disk
	fill []byte
	chunkLayout
	readErr error // why the array cannot be read, nil if it can
}

var _ omni.Reader = (*Store)(nil)

// Open reads the metadata of the store at dir.
func Open(dir string) (*Store, error) {
	s := &Store{dir: dir, ds: omni.NewDataset(dir, "zarr"), arrays: map[string]*array{}}
	if err := s.openTree(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	s.applyManifest()
	s.declareDims()
	if err := s.ds.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", dir, omni.ErrCorrupt, err)
	}
	return s, nil
}

// Dataset returns the tree.
func (s *Store) Dataset() *omni.Dataset { return s.ds }

// Close is a no-op.
func (s *Store) Close() error { return nil }

// openTree reads the metadata tree: Zarr v3 if the root has zarr.json,
// else v2 (from .zmetadata when it holds the root group).
func (s *Store) openTree() error {
	if exists(filepath.Join(s.dir, v3Meta)) {
		return s.openV3()
	}
	s.loadConsolidated()
	if s.cons == nil && exists(filepath.Join(s.dir, ".zarray")) {
		s.ds.Root.Attrs = nil
		return s.rootArray(func(name string) error { return s.array(s.dir, s.ds.Root, name) })
	}
	return s.group(s.dir, s.ds.Root, 0)
}

// rootArray reads the array at the root of a bare-array store with
// read(name): a dataset of that one array, named after the directory.
// It fails the store when that array cannot be read: it is the whole
// dataset.
func (s *Store) rootArray(read func(name string) error) error {
	name := strings.TrimSuffix(filepath.Base(s.dir), ".zarr")
	if name == "" || name == "." || name == ".." || name == "/" {
		name = "array"
	}
	if err := read(name); err != nil {
		return fmt.Errorf("the root array: %w", err)
	}
	if len(s.ds.Root.Variables) == 0 {
		return fmt.Errorf("the root array: %s: %w", omni.AttrString(s.ds.Root.Attrs, AttrUnreadable), omni.ErrNotSupported)
	}
	return nil
}

// unreadable names array name of g, and why it cannot be read, in g's
// zarr_unreadable attribute.
func unreadable(g *omni.Group, name string, why error) {
	line := fmt.Sprintf("%s: %v", name, why)
	if len(line) > 512 {
		line = line[:509] + "..."
	}
	for i, a := range g.Attrs {
		if old, ok := a.Value.([]string); ok && a.Name == AttrUnreadable {
			g.Attrs[i] = omni.StringAttr(AttrUnreadable, append(slices.Clone(old), line)...)
			return
		}
	}
	g.Attrs = append(g.Attrs, omni.StringAttr(AttrUnreadable, line))
}

// consolidated is .zmetadata.
type consolidated struct {
	Metadata map[string]json.RawMessage `json:"metadata"`
	Format   int                        `json:"zarr_consolidated_format"`
}

// loadConsolidated sets s.cons from .zmetadata when it is readable and
// describes the root as a group; otherwise the files are read.
func (s *Store) loadConsolidated() {
	b, err := os.ReadFile(filepath.Join(s.dir, ".zmetadata"))
	if err != nil {
		return
	}
	var c consolidated
	if json.Unmarshal(sanitizeJSON(b), &c) != nil || c.Format != 1 {
		return
	}
	if _, ok := c.Metadata[".zgroup"]; ok {
		s.cons = c.Metadata
	}
}

// readMeta reads the metadata document name of the node at dir, from the
// consolidated metadata if there is one.
func (s *Store) readMeta(dir, name string) ([]byte, error) {
	if s.cons == nil {
		return os.ReadFile(filepath.Join(dir, name))
	}
	if b, ok := s.cons[s.key(dir, name)]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("%s: %w", s.key(dir, name), os.ErrNotExist)
}

// key is the store key of name in the node at dir.
func (s *Store) key(dir, name string) string {
	rel, err := filepath.Rel(s.dir, dir)
	if err != nil {
		rel = "."
	}
	return path.Join(filepath.ToSlash(rel), name)
}

// child is a group's member.
type child struct {
	name  string
	array bool
}

// children lists the arrays and groups in the group at dir, by name.
func (s *Store) children(dir string) ([]child, error) {
	if s.cons != nil {
		return s.consChildren(dir), nil
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []child
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		sub := filepath.Join(dir, de.Name())
		switch {
		case exists(filepath.Join(sub, ".zarray")):
			out = append(out, child{de.Name(), true})
		case exists(filepath.Join(sub, ".zgroup")):
			out = append(out, child{de.Name(), false})
		}
	}
	return out, nil
}

func (s *Store) consChildren(dir string) []child {
	prefix := s.key(dir, "") + "/"
	if prefix == "./" || prefix == "/" {
		prefix = ""
	}
	seen := map[string]bool{}
	var out []child
	for k := range s.cons {
		rest, ok := strings.CutPrefix(k, prefix)
		name, leaf, nested := strings.Cut(rest, "/")
		if !ok || !nested || name == "" || strings.HasPrefix(name, ".") || seen[name] || (leaf != ".zarray" && leaf != ".zgroup") {
			continue
		}
		seen[name] = true
		out = append(out, child{name, leaf == ".zarray"})
	}
	slices.SortFunc(out, func(a, b child) int { return strings.Compare(a.name, b.name) })
	return out
}

func (s *Store) group(dir string, g *omni.Group, depth int) error {
	if depth > 64 {
		return fmt.Errorf("groups nested deeper than 64: %w", omni.ErrCorrupt)
	}
	attrs, _, err := s.readAttrs(dir)
	if err != nil {
		return err
	}
	g.Attrs = attrs
	g.NXClass = omni.AttrString(attrs, omni.AttrNXClass)
	kids, err := s.children(dir)
	if err != nil {
		return err
	}
	for _, c := range kids {
		sub := filepath.Join(dir, c.name)
		if c.array {
			if err := s.array(sub, g, c.name); err != nil {
				unreadable(g, c.name, err)
			}
			continue
		}
		if err := s.group(sub, g.Child(c.name), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func (s *Store) array(dir string, g *omni.Group, name string) error {
	b, err := s.readMeta(dir, ".zarray")
	if err != nil {
		return err
	}
	var m arrayMeta
	if err := json.Unmarshal(sanitizeJSON(b), &m); err != nil {
		return fmt.Errorf(".zarray: %w: %v", omni.ErrCorrupt, err)
	}
	if m.ZarrFormat != 2 || len(m.Chunks) != len(m.Shape) {
		return fmt.Errorf(".zarray: zarr_format %d, %d chunk dims for %d: %w", m.ZarrFormat, len(m.Chunks), len(m.Shape), omni.ErrCorrupt)
	}
	for i, n := range m.Shape {
		if n < 0 || m.Chunks[i] <= 0 {
			return fmt.Errorf(".zarray: shape %v chunks %v: %w", m.Shape, m.Chunks, omni.ErrCorrupt)
		}
	}
	t, swap, err := parseDType(m.DType)
	if err != nil {
		return err // dtypes with no OMNI form are not variables
	}
	attrs, dims, err := s.readAttrs(dir)
	if err != nil {
		return err
	}
	v := g.AddVariable(&omni.Variable{Name: name, DType: t, Shape: m.Shape, Dims: defaultDims(dims, name, len(m.Shape)), Chunks: m.Chunks, Attrs: attrs})
	a := &array{v: v, dir: dir, size: t.Size(), swap: swap}
	for _, f := range m.Filters {
		v.Filters = append(v.Filters, f.ID)
	}
	if m.Compressor != nil {
		v.Filters = append(v.Filters, m.Compressor.ID)
	}
	if a.readErr = a.v2Layout(m); a.readErr != nil {
		unreadable(g, name, a.readErr)
	}
	a.fill = fillBytes(t, m.FillValue)
	if f := fillAttr(t, m.FillValue); f != nil {
		v.Attrs = append(v.Attrs, *f)
	}
	s.arrays[v.Path] = a
	return nil
}

// maxChunk bounds the decoded size of one chunk (a chunk is decoded
// whole, into memory).
const maxChunk = 1 << 30

// defaultDims returns dims if it names every axis, else name_dimI.
func defaultDims(dims []string, name string, rank int) []string {
	if len(dims) == rank {
		return dims
	}
	dims = make([]string, rank)
	for i := range dims {
		dims[i] = fmt.Sprintf("%s_dim%d", name, i)
	}
	return dims
}

// checkChunkBytes bounds the decoded size of one chunk.
func checkChunkBytes(chunks []int64, size int) error {
	n := int64(size)
	for _, c := range chunks {
		if c <= 0 || n > maxChunk/c {
			return fmt.Errorf("chunks %v of %d-byte elements: over %d bytes: %w", chunks, size, maxChunk, omni.ErrNotSupported)
		}
		n *= c
	}
	return nil
}

// v2Layout sets how the chunks of a Zarr v2 array are found and decoded,
// or says why they cannot be.
func (a *array) v2Layout(m arrayMeta) error {
	sep := cmpOr(m.Separator, ".")
	a.chunks, a.key, a.strides = m.Chunks, keyFunc("", "."), cStrides(m.Chunks)
	if sep != "." && sep != "/" {
		return fmt.Errorf("dimension_separator %q: %w", sep, omni.ErrCorrupt)
	}
	a.key = keyFunc("", sep)
	if err := checkChunkBytes(m.Chunks, a.size); err != nil {
		return err
	}
	switch m.Order {
	case "", "C":
	case "F":
		a.strides = permutedStrides(m.Chunks, reversedAxes(len(m.Chunks)))
	default:
		return fmt.Errorf("order %q: %w", m.Order, omni.ErrNotSupported)
	}
	if len(m.Filters) > 0 {
		ids := make([]string, len(m.Filters))
		for i, f := range m.Filters {
			ids[i] = strconv.Quote(f.ID)
		}
		return fmt.Errorf("v2 filters %s: %w", strings.Join(ids, ", "), omni.ErrNotSupported)
	}
	if m.Compressor != nil {
		c, err := bytesCodecFor(m.Compressor.ID)
		if err != nil {
			return err
		}
		a.codecs = []bytesCodec{c}
	}
	return nil
}

func reversedAxes(rank int) []int {
	out := make([]int, rank)
	for i := range out {
		out[i] = rank - 1 - i
	}
	return out
}

// parseDType maps a NumPy type string to an OMNI dtype.
func parseDType(s string) (omni.DType, bool, error) {
	swap := len(s) > 2 && s[0] == '>' && s[2:] != "1"
	if swap {
		s = "<" + s[1:]
	}
	t, err := omni.ParseNumpyDescr(s)
	return t, swap, err
}

// readAttrs reads .zattrs: attributes, and _ARRAY_DIMENSIONS apart.
func (s *Store) readAttrs(dir string) ([]omni.Attribute, []string, error) {
	b, err := s.readMeta(dir, ".zattrs")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(sanitizeJSON(b), &raw); err != nil {
		return nil, nil, fmt.Errorf(".zattrs: %w: %v", omni.ErrCorrupt, err)
	}
	attrs, dims := parseAttrs(raw)
	return attrs, dims, nil
}

// parseAttrs types a JSON attribute object, _ARRAY_DIMENSIONS apart.
func parseAttrs(raw map[string]json.RawMessage) ([]omni.Attribute, []string) {
	var dims []string
	var out []omni.Attribute
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "_ARRAY_DIMENSIONS" {
			dims = arrayDims(raw[k])
			continue
		}
		if a, ok := jsonAttr(k, raw[k]); ok {
			out = append(out, a)
		}
	}
	return out, dims
}

// arrayDims decodes xarray's _ARRAY_DIMENSIONS: nil unless it is a list
// of names that can name an axis (json.Unmarshal leaves the elements it
// decoded before an error, such as "" for a number).
func arrayDims(raw json.RawMessage) []string {
	var dims []string
	if json.Unmarshal(raw, &dims) != nil || !validDims(dims) {
		return nil
	}
	return dims
}

func validDims(dims []string) bool {
	for _, d := range dims {
		if d == "" || d == "." || d == ".." || len(d) > 1024 || strings.ContainsRune(d, '/') {
			return false
		}
	}
	return true
}

// jsonAttr types a JSON attribute value: strings, integers (int64) or
// numbers (float64), scalar or list; other values are kept as JSON text.
func jsonAttr(name string, raw json.RawMessage) (omni.Attribute, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return omni.Attribute{}, false
	}
	items, isList := v.([]any)
	if !isList {
		items = []any{v}
	}
	if len(items) == 0 {
		return omni.Attribute{}, false
	}
	var ss []string
	var fs []float64
	var is []int64
	allInt := true
	for _, it := range items {
		switch x := it.(type) {
		case string:
			if f, ok := specialFloat(x); ok && len(ss) == 0 {
				fs = append(fs, f)
				allInt = false
				continue
			}
			ss = append(ss, x)
		case json.Number:
			f, _ := x.Float64()
			fs = append(fs, f)
			n, err := strconv.ParseInt(string(x), 10, 64)
			allInt = allInt && err == nil
			is = append(is, n)
		case bool:
			n := int64(0)
			if x {
				n = 1
			}
			fs, is = append(fs, float64(n)), append(is, n)
		default:
			return omni.StringAttr(name, string(raw)), true
		}
	}
	switch {
	case len(ss) == len(items):
		return omni.StringAttr(name, ss...), true
	case len(fs) == len(items) && allInt:
		return omni.IntAttr(name, is...), true
	case len(fs) == len(items):
		return omni.FloatAttr(name, fs...), true
	}
	return omni.StringAttr(name, string(raw)), true
}

func specialFloat(s string) (float64, bool) {
	switch s {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	return 0, false
}

// sanitizeJSON quotes the NaN, Infinity and -Infinity literals Python's
// json module writes, so encoding/json accepts them.
func sanitizeJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte("NaN")) && !bytes.Contains(b, []byte("Infinity")) {
		return b
	}
	var out []byte
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		replaced := false
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(b[i:], []byte(tok)) {
				out = append(out, '"')
				out = append(out, tok...)
				out = append(out, '"')
				i += len(tok) - 1
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, c)
		}
	}
	return out
}

func fillBytes(t omni.DType, raw json.RawMessage) []byte {
	out := make([]byte, t.Size())
	f := fillAttr(t, raw)
	if f == nil {
		return out
	}
	encodeNumber(t, f.Float64s()[0], out)
	return out
}

func fillAttr(t omni.DType, raw json.RawMessage) *omni.Attribute {
	if len(raw) == 0 || string(raw) == "null" || t.IsString() {
		return nil
	}
	a, ok := jsonAttr("_FillValue", raw)
	if !ok || a.Len() != 1 || a.Float64s() == nil {
		return nil
	}
	a.Type = t
	if t.IsFloat() {
		a.Value = a.Float64s()
	}
	return &a
}

// applyManifest takes attribute types and dimensions from omni.json when
// the store has one that matches the arrays.
func (s *Store) applyManifest() {
	b, err := os.ReadFile(filepath.Join(s.dir, Manifest))
	if err != nil {
		return
	}
	var m manifest
	if json.Unmarshal(b, &m) != nil || m.Schema == nil || m.Schema.Validate() != nil {
		return
	}
	s.ds.Walk(func(g *omni.Group) {
		mg, err := m.Schema.Group(g.Path)
		if err != nil {
			return
		}
		g.Attrs, g.NXClass, g.Compound = mg.Attrs, mg.NXClass, mg.Compound
		g.Dims = mg.Dims
		for _, v := range g.Variables {
			if mv, err := m.Schema.Var(v.Path); err == nil && len(mv.Dims) == len(v.Dims) {
				v.Attrs, v.Dims = mv.Attrs, mv.Dims
			}
		}
	})
}

// declareDims declares, in the root group, every axis name not declared
// anywhere visible, with the coordinate variable of the same name if any.
func (s *Store) declareDims() {
	for _, v := range s.ds.Variables() {
		for i, name := range v.Dims {
			dir := filepath.Dir(v.Path)
			if _, err := s.ds.Dim(dir, name); err == nil {
				continue
			}
			d := &omni.Dimension{Name: name, Size: v.Shape[i]}
			if c, err := s.ds.Var(omni.JoinPath("/", name)); err == nil && len(c.Shape) == 1 {
				d.Coord = c.Path
			}
			s.ds.Root.AddDim(d)
		}
	}
}
