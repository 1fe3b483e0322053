package config

import (
	"strconv"

	"gopkg.in/yaml.v3"
)

// modules reads the `modules:` key: a list of Go plugin files (.so, built
// with -buildmode=plugin against the same iowarp version), loaded by
// Runtime.Initialize in order. Validate checks that each is absolute.
func (d *decoder) modules(n *yaml.Node, key string) error {
	if n.Tag == "!!null" {
		d.c.Modules = nil
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return d.errorf(n, key, "expected a list, got %s", kindName(n))
	}
	d.c.Modules = nil
	for i, e := range n.Content {
		var p string
		ikey := key + "[" + strconv.Itoa(i) + "]"
		if err := d.str(&p)(e, ikey); err != nil {
			return err
		}
		d.c.lines[ikey] = e.Line
		d.c.Modules = append(d.c.Modules, p)
	}
	return nil
}

// Plugins is the list of plugin files to load (Modules), as the runtime
// asks for it (runtime.Settings).
func (c *Config) Plugins() []string {
	if c == nil {
		return nil
	}
	return c.Modules
}
