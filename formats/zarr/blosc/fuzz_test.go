package blosc

import (
	"bytes"
	"testing"
)

// fuzzCap bounds the decoded size FuzzBlosc lets a header declare.
const fuzzCap = 1 << 20

// FuzzBlosc: a Blosc frame is chunk bytes anyone who can write the store
// wrote. No panic; an error returns nothing; a decoded frame is exactly
// the header's nbytes, never over the cap; a frame Compress wrote
// decodes to its input.
func FuzzBlosc(f *testing.F) {
	raw := bytes.Repeat([]byte("zarr blosc frame 0123456789"), 100)
	for _, o := range []Options{
		{CName: "lz4", Level: 5, TypeSize: 4, Shuffle: true},
		{CName: "zstd", Level: 3, TypeSize: 8, Shuffle: true},
		{CName: "lz4", Level: 1, TypeSize: 1},
	} {
		b, _ := Compress(raw, o)
		f.Add(b, uint8(o.TypeSize))
	}
	// blosclz, split into 4, a literal then a run (numcodecs' encoding
	// of 64 zero bytes of int32).
	f.Add([]byte("\x02\x01\x05\x04\x40\x00\x00\x00\x40\x00\x00\x00\x30\x00\x00\x00\x14\x00\x00\x00"+
		"\x04\x00\x00\x00\x00\x00\xe0\x05\x04\x00\x00\x00\x00\x00\xe0\x05\x04\x00\x00\x00\x00\x00\xe0\x05"), uint8(4))
	f.Fuzz(func(t *testing.T, frame []byte, ts uint8) {
		out, err := Decompress(frame, fuzzCap)
		if err != nil {
			if out != nil {
				t.Fatalf("error %v with %d bytes", err, len(out))
			}
			return
		}
		h, _ := ParseHeader(frame)
		if len(out) != h.NBytes || len(out) > fuzzCap {
			t.Fatalf("%d bytes decoded, header says %d", len(out), h.NBytes)
		}
		if ts == 0 || len(frame) > fuzzCap {
			return
		}
		b, err := Compress(frame, Options{CName: []string{"lz4", "zstd"}[ts%2], Level: 5, TypeSize: int(ts), Shuffle: ts%3 == 0})
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Decompress(b, len(frame)); err != nil || !bytes.Equal(back, frame) {
			t.Fatalf("round trip of %d bytes: %v", len(frame), err)
		}
	})
}
