// Package blosc reads and writes the Blosc 1.x container format (what
// numcodecs.Blosc and zarr-python write), in pure Go.
//
// A frame is a 16-byte header (version, versionlz, flags, typesize, then
// little-endian int32 nbytes, blocksize and cbytes), then, unless the
// frame is memcpyed (the data follows the header raw), one int32 start
// offset per block, then the blocks. A block is one stream, or typesize
// streams (splits) when the flags do not carry the don't-split bit and
// the block is not the short last one; each stream is an int32 length
// then the compressed bytes (or the raw bytes when the length equals the
// stream's decoded size). A block is byte-shuffled (flag 0x1) or
// bit-shuffled (flag 0x4) before it is compressed.
//
// Codecs read: blosclz (a decoder written here from the format), lz4 and
// lz4hc (pierrec/lz4), snappy (klauspost s2), zlib and zstd (klauspost).
// Codecs written: lz4 and zstd, with or without byte shuffle.
//
// Decompress never allocates more than the header's nbytes (bounded by
// the caller's cap) for the output and one block for scratch, and returns
// an error wrapping ErrCorrupt for any malformed frame. Functions here
// are safe for concurrent use.
package blosc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCorrupt is wrapped by every error about a malformed frame.
var ErrCorrupt = errors.New("corrupt blosc frame")

// ErrNotSupported is wrapped by errors about valid frames this package
// cannot decode (Blosc2 extended headers, unknown codecs).
var ErrNotSupported = errors.New("not supported")

// Header flags.
const (
	FlagShuffle    = 0x1  // byte shuffle
	FlagMemcpyed   = 0x2  // data stored raw after the header
	FlagBitShuffle = 0x4  // bit shuffle
	FlagDontSplit  = 0x10 // one stream per block
)

// Codec codes, the top 3 bits of the flags.
const (
	CodeBloscLZ = 0
	CodeLZ4     = 1
	CodeSnappy  = 2
	CodeZlib    = 3
	CodeZstd    = 4
)

// HeaderSize is the size of a Blosc 1.x header.
const HeaderSize = 16

// maxBuffer is Blosc's BLOSC_MAX_BUFFERSIZE.
const maxBuffer = 1<<31 - 1 - HeaderSize

// Header is a frame's header.
type Header struct {
	Version, VersionLZ, Flags, TypeSize byte
	NBytes, BlockSize, CBytes           int
}

// Codec is the codec code in the flags.
func (h Header) Codec() int { return int(h.Flags >> 5) }

// ParseHeader decodes and checks the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%d bytes, shorter than a header: %w", len(b), ErrCorrupt)
	}
	le := binary.LittleEndian
	h := Header{Version: b[0], VersionLZ: b[1], Flags: b[2], TypeSize: b[3],
		NBytes: int(int32(le.Uint32(b[4:]))), BlockSize: int(int32(le.Uint32(b[8:]))), CBytes: int(int32(le.Uint32(b[12:])))}
	switch {
	case h.Version == 0 || h.Version > 4:
		return h, fmt.Errorf("format version %d: %w", h.Version, ErrNotSupported)
	case h.Flags&(FlagShuffle|FlagBitShuffle) == FlagShuffle|FlagBitShuffle:
		return h, fmt.Errorf("flags %#x (a Blosc2 extended header): %w", h.Flags, ErrNotSupported)
	case h.NBytes < 0 || h.NBytes > maxBuffer || h.CBytes < HeaderSize:
		return h, fmt.Errorf("nbytes %d, cbytes %d: %w", h.NBytes, h.CBytes, ErrCorrupt)
	case h.CBytes > len(b):
		return h, fmt.Errorf("cbytes %d in a frame of %d bytes: %w", h.CBytes, len(b), ErrCorrupt)
	case h.TypeSize == 0:
		return h, fmt.Errorf("typesize 0: %w", ErrCorrupt)
	case h.NBytes > 0 && h.Flags&FlagMemcpyed == 0 && h.BlockSize <= 0:
		return h, fmt.Errorf("blocksize %d: %w", h.BlockSize, ErrCorrupt)
	}
	return h, nil
}

