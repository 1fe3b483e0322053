package files

import (
	"bytes"
	"os"
	"testing"
)

func TestCompressRuleMatch(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"*.h5", "run/1/ckpt.h5", true},
		{"*.h5", "ckpt.h5", true},
		{"*.h5", "ckpt.h5.bak", false},
		{"run/*/ckpt*", "run/1/ckpt.h5", true},
		{"run/*/ckpt*", "run/1/2/ckpt.h5", false},
		{"run/**", "run/1/2/ckpt.h5", true},
		{"run/**", "run", false},
		{"run/**", "other/run/x", false},
		{"run/**", "/run/x", true},
	}
	for _, c := range cases {
		if got := (CompressRule{Glob: c.glob, Codec: "zstd"}).match(c.path); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	if err := checkCompressRules([]CompressRule{{Glob: "[", Codec: "zstd"}}); err == nil {
		t.Error("bad glob accepted")
	}
	if err := checkCompressRules([]CompressRule{{Glob: "*", Codec: "gzip"}}); err == nil {
		t.Error("bad codec accepted")
	}
}

// TestCompressRulesApply: pages of the files a rule names are compressed
// when they move to the file tier, others are not; both read back.
func TestCompressRulesApply(t *testing.T) {
	fs := newTestFS(t, Writeback, 16*testPage, 32*testPage, func(o *Options) {
		o.Compress = []CompressRule{{Glob: "*.h5", Codec: "lz4"}}
	})
	text := bytes.Repeat([]byte("temperature 273.15 pressure 101325 step "), 4*testPage/40+1)[:4*testPage]
	for _, name := range []string{"a.h5", "b.dat"} {
		h := mustOpen(t, fs, name, os.O_RDWR|os.O_CREATE)
		if _, err := h.WriteAt(text, 0); err != nil {
			t.Fatal(err)
		}
		if err := h.Fsync(false); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	fs.pool.Shed(0)
	fs.pool.Unshed()
	st := fs.pool.Stats().Tiers[1]
	if st.Compressed != 4 || st.Checksummed != 8 || st.SavedBytes < 2*testPage {
		t.Fatalf("file tier: %+v", st)
	}
	for _, name := range []string{"a.h5", "b.dat"} {
		h := mustOpen(t, fs, name, os.O_RDONLY)
		if got := readAll(t, h); !bytes.Equal(got, text) {
			t.Fatalf("%s reads back wrong", name)
		}
		h.Release()
	}
}
