package blosc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const python = "/usr/bin/python3"

func needNumcodecs(t *testing.T) {
	t.Helper()
	if exec.Command(python, "-c", "import numcodecs, numpy").Run() != nil {
		t.Skip("python3-numcodecs missing (make deps)")
	}
}

// numcodecsScript writes, for each codec, shuffle mode, dtype and block
// size, NAME.raw (the array's bytes) and NAME.blosc (numcodecs.Blosc's
// frame), and checks that every go_*.blosc decodes to its go_*.raw.
const numcodecsScript = `
import sys, os, glob, numpy as np, numcodecs
out = sys.argv[1]
for p in glob.glob(os.path.join(out, "go_*.blosc")):
    want = open(p[:-6] + ".raw", "rb").read()
    try:
        got = numcodecs.Blosc().decode(open(p, "rb").read())
    except Exception as e:
        raise SystemExit("%s: %s" % (p, e))
    assert bytes(got) == want, p
rng = np.random.default_rng(7)
arrays = {
    "u1": (rng.integers(0, 7, 100003)).astype("u1"),
    "i2": (np.arange(70001) // 3).astype("<i2"),
    "f4": np.sin(np.arange(50001) / 50).astype("<f4"),
    "f8": np.cumsum(rng.normal(size=40000)).astype("<f8"),
    "S24": np.array(["v%d" % (i % 977) for i in range(9000)], dtype="S24"),
    "tiny": np.arange(5, dtype="<i4"),
    "noise": rng.integers(0, 2**63, 3000, dtype="<u8"),
}
for cname in ["blosclz", "lz4", "lz4hc", "zlib", "zstd", "snappy"]:
    if cname not in numcodecs.blosc.list_compressors():
        continue
    for shuf in (0, 1, 2):
        for bs in (0, 4096):
            for name, a in arrays.items():
                c = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuf, blocksize=bs)
                k = "%s_%d_%d_%s" % (cname, shuf, bs, name)
                open(os.path.join(out, k + ".raw"), "wb").write(a.tobytes())
                open(os.path.join(out, k + ".blosc"), "wb").write(c.encode(a))
`

