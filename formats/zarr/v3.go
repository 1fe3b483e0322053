package zarr

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// v3Meta is the metadata document of every Zarr v3 node.
const v3Meta = "zarr.json"

// v3Node is zarr.json.
type v3Node struct {
	ZarrFormat int             `json:"zarr_format"`
	NodeType   string          `json:"node_type"`
	Shape      []int64         `json:"shape"`
	DataType   json.RawMessage `json:"data_type"`
	ChunkGrid  struct {
		Name          string `json:"name"`
		Configuration struct {
			ChunkShape []int64 `json:"chunk_shape"`
		} `json:"configuration"`
	} `json:"chunk_grid"`
	ChunkKeyEncoding struct {
		Name          string `json:"name"`
		Configuration struct {
			Separator string `json:"separator"`
		} `json:"configuration"`
	} `json:"chunk_key_encoding"`
	FillValue           json.RawMessage            `json:"fill_value"`
	Codecs              []v3Codec                  `json:"codecs"`
	Attributes          map[string]json.RawMessage `json:"attributes"`
	DimensionNames      []*string                  `json:"dimension_names"`
	StorageTransformers []json.RawMessage          `json:"storage_transformers"`
}

type v3Codec struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration"`
}

func readV3(dir string) (*v3Node, error) {
	b, err := os.ReadFile(filepath.Join(dir, v3Meta))
	if err != nil {
		return nil, err
	}
	var n v3Node
	if err := json.Unmarshal(sanitizeJSON(b), &n); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", v3Meta, omni.ErrCorrupt, err)
	}
	if n.ZarrFormat != 3 || (n.NodeType != "group" && n.NodeType != "array") {
		return nil, fmt.Errorf("%s: zarr_format %d, node_type %q: %w", v3Meta, n.ZarrFormat, n.NodeType, omni.ErrCorrupt)
	}
	return &n, nil
}

func (s *Store) openV3() error {
	n, err := readV3(s.dir)
	if err != nil {
		return err
	}
	if n.NodeType != "group" {
		return s.rootArray(func(name string) error { return s.arrayV3(s.dir, n, s.ds.Root, name) })
	}
	return s.groupV3(s.dir, n, s.ds.Root, 0)
}

func (s *Store) groupV3(dir string, n *v3Node, g *omni.Group, depth int) error {
	if depth > 64 {
		return fmt.Errorf("groups nested deeper than 64: %w", omni.ErrCorrupt)
	}
	g.Attrs, _ = parseAttrs(n.Attributes)
	g.NXClass = omni.AttrString(g.Attrs, omni.AttrNXClass)
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		sub := filepath.Join(dir, de.Name())
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") || !exists(filepath.Join(sub, v3Meta)) {
			continue
		}
		cn, err := readV3(sub)
		switch {
		case err != nil:
			unreadable(g, de.Name(), err)
		case cn.NodeType == "group":
			if err := s.groupV3(sub, cn, g.Child(de.Name()), depth+1); err != nil {
				return err
			}
		default:
			if err := s.arrayV3(sub, cn, g, de.Name()); err != nil {
				unreadable(g, de.Name(), err)
			}
		}
	}
	return nil
}

func (s *Store) arrayV3(dir string, n *v3Node, g *omni.Group, name string) error {
	grid := n.ChunkGrid.Configuration.ChunkShape
	if n.ChunkGrid.Name != "regular" || len(grid) != len(n.Shape) {
		return fmt.Errorf("chunk grid %q of %d dims for %d: %w", n.ChunkGrid.Name, len(grid), len(n.Shape), omni.ErrCorrupt)
	}
	for i, sz := range n.Shape {
		if sz < 0 || grid[i] <= 0 {
			return fmt.Errorf("shape %v chunks %v: %w", n.Shape, grid, omni.ErrCorrupt)
		}
	}
	var dt string
	if json.Unmarshal(n.DataType, &dt) != nil {
		return fmt.Errorf("data type %s: %w", n.DataType, omni.ErrNotSupported)
	}
	t := omni.DType(dt)
	if !t.Valid() || t.IsString() || t.Size() <= 0 {
		return fmt.Errorf("data type %q: %w", dt, omni.ErrNotSupported)
	}
	attrs, dims := parseAttrs(n.Attributes)
	if names := dimensionNames(n.DimensionNames); names != nil {
		dims = names
	}
	v := g.AddVariable(&omni.Variable{Name: name, DType: t, Shape: n.Shape, Dims: defaultDims(dims, name, len(n.Shape)), Chunks: grid, Attrs: attrs})
	a := &array{v: v, dir: dir, size: t.Size()}
	if a.readErr = a.v3Layout(n); a.readErr != nil {
		unreadable(g, name, a.readErr)
	}
	for _, c := range n.Codecs {
		v.Filters = append(v.Filters, c.Name)
	}
	a.fill = fillBytes(t, n.FillValue)
	if f := fillAttr(t, n.FillValue); f != nil {
		v.Attrs = append(v.Attrs, *f)
	}
	s.arrays[v.Path] = a
	return nil
}

