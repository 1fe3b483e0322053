package config

import (
	"strings"
	"testing"

	"github.com/iowarp/iowarp/bufferpool/files"
)

// TestCompressRules: `compress:` rules reach the file layer in order;
// bad ones are refused with file, line and key.
func TestCompressRules(t *testing.T) {
	c, err := Parse("c.yaml", []byte("compress:\n  - {glob: \"*.h5\", codec: zstd}\n  - {glob: \"logs/**\", codec: s2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := c.FilesOptions().Compress
	if len(got) != 2 || got[0] != (files.CompressRule{Glob: "*.h5", Codec: "zstd"}) || got[1].Codec != "s2" {
		t.Fatalf("rules %+v", got)
	}
	if len(Default().FilesOptions().Compress) != 0 {
		t.Fatal("default has rules")
	}
	for _, tc := range []struct{ yaml, want string }{
		{"compress:\n  - {glob: \"*.h5\", codec: gzip}\n", `c.yaml:2: compress[0].codec: "gzip" is not one of none, zstd, s2, lz4`},
		{"compress:\n  - {codec: lz4}\n", `c.yaml:2: compress[0].glob: every compress rule needs a glob`},
		{"compress:\n  - {glob: \"[\", codec: lz4}\n", `c.yaml:2: compress[0].glob: "[" is not a glob`},
		{"compress:\n  - {glob: a}\n", `c.yaml:2: compress[0].codec: every compress rule needs a codec`},
		{"compress: zstd\n", `c.yaml:1: compress: expected a list`},
		{"compress:\n  - {glob: a, codec: lz4, level: 3}\n", `c.yaml:2: compress[0].level: unknown key`},
	} {
		if _, err := Parse("c.yaml", []byte(tc.yaml)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.yaml, err, tc.want)
		}
	}
}
