package files

import (
	"fmt"
	"path"
	"strings"

	"github.com/iowarp/iowarp/bufferpool"
)

// CompressRule gives the files whose mount-relative path matches Glob
// the codec Codec (bufferpool.Codecs) for their pages on slower tiers. A
// glob without "/" matches the base name; one with "/" the whole path
// (path.Match: "*" does not cross "/"), where a final "/**" matches
// everything below the directory before it.
type CompressRule struct {
	Glob  string
	Codec string
}

// match reports whether the rule applies to the mount-relative path p.
func (r CompressRule) match(p string) bool {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if dir, ok := strings.CutSuffix(r.Glob, "/**"); ok {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if m, _ := path.Match(dir, d); m {
				return true
			}
		}
		return false
	}
	if !strings.Contains(r.Glob, "/") {
		p = path.Base(p)
	}
	m, _ := path.Match(r.Glob, p)
	return m
}

// checkCompressRules refuses a bad glob or an unknown codec.
func checkCompressRules(rules []CompressRule) error {
	for i, r := range rules {
		if _, err := path.Match(strings.TrimSuffix(r.Glob, "/**"), ""); err != nil || r.Glob == "" {
			return fmt.Errorf("files: compress rule %d: bad glob %q", i, r.Glob)
		}
		if !bufferpool.ValidCompress(r.Codec) {
			return fmt.Errorf("files: compress rule %d: codec %q is not one of %s", i, r.Codec,
				strings.Join(bufferpool.Codecs(), ", "))
		}
	}
	return nil
}

// compressFor is the codec of the first rule matching p ("" if none).
func (fs *FS) compressFor(p string) string {
	for _, r := range fs.opts.Compress {
		if r.match(p) {
			return r.Codec
		}
	}
	return ""
}

// setCompress gives f's bucket the codec the rules choose for the path
// it is opened by (a file with several names takes the last one's).
func (f *file) setCompress(p string) {
	if len(f.fs.opts.Compress) > 0 {
		f.bucket.SetCompress(f.fs.compressFor(p)) // the rules were checked at New
	}
}
