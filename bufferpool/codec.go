package bufferpool

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression codecs a bucket can ask for (Bucket.SetCompress,
// BucketOptions.Compress). CompressNone stores blobs as they are.
const (
	CompressNone = "none"
	CompressZstd = "zstd"
	CompressS2   = "s2"
	CompressLZ4  = "lz4"
)

// Codecs lists the codec names SetCompress takes ("" is CompressNone).
func Codecs() []string { return []string{CompressNone, CompressZstd, CompressS2, CompressLZ4} }

// codec compresses one chunk of a blob at a time. Safe for concurrent use.
type codec interface {
	name() string
	// encode appends the compressed src to dst[:0]; ok false when it
	// would not be smaller than src (then the chunk is stored raw).
	encode(dst, src []byte) (out []byte, ok bool)
	// decode fills dst (exactly len(dst) bytes) from src.
	decode(dst, src []byte) error
}

// codecByName returns the codec called name (nil for none).
func codecByName(name string) (codec, error) {
	switch name {
	case "", CompressNone:
		return nil, nil
	case CompressZstd:
		return zstdCodec{}, nil
	case CompressS2:
		return s2Codec{}, nil
	case CompressLZ4:
		return lz4Codec{}, nil
	}
	return nil, fmt.Errorf("compress %q: not one of %s: %w", name, strings.Join(Codecs(), ", "), ErrInvalid)
}

// ValidCompress reports whether name is a codec SetCompress takes.
func ValidCompress(name string) bool { return name == "" || slices.Contains(Codecs(), name) }

var errShortDecode = fmt.Errorf("decoded length differs")

// zstd at its default level (ratio 2.81 against 2.33 at SpeedFastest on an
// HDF5 checkpoint in 64 KiB chunks; s2 and lz4 are there for speed).
var (
	zstdOnce sync.Once
	zstdEnc  *zstd.Encoder
	zstdDec  *zstd.Decoder
)

func zstdInit() {
	zstdOnce.Do(func() {
		var err error
		zstdEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
		if err != nil {
			panic(err) // only for bad options
		}
		zstdDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.IgnoreChecksum(true))
		if err != nil {
			panic(err)
		}
	})
}

type zstdCodec struct{}

func (zstdCodec) name() string { return CompressZstd }
func (zstdCodec) encode(dst, src []byte) ([]byte, bool) {
	zstdInit()
	out := zstdEnc.EncodeAll(src, dst[:0])
	return out, len(out) < len(src)
}
func (zstdCodec) decode(dst, src []byte) error {
	zstdInit()
	out, err := zstdDec.DecodeAll(src, dst[:0])
	if err != nil {
		return err
	}
	if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return errShortDecode
	}
	return nil
}

type s2Codec struct{}

func (s2Codec) name() string { return CompressS2 }
func (s2Codec) encode(dst, src []byte) ([]byte, bool) {
	if n := s2.MaxEncodedLen(len(src)); cap(dst) < n {
		dst = make([]byte, n)
	}
	out := s2.Encode(dst[:cap(dst)], src)
	return out, len(out) < len(src)
}
func (s2Codec) decode(dst, src []byte) error {
	if n, err := s2.DecodedLen(src); err != nil || n != len(dst) {
		return fmt.Errorf("s2: %w", errShortDecode)
	}
	_, err := s2.Decode(dst, src)
	return err
}

type lz4Codec struct{}

// lz4Compressors: a Compressor holds its hash table (64 KiB).
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.Compressor) }}

func (lz4Codec) name() string { return CompressLZ4 }
func (lz4Codec) encode(dst, src []byte) ([]byte, bool) {
	if n := lz4.CompressBlockBound(len(src)); cap(dst) < n {
		dst = make([]byte, n)
	}
	c := lz4Compressors.Get().(*lz4.Compressor)
	n, err := c.CompressBlock(src, dst[:cap(dst)])
	lz4Compressors.Put(c)
	if err != nil || n == 0 || n >= len(src) {
		return nil, false
	}
	return dst[:n], true
}
func (lz4Codec) decode(dst, src []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return err
	}
	if n != len(dst) {
		return errShortDecode
	}
	return nil
}
