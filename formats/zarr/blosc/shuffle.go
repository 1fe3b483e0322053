package blosc

// shuffle groups the bytes of ts-byte elements by byte position (Blosc's
// shuffle): byte j of element i goes to j*n+i, n = len(src)/ts; the
// len(src)%ts trailing bytes are copied as they are.
func shuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	for j := range ts {
		for i := range n {
			dst[j*n+i] = src[i*ts+j]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// unshuffle is the inverse of shuffle.
func unshuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	for j := range ts {
		row := src[j*n : (j+1)*n]
		for i, b := range row {
			dst[i*ts+j] = b
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitUnshuffle undoes bitshuffle's bit transpose (bshuf_trans_bit_elem)
// of n = len(src)/ts elements: bit k of byte j of element i is bit i%8
// of byte i/8 of row j*8+k, each row n/8 bytes. Blosc 1.x bit-shuffles
// a block only when n is a multiple of 8 and copies it otherwise; bytes
// past n*ts are copied as they are.
func bitUnshuffle(ts int, src, dst, _ []byte) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	clear(dst[:n*ts])
	rowBytes := n / 8
	for j := range ts {
		for k := range 8 {
			row := src[(j*8+k)*rowBytes : (j*8+k+1)*rowBytes]
			bit := byte(1) << k
			for q, b := range row {
				if b == 0 {
					continue
				}
				for m := range 8 {
					if b&(1<<m) != 0 {
						dst[(q*8+m)*ts+j] |= bit
					}
				}
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitShuffle is the inverse of bitUnshuffle (used by tests and by
// Compress with BitShuffle).
func bitShuffle(ts int, src, dst []byte) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	clear(dst[:n*ts])
	rowBytes := n / 8
	for i := range n {
		for j := range ts {
			b := src[i*ts+j]
			for k := range 8 {
				if b&(1<<k) != 0 {
					dst[(j*8+k)*rowBytes+i/8] |= 1 << (i % 8)
				}
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}