// dimensionNames is dimension_names when it names every axis.
func dimensionNames(names []*string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, p := range names {
		if p == nil {
			return nil
		}
		out[i] = *p
	}
	if !validDims(out) {
		return nil
	}
	return out
}

// v3Layout sets how a Zarr v3 array's chunks are found and decoded.
func (a *array) v3Layout(n *v3Node) error {
	if len(n.StorageTransformers) > 0 {
		return fmt.Errorf("storage transformers: %w", omni.ErrNotSupported)
	}
	grid := n.ChunkGrid.Configuration.ChunkShape
	sep := n.ChunkKeyEncoding.Configuration.Separator
	if sep != "" && sep != "." && sep != "/" {
		return fmt.Errorf("chunk key separator %q: %w", sep, omni.ErrCorrupt)
	}
	switch n.ChunkKeyEncoding.Name {
	case "default":
		a.key = keyFunc("c", cmpOr(sep, "/"))
	case "v2":
		a.key = keyFunc("", cmpOr(sep, "."))
	default:
		return fmt.Errorf("chunk key encoding %q: %w", n.ChunkKeyEncoding.Name, omni.ErrNotSupported)
	}
	ch, err := parseChain(n.Codecs, grid, a.size)
	if err != nil {
		return err
	}
	a.chunks, a.strides, a.swap, a.codecs, a.exact = grid, ch.strides, ch.swap, ch.codecs, true
	if ch.shard == nil {
		return checkChunkBytes(grid, a.size)
	}
	return a.shardLayout(grid, ch.shard)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// chain is a parsed codec list.
type chain struct {
	strides []int64
	swap    bool
	codecs  []bytesCodec // bytes-to-bytes, in decoding order
	shard   *shardConfig // the array-to-bytes codec when it is sharding_indexed
}

// parseChain reads a codec list for chunks of shape: array-to-array
// (transpose), one array-to-bytes (bytes or sharding_indexed), then
// bytes-to-bytes codecs.
func parseChain(codecs []v3Codec, shape []int64, size int) (chain, error) {
	c := chain{strides: cStrides(shape)}
	i, transposed := 0, false
	for ; i < len(codecs) && codecs[i].Name == "transpose"; i++ {
		order, err := transposeOrder(codecs[i].Configuration, len(shape))
		if err != nil || transposed {
			return c, fmt.Errorf("transpose %s: %w", codecs[i].Configuration, cmpErr(err, omni.ErrNotSupported))
		}
		c.strides, transposed = permutedStrides(shape, order), true
	}
	if i == len(codecs) {
		return c, fmt.Errorf("codecs %v: no array-to-bytes codec: %w", codecNames(codecs), omni.ErrCorrupt)
	}
	switch ab := codecs[i]; ab.Name {
	case "bytes":
		var cfg struct {
			Endian string `json:"endian"`
		}
		if len(ab.Configuration) > 0 && json.Unmarshal(ab.Configuration, &cfg) != nil {
			return c, fmt.Errorf("bytes %s: %w", ab.Configuration, omni.ErrCorrupt)
		}
		c.swap = cfg.Endian == "big" && size > 1
	case "sharding_indexed":
		if transposed || i+1 < len(codecs) {
			return c, fmt.Errorf("codecs %v around sharding_indexed: %w", codecNames(codecs), omni.ErrNotSupported)
		}
		sc, err := parseShardConfig(ab.Configuration)
		if err != nil {
			return c, err
		}
		c.shard = sc
		return c, nil
	default:
		return c, fmt.Errorf("array-to-bytes codec %q: %w", ab.Name, omni.ErrNotSupported)
	}
	for _, bb := range slices.Backward(codecs[i+1:]) {
		dec, err := bytesCodecFor(bb.Name)
		if err != nil {
			return c, err
		}
		if bb.Name == "lz4" {
			return c, fmt.Errorf("codec %q: %w", bb.Name, omni.ErrNotSupported)
		}
		c.codecs = append(c.codecs, dec)
	}
	return c, nil
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

func codecNames(cs []v3Codec) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// transposeOrder reads transpose's order: a permutation, or "C" / "F".
func transposeOrder(raw json.RawMessage, rank int) ([]int, error) {
	var cfg struct {
		Order json.RawMessage `json:"order"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		return nil, omni.ErrCorrupt
	}
	var named string
	if json.Unmarshal(cfg.Order, &named) == nil {
		switch named {
		case "C":
			out := make([]int, rank)
			for i := range out {
				out[i] = i
			}
			return out, nil
		case "F":
			return reversedAxes(rank), nil
		}
		return nil, omni.ErrCorrupt
	}
	var order []int
	if json.Unmarshal(cfg.Order, &order) != nil || len(order) != rank {
		return nil, omni.ErrCorrupt
	}
	seen := make([]bool, rank)
	for _, ax := range order {
		if ax < 0 || ax >= rank || seen[ax] {
			return nil, omni.ErrCorrupt
		}
		seen[ax] = true
	}
	return order, nil
}
