package blosc

import (
	"bytes"
	"errors"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// errTrailing: a stream decoded to more than its split's size.
var errTrailing = errors.New("stream longer than its split")

func decodeLZ4(src, out []byte) (int, error) { return lz4.UncompressBlock(src, out) }

func decodeSnappy(src, out []byte) (int, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return 0, err
	}
	if n != len(out) {
		return n, nil
	}
	_, err = s2.Decode(out, src)
	return n, err
}

func decodeZlib(src, out []byte) (int, error) {
	r, err := zlib.NewReader(bytes.NewReader(src))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	return readExact(r, out)
}

// zstdDec decodes zstd frames of at most maxZstd bytes, the bound a
// frame's declared content size is checked against before any output is
// allocated.
var zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(4), zstd.WithDecoderMaxMemory(maxZstd))

const maxZstd = 1 << 28

func decodeZstd(src, out []byte) (int, error) {
	var fh zstd.Header
	if err := fh.Decode(src); err != nil {
		return 0, err
	}
	if fh.HasFCS && fh.FrameContentSize != uint64(len(out)) {
		return int(min(fh.FrameContentSize, 1<<31)), nil
	}
	got, err := zstdDec.DecodeAll(src, out[:0])
	if err != nil {
		return 0, err
	}
	copy(out, got) // a no-op unless DecodeAll outgrew out
	return len(got), nil
}

// readExact fills out from r and checks r has nothing more.
func readExact(r io.Reader, out []byte) (int, error) {
	n, err := io.ReadFull(r, out)
	if err != nil {
		return n, err
	}
	var one [1]byte
	if m, _ := r.Read(one[:]); m > 0 {
		return n, errTrailing
	}
	return n, nil
}

func encodeLZ4(src, dst []byte) []byte {
	buf := make([]byte, lz4.CompressBlockBound(len(src)))
	n, err := lz4.CompressBlock(src, buf, nil)
	if err != nil || n == 0 {
		return nil
	}
	return append(dst, buf[:n]...)
}

func encodeZstd(src, dst []byte, level int) []byte {
	e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)), zstd.WithEncoderConcurrency(1))
	defer e.Close()
	return e.EncodeAll(src, dst)
}
