package blosc

import (
	"encoding/binary"
	"fmt"
)

// Options says how Compress encodes.
type Options struct {
	CName    string // "lz4" or "zstd"
	Level    int    // 1-9, Blosc's clevel (zstd level 2*clevel-1)
	TypeSize int    // element size, 1-255
	Shuffle  bool   // byte shuffle (ignored for TypeSize 1)
}

// blockTarget is the block size Compress aims at.
const blockTarget = 256 << 10

// Compress encodes src as a Blosc 1.x frame (format version 2, one
// stream per block, the frame memcpyed if it does not compress).
func Compress(src []byte, o Options) ([]byte, error) {
	code, ok := CodecCode(o.CName)
	if !ok || (code != CodeLZ4 && code != CodeZstd) {
		return nil, fmt.Errorf("blosc writes lz4 or zstd, not %q: %w", o.CName, ErrNotSupported)
	}
	if o.TypeSize < 1 || o.TypeSize > 255 || len(src) > maxBuffer {
		return nil, fmt.Errorf("typesize %d, %d bytes: %w", o.TypeSize, len(src), ErrNotSupported)
	}
	ts := o.TypeSize
	flags := byte(code<<5) | FlagDontSplit
	if o.Shuffle && ts > 1 {
		flags |= FlagShuffle
	}
	bsize := blockSize(len(src), ts)
	nblocks := 0
	if bsize > 0 {
		nblocks = (len(src) + bsize - 1) / bsize
	}
	out := make([]byte, HeaderSize+4*nblocks, HeaderSize+4*nblocks+len(src)/2)
	tmp := make([]byte, bsize)
	for i := range nblocks {
		blk := src[i*bsize : min((i+1)*bsize, len(src))]
		binary.LittleEndian.PutUint32(out[HeaderSize+4*i:], uint32(len(out)))
		out = appendBlock(out, blk, tmp[:len(blk)], flags, ts, code, o.Level)
		if len(out) >= HeaderSize+len(src) {
			return memcpyed(src, ts, bsize), nil
		}
	}
	putHeader(out, flags, ts, len(src), bsize, len(out))
	return out, nil
}

func blockSize(n, ts int) int {
	if n <= blockTarget {
		return n
	}
	return max(blockTarget/ts*ts, ts)
}

// appendBlock appends one block as a single stream, raw if it does not
// compress.
func appendBlock(out, blk, tmp []byte, flags byte, ts, code, level int) []byte {
	data := blk
	if flags&FlagShuffle != 0 {
		shuffle(ts, blk, tmp)
		data = tmp
	}
	at := len(out)
	out = append(out, 0, 0, 0, 0)
	switch code {
	case CodeLZ4:
		out = encodeLZ4(data, out)
	case CodeZstd:
		out = encodeZstd(data, out, max(1, 2*level-1))
	}
	if n := len(out) - at - 4; n > 0 && n < len(data) {
		binary.LittleEndian.PutUint32(out[at:], uint32(n))
		return out
	}
	out = append(out[:at+4], data...)
	binary.LittleEndian.PutUint32(out[at:], uint32(len(data)))
	return out
}

func memcpyed(src []byte, ts, bsize int) []byte {
	out := make([]byte, HeaderSize, HeaderSize+len(src))
	out = append(out, src...)
	putHeader(out, FlagMemcpyed|FlagDontSplit, ts, len(src), bsize, len(out))
	return out
}

func putHeader(out []byte, flags byte, ts, nbytes, bsize, cbytes int) {
	out[0], out[1], out[2], out[3] = 2, 1, flags, byte(ts)
	le := binary.LittleEndian
	le.PutUint32(out[4:], uint32(nbytes))
	le.PutUint32(out[8:], uint32(bsize))
	le.PutUint32(out[12:], uint32(cbytes))
}
