package omni

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Attribute is a typed name/value pair of a group or variable. Value holds
// one of []int64 (signed types), []uint64 (unsigned, bool), []float64
// (float32, float64) or []string (String and S<n>): a one-element slice is
// a scalar attribute.
type Attribute struct {
	Name  string
	Type  DType
	Value any
	// Omitted, when not 0, is the size of a value left out (Value is
	// empty) because it was larger than the views hold (CapAttrs).
	Omitted int64
	// Elems is the number of elements of an omitted numeric value: such
	// a value is read on demand as the 1-D variable AttrVar names.
	Elems int64
}

// Bounds of CapAttrs: the daemon holds every attribute of every dataset
// it shows, so their size must not follow the input.
const (
	MaxAttrBytes        = 1 << 20  // one attribute's value
	MaxDatasetAttrBytes = 32 << 20 // all of a dataset's attribute values
)

// CapAttrs leaves out the values of attributes larger than MaxAttrBytes,
// and of every attribute past MaxDatasetAttrBytes in all, recording
// their size in Omitted; their names and types stay.
func CapAttrs(ds *Dataset) {
	var total int64
	capList := func(as []Attribute) {
		for i := range as {
			n := as[i].valueBytes()
			if n > MaxAttrBytes || total+n > MaxDatasetAttrBytes {
				if !as[i].Type.IsString() {
					as[i].Elems = int64(as[i].Len())
				}
				as[i].Value, as[i].Omitted = emptyValue(as[i].Type), max(n, 1)
				continue
			}
			total += n
		}
	}
	ds.Walk(func(g *Group) {
		capList(g.Attrs)
		for _, v := range g.Variables {
			capList(v.Attrs)
		}
	})
}

// valueBytes is about what the value takes in memory and in schema.json.
func (a Attribute) valueBytes() int64 {
	if ss, ok := a.Value.([]string); ok {
		n := int64(0)
		for _, s := range ss {
			n += int64(len(s)) + 8
		}
		return n
	}
	return int64(a.Len()) * 8
}

func emptyValue(t DType) any {
	switch {
	case t.IsString():
		return []string{}
	case t.IsFloat():
		return []float64{}
	case t.IsSigned():
		return []int64{}
	}
	return []uint64{}
}

// StringAttr, FloatAttr and IntAttr build attributes.
func StringAttr(name string, v ...string) Attribute {
	return Attribute{Name: name, Type: String, Value: v}
}

// FloatAttr builds a float64 attribute.
func FloatAttr(name string, v ...float64) Attribute {
	return Attribute{Name: name, Type: Float64, Value: v}
}

// IntAttr builds an int64 attribute.
func IntAttr(name string, v ...int64) Attribute {
	return Attribute{Name: name, Type: Int64, Value: v}
}

// Len is the number of values.
func (a Attribute) Len() int {
	switch v := a.Value.(type) {
	case []int64:
		return len(v)
	case []uint64:
		return len(v)
	case []float64:
		return len(v)
	case []string:
		return len(v)
	}
	return 0
}

// String renders the value: strings joined by newlines, numbers by ", ";
// an omitted value says so.
func (a Attribute) String() string {
	if a.Omitted > 0 && a.Elems > 0 {
		return fmt.Sprintf("(%d values of %s, %d bytes: more than the views hold in memory (%d bytes); read lazily from %s.npy beside this file)", a.Elems, a.Type, a.Omitted, MaxAttrBytes, a.Name)
	}
	if a.Omitted > 0 {
		return fmt.Sprintf("(value of %d bytes omitted: attributes larger than %d bytes are not held by the views)", a.Omitted, MaxAttrBytes)
	}
	switch v := a.Value.(type) {
	case []string:
		return strings.Join(v, "\n")
	case []float64:
		parts := make([]string, len(v))
		bits := 64
		if a.Type == Float32 {
			bits = 32
		}
		for i, f := range v {
			parts[i] = strconv.FormatFloat(f, 'g', -1, bits)
		}
		return strings.Join(parts, ", ")
	case []int64:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return strings.Join(parts, ", ")
	case []uint64:
		parts := make([]string, len(v))
		for i, n := range v {
			parts[i] = strconv.FormatUint(n, 10)
		}
		return strings.Join(parts, ", ")
	}
	return ""
}

// Float64s returns numeric values as float64 (nil for strings).
func (a Attribute) Float64s() []float64 {
	switch v := a.Value.(type) {
	case []float64:
		return v
	case []int64:
		out := make([]float64, len(v))
		for i, n := range v {
			out[i] = float64(n)
		}
		return out
	case []uint64:
		out := make([]float64, len(v))
		for i, n := range v {
			out[i] = float64(n)
		}
		return out
	}
	return nil
}

type attrJSON struct {
	Name    string          `json:"name"`
	Type    DType           `json:"type"`
	Value   json.RawMessage `json:"value"`
	Omitted int64           `json:"omitted,omitempty"`
	Elems   int64           `json:"elems,omitempty"`
}

// MarshalJSON writes {"name","type","value":[...]}; non-finite floats are
// the strings "NaN", "Infinity", "-Infinity".
func (a Attribute) MarshalJSON() ([]byte, error) {
	var val any = a.Value
	if f, ok := a.Value.([]float64); ok {
		out := make([]any, len(f))
		for i, x := range f {
			out[i] = jsonFloat(x)
		}
		val = out
	}
	raw, err := json.Marshal(val)
	if err != nil {
		return nil, err
	}
	return json.Marshal(attrJSON{Name: a.Name, Type: a.Type, Value: raw, Omitted: a.Omitted, Elems: a.Elems})
}

func jsonFloat(x float64) any {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	}
	return x
}

// UnmarshalJSON is the inverse of MarshalJSON; the value must match the type.
func (a *Attribute) UnmarshalJSON(b []byte) error {
	var j attrJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if !j.Type.Valid() {
		return fmt.Errorf("attribute %q: type %q: %w", j.Name, j.Type, ErrInvalid)
	}
	var val any
	var err error
	switch {
	case j.Type.IsString():
		var s []string
		err = json.Unmarshal(j.Value, &s)
		val = s
	case j.Type.IsFloat():
		val, err = decodeFloats(j.Value)
	case j.Type.IsSigned():
		var s []int64
		err = json.Unmarshal(j.Value, &s)
		val = s
	default:
		var s []uint64
		err = json.Unmarshal(j.Value, &s)
		val = s
	}
	if err != nil {
		return fmt.Errorf("attribute %q: %w: %v", j.Name, ErrInvalid, err)
	}
	if j.Elems < 0 || j.Elems > 0 && (j.Type.IsString() || j.Omitted == 0 || j.Elems > MaxVariableBytes/int64(j.Type.Size())) {
		return fmt.Errorf("attribute %q: %d omitted elements: %w", j.Name, j.Elems, ErrInvalid)
	}
	*a = Attribute{Name: j.Name, Type: j.Type, Value: val, Omitted: j.Omitted, Elems: j.Elems}
	return nil
}

func decodeFloats(raw json.RawMessage) ([]float64, error) {
	var items []any
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]float64, len(items))
	for i, it := range items {
		switch x := it.(type) {
		case float64:
			out[i] = x
		case string:
			switch x {
			case "NaN":
				out[i] = math.NaN()
			case "Infinity":
				out[i] = math.Inf(1)
			case "-Infinity":
				out[i] = math.Inf(-1)
			default:
				return nil, fmt.Errorf("float value %q", x)
			}
		default:
			return nil, fmt.Errorf("float value %v", it)
		}
	}
	return out, nil
}
