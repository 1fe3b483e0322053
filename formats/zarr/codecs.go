package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/zarr/blosc"
)

// bytesCodec decodes one bytes-to-bytes stage of a chunk: src to at most
// max bytes.
type bytesCodec struct {
	name   string
	decode func(src []byte, max int) ([]byte, error)
}

// codecSlack is what a decode stage may produce beyond the chunk size
// (a crc32c checksum still to strip, for instance).
const codecSlack = 64

// bytesCodecFor returns the decoder of a Zarr v2 compressor id or a Zarr
// v3 bytes-to-bytes codec name.
func bytesCodecFor(name string) (bytesCodec, error) {
	var d func([]byte, int) ([]byte, error)
	switch name {
	case "blosc":
		d = decodeBlosc
	case "zlib":
		d = streamDecoder(func(r io.Reader) (io.ReadCloser, error) { return zlib.NewReader(r) })
	case "gzip":
		d = streamDecoder(func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) })
	case "zstd":
		d = streamDecoder(newZstd)
	case "lz4":
		d = decodeLZ4
	case "crc32c":
		d = decodeCRC32C
	default:
		return bytesCodec{}, fmt.Errorf("codec %q: %w", name, omni.ErrNotSupported)
	}
	return bytesCodec{name: name, decode: d}, nil
}

func newZstd(r io.Reader) (io.ReadCloser, error) {
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// streamDecoder reads a stream whole, refusing one longer than max.
func streamDecoder(open func(io.Reader) (io.ReadCloser, error)) func([]byte, int) ([]byte, error) {
	return func(src []byte, max int) ([]byte, error) {
		r, err := open(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		var out bytes.Buffer
		n, err := io.Copy(&out, io.LimitReader(r, int64(max)+1))
		if err != nil {
			return nil, err
		}
		if n > int64(max) {
			return nil, fmt.Errorf("decodes to over %d bytes", max)
		}
		return out.Bytes(), nil
	}
}

func decodeBlosc(src []byte, max int) ([]byte, error) {
	out, err := blosc.Decompress(src, max)
	if errors.Is(err, blosc.ErrNotSupported) {
		return nil, fmt.Errorf("blosc: %w: %v", omni.ErrNotSupported, err)
	}
	return out, err
}

// decodeLZ4 reads numcodecs' LZ4: a little-endian uint32 decoded size,
// then an LZ4 block.
func decodeLZ4(src []byte, max int) ([]byte, error) {
	if len(src) < 4 {
		return nil, errors.New("lz4: no size")
	}
	n := binary.LittleEndian.Uint32(src)
	if int64(n) > int64(max) {
		return nil, fmt.Errorf("lz4: size %d over %d", n, max)
	}
	out := make([]byte, n)
	m, err := lz4.UncompressBlock(src[4:], out)
	if err != nil || m != int(n) {
		return nil, fmt.Errorf("lz4: %d of %d bytes: %v", m, n, err)
	}
	return out, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decodeCRC32C checks and strips the little-endian CRC-32C that Zarr
// v3's crc32c codec appends.
func decodeCRC32C(src []byte, _ int) ([]byte, error) {
	if len(src) < 4 {
		return nil, errors.New("crc32c: no checksum")
	}
	body := src[:len(src)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(src[len(body):]); got != want {
		return nil, fmt.Errorf("crc32c: checksum %08x, stored %08x", got, want)
	}
	return body, nil
}

// decodeChain applies codecs (in decoding order) to src and checks the
// result is want bytes (at least want when exact is false: a Zarr v2
// uncompressed chunk may be longer).
func decodeChain(codecs []bytesCodec, src []byte, want int, exact bool) ([]byte, error) {
	var err error
	for _, c := range codecs {
		if src, err = c.decode(src, want+codecSlack); err != nil {
			if errors.Is(err, omni.ErrNotSupported) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w: %v", c.name, omni.ErrCorrupt, err)
		}
	}
	if len(src) < want || (exact && len(src) != want) {
		return nil, fmt.Errorf("%d bytes decoded, want %d: %w", len(src), want, omni.ErrCorrupt)
	}
	return src[:want], nil
}