// TestNumcodecs: every frame numcodecs.Blosc writes (blosclz, lz4, lz4hc,
// zlib, zstd, snappy; no shuffle, shuffle, bitshuffle; automatic and
// 4 KiB blocks; 1- to 24-byte types, short last blocks) decodes to the
// array's bytes, and numcodecs decodes what Compress writes.
func TestNumcodecs(t *testing.T) {
	needNumcodecs(t)
	dir := t.TempDir()
	src := make([]byte, 300001)
	for i := range src {
		src[i] = byte(i / 100 * 7)
	}
	f8 := make([]byte, 8*20000)
	for i := range 20000 {
		binary.LittleEndian.PutUint64(f8[8*i:], math.Float64bits(math.Sqrt(float64(i))))
	}
	for _, o := range []struct {
		name string
		raw  []byte
		opt  Options
	}{
		{"lz4s", f8, Options{CName: "lz4", Level: 5, TypeSize: 8, Shuffle: true}},
		{"zstds", f8, Options{CName: "zstd", Level: 3, TypeSize: 8, Shuffle: true}},
		{"lz4", src, Options{CName: "lz4", Level: 5, TypeSize: 1}},
		{"zstd", src, Options{CName: "zstd", Level: 9, TypeSize: 4, Shuffle: true}},
		{"empty", nil, Options{CName: "lz4", Level: 5, TypeSize: 4}},
		{"noise", []byte("\x01\x9f\x33\xe0\x7a"), Options{CName: "zstd", Level: 5, TypeSize: 1}},
	} {
		b, err := Compress(o.raw, o.opt)
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		back, err := Decompress(b, len(o.raw))
		if err != nil || !bytes.Equal(back, o.raw) {
			t.Fatalf("%s: round trip: %v", o.name, err)
		}
		if len(o.raw) == 0 {
			continue // numcodecs itself fails on empty frames
		}
		writeFile(t, filepath.Join(dir, "go_"+o.name+".blosc"), b)
		writeFile(t, filepath.Join(dir, "go_"+o.name+".raw"), o.raw)
	}
	if out, err := exec.Command(python, "-c", numcodecsScript, dir).CombinedOutput(); err != nil {
		t.Fatalf("numcodecs: %v\n%s", err, out)
	}
	frames, _ := filepath.Glob(filepath.Join(dir, "*.blosc"))
	n := 0
	for _, p := range frames {
		if strings.HasPrefix(filepath.Base(p), "go_") {
			continue
		}
		frame, _ := os.ReadFile(p)
		want, _ := os.ReadFile(strings.TrimSuffix(p, ".blosc") + ".raw")
		got, err := Decompress(frame, len(want))
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: decoded bytes differ", filepath.Base(p))
		}
		n++
	}
	if n < 200 {
		t.Fatalf("only %d numcodecs frames checked", n)
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMalformed: broken headers and streams give a clear error.
func TestMalformed(t *testing.T) {
	good, err := Compress(bytes.Repeat([]byte("abcdefgh"), 1000), Options{CName: "lz4", Level: 5, TypeSize: 8, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	le := binary.LittleEndian
	for _, c := range []struct {
		name, want string
		frame      []byte
		sentinel   error
	}{
		{"short", "shorter than a header", good[:9], ErrCorrupt},
		{"truncated", "cbytes", good[:len(good)-1], ErrCorrupt},
		{"version", "format version", mod(func(b []byte) []byte { b[0] = 9; return b }), ErrNotSupported},
		{"blosc2 extended", "extended header", mod(func(b []byte) []byte { b[2] |= FlagBitShuffle; return b }), ErrNotSupported},
		{"over cap", "over the cap", mod(func(b []byte) []byte { le.PutUint32(b[4:], 1<<30); return b }), ErrCorrupt},
		{"negative nbytes", "nbytes", mod(func(b []byte) []byte { le.PutUint32(b[4:], 1<<31); return b }), ErrCorrupt},
		{"zero blocksize", "blocksize 0", mod(func(b []byte) []byte { le.PutUint32(b[8:], 0); return b }), ErrCorrupt},
		{"block start", "block 0 starts", mod(func(b []byte) []byte { le.PutUint32(b[16:], 3); return b }), ErrCorrupt},
		{"split length", "compressed bytes", mod(func(b []byte) []byte { le.PutUint32(b[20:], 1<<20); return b }), ErrCorrupt},
		{"stream", "lz4", mod(func(b []byte) []byte { b[26] ^= 0xff; b[27] ^= 0xff; return b }), ErrCorrupt},
		{"codec", "codec code 6", mod(func(b []byte) []byte { b[2] = b[2]&31 | 6<<5; return b }), ErrNotSupported},
		{"typesize", "typesize 0", mod(func(b []byte) []byte { b[3] = 0; return b }), ErrCorrupt},
		{"memcpyed size", "memcpyed", mod(func(b []byte) []byte { b[2] |= FlagMemcpyed; return b }), ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decompress(c.frame, 1<<20)
			if err == nil || got != nil {
				t.Fatalf("no error (%d bytes)", len(got))
			}
			if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want %q wrapping %v", err, c.want, c.sentinel)
			}
		})
	}
}

// TestCapBeforeAlloc: a header declaring 2 GiB is refused before the
// output is allocated.
func TestCapBeforeAlloc(t *testing.T) {
	h := make([]byte, 64)
	h[0], h[1], h[2], h[3] = 2, 1, FlagDontSplit, 1
	binary.LittleEndian.PutUint32(h[4:], maxBuffer)
	binary.LittleEndian.PutUint32(h[8:], maxBuffer)
	binary.LittleEndian.PutUint32(h[12:], 64)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Decompress(h, 1<<20)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("no error")
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes for a refused frame", d)
	}
}

// TestShuffleInverse: bitShuffle and shuffle invert their unshuffles.
func TestShuffleInverse(t *testing.T) {
	for _, ts := range []int{1, 2, 3, 8, 24} {
		src := make([]byte, ts*64+5)
		for i := range src {
			src[i] = byte(i*131 + i>>3)
		}
		a, b, s := make([]byte, len(src)), make([]byte, len(src)), make([]byte, len(src))
		shuffle(ts, src, a)
		unshuffle(ts, a, b)
		if !bytes.Equal(b, src) {
			t.Fatalf("typesize %d: shuffle not inverted", ts)
		}
		bitShuffle(ts, src, a)
		bitUnshuffle(ts, a, b, s)
		if !bytes.Equal(b, src) {
			t.Fatalf("typesize %d: bitshuffle not inverted", ts)
		}
	}
}