// Decompress decodes the frame src. maxBytes caps the decoded size the
// header may declare.
func Decompress(src []byte, maxBytes int) ([]byte, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return nil, err
	}
	if h.NBytes > maxBytes {
		return nil, fmt.Errorf("nbytes %d over the cap %d: %w", h.NBytes, maxBytes, ErrCorrupt)
	}
	src = src[:h.CBytes]
	dst := make([]byte, h.NBytes)
	if h.NBytes == 0 {
		return dst, nil
	}
	if h.Flags&FlagMemcpyed != 0 {
		if h.CBytes != HeaderSize+h.NBytes {
			return nil, fmt.Errorf("memcpyed frame of cbytes %d for nbytes %d: %w", h.CBytes, h.NBytes, ErrCorrupt)
		}
		copy(dst, src[HeaderSize:])
		return dst, nil
	}
	if err := decodeBlocks(h, src, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// decodeBlocks decodes every block of a frame that is not memcpyed.
func decodeBlocks(h Header, src, dst []byte) error {
	bsize := min(h.BlockSize, h.NBytes)
	nblocks := h.NBytes / bsize
	leftover := h.NBytes % bsize
	if leftover > 0 {
		nblocks++
	}
	first := HeaderSize + 4*nblocks
	if first > len(src) {
		return fmt.Errorf("%d block offsets in a frame of %d bytes: %w", nblocks, len(src), ErrCorrupt)
	}
	scratch := make([]byte, 2*bsize)
	for i := range nblocks {
		start := int(binary.LittleEndian.Uint32(src[HeaderSize+4*i:]))
		if start < first || start >= len(src) {
			return fmt.Errorf("block %d starts at %d, outside [%d, %d): %w", i, start, first, len(src), ErrCorrupt)
		}
		n, short := bsize, false
		if i == nblocks-1 && leftover > 0 {
			n, short = leftover, true
		}
		if err := decodeBlock(h, src, start, short, dst[i*bsize:i*bsize+n], scratch); err != nil {
			return fmt.Errorf("block %d: %w", i, err)
		}
	}
	return nil
}

// decodeBlock decodes the block at src[off:] into out (its decoded size).
func decodeBlock(h Header, src []byte, off int, short bool, out, scratch []byte) error {
	ts := int(h.TypeSize)
	shuffle := h.Flags&FlagShuffle != 0 && ts > 1
	bitShuffle := h.Flags&FlagBitShuffle != 0 && len(out) >= ts
	buf := out
	if shuffle || bitShuffle {
		buf = scratch[:len(out)]
	}
	nsplits := 1
	if h.Flags&FlagDontSplit == 0 && !short {
		nsplits = ts
	}
	if len(out)%nsplits != 0 {
		return fmt.Errorf("%d bytes in %d splits: %w", len(out), nsplits, ErrCorrupt)
	}
	sn := len(out) / nsplits
	for j := range nsplits {
		if off+4 > len(src) {
			return fmt.Errorf("split %d: length past the frame end: %w", j, ErrCorrupt)
		}
		cb := int(int32(binary.LittleEndian.Uint32(src[off:])))
		off += 4
		if cb < 0 || cb > len(src)-off {
			return fmt.Errorf("split %d: %d compressed bytes, %d left: %w", j, cb, len(src)-off, ErrCorrupt)
		}
		if err := decodeSplit(h.Codec(), src[off:off+cb], buf[j*sn:(j+1)*sn]); err != nil {
			return fmt.Errorf("split %d: %w", j, err)
		}
		off += cb
	}
	switch {
	case shuffle:
		unshuffle(ts, buf, out)
	case bitShuffle:
		bitUnshuffle(ts, buf, out, scratch[len(out):2*len(out)])
	}
	return nil
}

// decodeSplit decodes one stream into out, which it must fill exactly.
func decodeSplit(code int, src, out []byte) error {
	if len(src) == len(out) {
		copy(out, src)
		return nil
	}
	var n int
	var err error
	switch code {
	case CodeBloscLZ:
		n, err = decodeBloscLZ(src, out)
	case CodeLZ4:
		n, err = decodeLZ4(src, out)
	case CodeSnappy:
		n, err = decodeSnappy(src, out)
	case CodeZlib:
		n, err = decodeZlib(src, out)
	case CodeZstd:
		n, err = decodeZstd(src, out)
	default:
		return fmt.Errorf("codec code %d: %w", code, ErrNotSupported)
	}
	if err != nil {
		return fmt.Errorf("%s: %w: %v", codecName(code), ErrCorrupt, err)
	}
	if n != len(out) {
		return fmt.Errorf("%s: %d bytes decoded, want %d: %w", codecName(code), n, len(out), ErrCorrupt)
	}
	return nil
}

func codecName(code int) string {
	names := []string{"blosclz", "lz4", "snappy", "zlib", "zstd"}
	if code < len(names) {
		return names[code]
	}
	return fmt.Sprintf("codec %d", code)
}

// CodecCode is the code of a numcodecs cname ("lz4hc" is lz4's code).
func CodecCode(cname string) (int, bool) {
	switch cname {
	case "blosclz":
		return CodeBloscLZ, true
	case "lz4", "lz4hc":
		return CodeLZ4, true
	case "snappy":
		return CodeSnappy, true
	case "zlib":
		return CodeZlib, true
	case "zstd":
		return CodeZstd, true
	}
	return 0, false
}
