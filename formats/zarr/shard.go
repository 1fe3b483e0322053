package zarr

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/iowarp/iowarp/formats/omni"
)

// shardConfig is sharding_indexed's configuration.
type shardConfig struct {
	ChunkShape    []int64   `json:"chunk_shape"`
	Codecs        []v3Codec `json:"codecs"`
	IndexCodecs   []v3Codec `json:"index_codecs"`
	IndexLocation string    `json:"index_location"`
}

// sharding locates inner chunks in shard files: a shard holds per[i]
// inner chunks along axis i, and an index of (offset, nbytes) uint64
// pairs, one per inner chunk in C order, at its end or start, both
// 2^64-1 for a chunk never written.
type sharding struct {
	per       []int64
	n         int64 // inner chunks per shard
	indexSize int64 // encoded index bytes
	atEnd     bool
	index     []bytesCodec // index decoders (crc32c only)
	key       func([]int64) string
}

// maxShardChunks bounds the inner chunks of one shard (its index is
// read whole).
const maxShardChunks = 1 << 22

func parseShardConfig(raw json.RawMessage) (*shardConfig, error) {
	var sc shardConfig
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("sharding_indexed: %w: %v", omni.ErrCorrupt, err)
	}
	return &sc, nil
}

// shardLayout makes the read unit the inner chunk of the shards of
// shape grid.
func (a *array) shardLayout(grid []int64, sc *shardConfig) error {
	if len(sc.ChunkShape) != len(grid) {
		return fmt.Errorf("inner chunks %v in shards %v: %w", sc.ChunkShape, grid, omni.ErrCorrupt)
	}
	sh := &sharding{per: make([]int64, len(grid)), n: 1, atEnd: sc.IndexLocation != "start", key: a.key}
	for i, c := range sc.ChunkShape {
		if c <= 0 || grid[i]%c != 0 {
			return fmt.Errorf("inner chunks %v do not divide shards %v: %w", sc.ChunkShape, grid, omni.ErrCorrupt)
		}
		sh.per[i] = grid[i] / c
		if sh.n > maxShardChunks/sh.per[i] {
			return fmt.Errorf("shards of over %d inner chunks: %w", maxShardChunks, omni.ErrNotSupported)
		}
		sh.n *= sh.per[i]
	}
	if sc.IndexLocation != "" && sc.IndexLocation != "end" && sc.IndexLocation != "start" {
		return fmt.Errorf("index_location %q: %w", sc.IndexLocation, omni.ErrCorrupt)
	}
	if err := sh.parseIndexCodecs(sc.IndexCodecs); err != nil {
		return err
	}
	inner, err := parseChain(sc.Codecs, sc.ChunkShape, a.size)
	if err != nil {
		return fmt.Errorf("inner codecs: %w", err)
	}
	if inner.shard != nil {
		return fmt.Errorf("nested sharding: %w", omni.ErrNotSupported)
	}
	a.chunks, a.strides, a.swap, a.codecs, a.shard = sc.ChunkShape, inner.strides, inner.swap, inner.codecs, sh
	return checkChunkBytes(sc.ChunkShape, a.size)
}

// parseIndexCodecs accepts bytes (little-endian) then crc32c at most.
func (sh *sharding) parseIndexCodecs(cs []v3Codec) error {
	sh.indexSize = 16 * sh.n
	for i, c := range cs {
		switch {
		case c.Name == "bytes" && i == 0:
			var cfg struct {
				Endian string `json:"endian"`
			}
			if len(c.Configuration) > 0 && json.Unmarshal(c.Configuration, &cfg) != nil || cfg.Endian == "big" {
				return fmt.Errorf("index codec bytes %s: %w", c.Configuration, omni.ErrNotSupported)
			}
		case c.Name == "crc32c" && i > 0:
			dec, _ := bytesCodecFor("crc32c")
			sh.index = append([]bytesCodec{dec}, sh.index...)
			sh.indexSize += 4
		default:
			return fmt.Errorf("index codecs %v: %w", codecNames(cs), omni.ErrNotSupported)
		}
	}
	return nil
}

// inner reads the encoded inner chunk idx (global inner-chunk indices),
// nil if its shard or the chunk was never written.
func (sh *sharding) inner(a *array, idx []int64, max int64) ([]byte, error) {
	shard := make([]int64, len(idx))
	var lin int64
	for i, n := range idx {
		shard[i] = n / sh.per[i]
		lin = lin*sh.per[i] + n%sh.per[i]
	}
	f, err := os.Open(filepath.Join(a.dir, filepath.FromSlash(sh.key(shard))))
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
	off, n, err := sh.entry(f, st.Size(), lin)
	if err != nil || n == 0 && off == math.MaxUint64 {
		return nil, err
	}
	if int64(n) > max {
		return nil, fmt.Errorf("inner chunk of %d bytes stored, over %d: %w", n, max, omni.ErrCorrupt)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, int64(off)); err != nil {
		return nil, fmt.Errorf("shard %v: %w", shard, err)
	}
	return buf, nil
}

// entry reads the index entry lin of the shard f of size bytes; a chunk
// never written is (MaxUint64, 0).
func (sh *sharding) entry(f *os.File, size int64, lin int64) (uint64, uint64, error) {
	if size < sh.indexSize {
		return 0, 0, fmt.Errorf("shard of %d bytes, index of %d: %w", size, sh.indexSize, omni.ErrCorrupt)
	}
	at := int64(0)
	if sh.atEnd {
		at = size - sh.indexSize
	}
	ib := make([]byte, sh.indexSize)
	if _, err := f.ReadAt(ib, at); err != nil {
		return 0, 0, err
	}
	ib, err := decodeChain(sh.index, ib, int(16*sh.n), true)
	if err != nil {
		return 0, 0, fmt.Errorf("shard index: %w", err)
	}
	le := binary.LittleEndian
	off, n := le.Uint64(ib[16*lin:]), le.Uint64(ib[16*lin+8:])
	if off == math.MaxUint64 && n == math.MaxUint64 {
		return math.MaxUint64, 0, nil
	}
	if off > uint64(size) || n > uint64(size)-off {
		return 0, 0, fmt.Errorf("inner chunk at %d of %d bytes in a shard of %d: %w", off, n, size, omni.ErrCorrupt)
	}
	return off, n, nil
}
