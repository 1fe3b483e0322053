package blosc

import (
	"errors"
	"fmt"
)

var errBloscLZ = errors.New("blosclz stream")

// bloscLZFar is BloscLZ's MAX_DISTANCE: a 16-bit far distance counts
// from it.
const bloscLZFar = 8191

// decodeBloscLZ decodes a BloscLZ stream (FastLZ level 2 framing) into
// out and returns the bytes written. An instruction byte ctrl is a
// literal run of ctrl+1 bytes when ctrl < 32, else a match: its length
// is ctrl>>5 + 2 (7 in the top bits: 255-continued extra bytes follow),
// and its distance is (ctrl&31)<<8 + the next byte + 1, or, when those
// are 31 and 255, a big-endian 16-bit value + 8191 + 1. The first
// instruction is a literal run (its top 3 bits are the level).
func decodeBloscLZ(src, out []byte) (int, error) {
	if len(src) == 0 {
		return 0, nil
	}
	ip, op := 1, 0
	ctrl := int(src[0] & 31)
	for {
		if ctrl < 32 {
			n := ctrl + 1
			if op+n > len(out) || ip+n > len(src) {
				return op, fmt.Errorf("%w: literal of %d bytes at %d overruns", errBloscLZ, n, ip)
			}
			op += copy(out[op:], src[ip:ip+n])
			ip += n
		} else {
			var err error
			if ip, op, err = bloscLZMatch(src, out, ip, op, ctrl); err != nil {
				return op, err
			}
		}
		if ip >= len(src) {
			return op, nil
		}
		ctrl = int(src[ip])
		ip++
	}
}

// bloscLZMatch decodes the match whose instruction byte is ctrl, with
// ip just past ctrl, and copies it to out[op:].
func bloscLZMatch(src, out []byte, ip, op, ctrl int) (int, int, error) {
	n := ctrl>>5 - 1
	ofs := (ctrl & 31) << 8
	if n == 6 {
		for {
			if ip >= len(src) {
				return ip, op, fmt.Errorf("%w: match length past the end", errBloscLZ)
			}
			c := int(src[ip])
			ip++
			n += c
			if c != 255 {
				break
			}
		}
	}
	if ip >= len(src) {
		return ip, op, fmt.Errorf("%w: match distance past the end", errBloscLZ)
	}
	code := int(src[ip])
	ip++
	n += 3
	dist := ofs + code + 1
	if code == 255 && ofs == 31<<8 {
		if ip+2 > len(src) {
			return ip, op, fmt.Errorf("%w: far distance past the end", errBloscLZ)
		}
		dist = int(src[ip])<<8 + int(src[ip+1]) + bloscLZFar + 1
		ip += 2
	}
	if dist > op || op+n > len(out) {
		return ip, op, fmt.Errorf("%w: match of %d bytes at distance %d from %d overruns", errBloscLZ, n, dist, op)
	}
	for i := range n { // byte by byte: a match may overlap its own output
		out[op+i] = out[op-dist+i]
	}
	return ip, op + n, nil
}
