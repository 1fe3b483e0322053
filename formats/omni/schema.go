package omni

import (
	"encoding/json"
	"fmt"
	"path"
)

// Schema returns schema.json: the whole dataset tree (groups, dimensions,
// variables, typed attributes), indented.
func (ds *Dataset) Schema() ([]byte, error) {
	b, err := json.MarshalIndent(ds, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", ds.Path, err)
	}
	return append(b, '\n'), nil
}

// Limits on decoded schemas: they come from helper processes that parsed
// untrusted files, and from registry files.
const (
	maxSchemaDepth = 64
	maxRank        = 32
)

// DecodeSchema parses schema.json and checks it (Validate). On error the
// dataset is nil.
func DecodeSchema(b []byte) (*Dataset, error) {
	var ds Dataset
	if err := json.Unmarshal(b, &ds); err != nil {
		return nil, fmt.Errorf("schema: %w: %v", ErrInvalid, err)
	}
	if err := ds.Validate(); err != nil {
		return nil, err
	}
	return &ds, nil
}

// Validate checks the tree: a root, consistent paths, unique names, valid
// types, one dimension name per axis, non-negative sizes.
func (ds *Dataset) Validate() error {
	if ds.Root == nil || ds.Root.Path != "/" || ds.Root.Name != "" {
		return fmt.Errorf("schema: root group missing or misnamed: %w", ErrInvalid)
	}
	return validateGroup(ds.Root, 0)
}

func validateGroup(g *Group, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("schema: groups nested deeper than %d: %w", maxSchemaDepth, ErrInvalid)
	}
	names := map[string]bool{}
	for _, c := range g.Groups {
		if c == nil || !validName(c.Name) || c.Path != JoinPath(g.Path, c.Name) || names[c.Name] {
			return fmt.Errorf("schema: bad child group of %s: %w", g.Path, ErrInvalid)
		}
		names[c.Name] = true
		if err := validateGroup(c, depth+1); err != nil {
			return err
		}
	}
	for _, v := range g.Variables {
		if v == nil || !validName(v.Name) || v.Path != JoinPath(g.Path, v.Name) || names[v.Name] {
			return fmt.Errorf("schema: bad variable in %s: %w", g.Path, ErrInvalid)
		}
		names[v.Name] = true
		if err := v.validate(); err != nil {
			return err
		}
	}
	dims := map[string]bool{}
	for _, d := range g.Dims {
		if d == nil || !validName(d.Name) || d.Size < 0 || dims[d.Name] {
			return fmt.Errorf("schema: bad dimension in %s: %w", g.Path, ErrInvalid)
		}
		dims[d.Name] = true
	}
	return nil
}

// MaxVariableBytes bounds the bytes of one variable (elements × element
// size) a schema may declare: 2^62, so that sums and offsets of a few of
// them stay within an int64.
const MaxVariableBytes = 1 << 62

func (v *Variable) validate() error {
	bad := func(why string) error {
		return fmt.Errorf("schema: variable %s: %s: %w", v.Path, why, ErrInvalid)
	}
	switch {
	case !v.DType.Valid():
		return bad("dtype " + string(v.DType))
	case len(v.Shape) > maxRank:
		return bad("rank too high")
	case len(v.Dims) != len(v.Shape):
		return bad("dims and shape differ in length")
	case v.Chunks != nil && len(v.Chunks) != len(v.Shape):
		return bad("chunks and shape differ in length")
	}
	// Bytes are bounded, not only elements: every size computed from a
	// shape (a plan's, a block's, an export's) is elements × element size.
	total := int64(max(v.DType.Size(), 1))
	for i, n := range v.Shape {
		if n < 0 || !validName(v.Dims[i]) {
			return bad("negative size or bad dimension name")
		}
		if n > 0 && total > MaxVariableBytes/n {
			return bad(fmt.Sprintf("more than %d bytes", int64(MaxVariableBytes)))
		}
		total *= n
	}
	for _, c := range v.Chunks {
		if c <= 0 {
			return bad("chunk size ≤ 0")
		}
	}
	return nil
}

// maxNameBytes bounds a name in a schema. Names past 255 bytes are
// valid in the model (describe, query) but no path component: the
// views do not list them.
const maxNameBytes = 64 << 10

func validName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= maxNameBytes && path.Base(s) == s && s != "/"
}
