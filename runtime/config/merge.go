package config

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Source is one YAML document to Merge: its name (in errors) and bytes.
type Source struct {
	Name string
	Data []byte
}

// Merge lays each overlay over the first source and returns the result
// as one YAML document (the first source's comments kept), checked as a
// config file. A key of an overlay replaces the same key below it,
// except that two mappings merge key by key (an overlay's
// `cluster: {name: x}` keeps the ttl set below it); a list is replaced
// whole. Each source is first read on its own on top of the defaults, so
// that a bad key or value is reported at its own file and line; the
// merged result must then pass Validate (errors name the sources joined
// by "+", at lines of the printed result). On error nothing is returned.
//
// The Slurm prolog uses it to add a job's cluster block to the site
// config (contrib/slurm).
func Merge(srcs ...Source) ([]byte, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("merge: no config")
	}
	var doc *yaml.Node
	names := make([]string, 0, len(srcs))
	for _, s := range srcs {
		n, err := readSource(s)
		if err != nil {
			return nil, err
		}
		names = append(names, s.Name)
		switch {
		case n == nil: // an empty file adds nothing
		case doc == nil:
			doc = n
		default:
			mergeMapping(doc, n)
		}
	}
	var out bytes.Buffer
	if doc != nil {
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
			return nil, fmt.Errorf("merge %s: %w", strings.Join(names, ", "), err)
		}
		enc.Close()
	}
	if _, err := Parse(strings.Join(names, "+"), out.Bytes()); err != nil {
		return nil, err
	}
	return append([]byte{}, out.Bytes()...), nil
}

// readSource checks s key by key (not Validate: an overlay alone is not
// a whole config) and returns its top mapping, nil if s is empty.
func readSource(s Source) (*yaml.Node, error) {
	if _, err := parse(s.Name, s.Data, Default()); err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(s.Data, &doc); err != nil {
		return nil, yamlError(s.Name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return nil, nil
	}
	return top, nil // a mapping: parse refused anything else
}

// mergeMapping lays the mapping over onto base (both mapping nodes).
func mergeMapping(base, over *yaml.Node) {
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i], over.Content[i+1]
		j := mappingIndex(base, k.Value)
		switch {
		case j < 0:
			base.Content = append(base.Content, k, v)
		case isMapping(base.Content[j+1]) && isMapping(v):
			mergeMapping(base.Content[j+1], v)
		default:
			base.Content[j+1] = v
		}
	}
}

// mappingIndex is the index of key's key node in mapping m, -1 if absent.
func mappingIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

func isMapping(n *yaml.Node) bool { return n.Kind == yaml.MappingNode }
