package client

// cachedChunk bounds one copy so that it stays in the cache. Go's memmove
// switches to non-temporal stores from 1 MiB on amd64: the destination then
// goes to DRAM, and the daemon's copy of it into the tier (or the caller's
// first read of a Get) reads it back from there: 2x slower in total than
// two cached copies (client/bench.go measures it).
const cachedChunk = 512 << 10

// copyCached is copy(dst, src) in pieces the cache keeps.
func copyCached(dst, src []byte) int {
	n := min(len(dst), len(src))
	for off := 0; off < n; off += cachedChunk {
		end := min(off+cachedChunk, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}
