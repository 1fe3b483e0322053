package config

import (
	"path"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
)

// compress reads the `compress:` key: a list of {glob, codec} rules that
// choose the codec of a file's pages on slower tiers by path (the first
// match wins; files.CompressRule has the matching rules).
func (d *decoder) compress(n *yaml.Node, key string) error {
	if n.Tag == "!!null" {
		d.c.Compress = nil
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return d.errorf(n, key, "expected a list of {glob, codec} rules, got %s", kindName(n))
	}
	d.c.Compress = nil
	for i, e := range n.Content {
		var r files.CompressRule
		ikey := key + "[" + strconv.Itoa(i) + "]"
		d.c.lines[ikey] = e.Line
		err := d.mapping(e, ikey, map[string]field{
			"glob":  d.str(&r.Glob),
			"codec": d.enum(&r.Codec, bufferpool.Codecs()...),
		})
		if err != nil {
			return err
		}
		if r.Glob == "" {
			return d.errorf(e, ikey+".glob", "every compress rule needs a glob")
		}
		if _, err := path.Match(strings.TrimSuffix(r.Glob, "/**"), ""); err != nil {
			return d.errorf(e, ikey+".glob", "%q is not a glob: %v", r.Glob, err)
		}
		if r.Codec == "" {
			return d.errorf(e, ikey+".codec", "every compress rule needs a codec (%s)", strings.Join(bufferpool.Codecs(), ", "))
		}
		d.c.Compress = append(d.c.Compress, r)
	}
	return nil
}
