package omni

import (
	"fmt"
	"strconv"
	"strings"
)

// View is a parsed view name: a variable, optionally sliced
// (`temperature[0:2,10:20,:]`) or filtered by coordinate ranges
// (`temperature@time=2024-01-01:2024-06-30,lat=-10:10`).
type View struct {
	Var     string
	Slices  []Slice  // nil when the name has no [...]
	Filters []Filter // nil when the name has no @...
}

// Slice is one axis of a NumPy-style basic index: start:stop:step, or a
// single index (kept as an axis of length 1, unlike NumPy).
type Slice struct {
	Start, Stop, Step          int64
	HasStart, HasStop, HasStep bool
	Index                      bool // a single index in Start
}

// Filter selects the coordinate values Lo..Hi (inclusive; either may be
// absent) along the dimension Dim. Values are numbers or ISO dates.
type Filter struct {
	Dim    string
	Lo, Hi string
}

const maxViewLen = 4096

// ParseView parses a view name. On error the View is zero.
func ParseView(s string) (View, error) {
	v, err := parseView(s)
	if err != nil {
		return View{}, fmt.Errorf("view %q: %w", truncate(s, 80), err)
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func parseView(s string) (View, error) {
	if len(s) > maxViewLen {
		return View{}, fmt.Errorf("longer than %d bytes: %w", maxViewLen, ErrInvalid)
	}
	if i := strings.IndexByte(s, '['); i >= 0 {
		if !strings.HasSuffix(s, "]") {
			return View{}, fmt.Errorf("missing ]: %w", ErrInvalid)
		}
		name, err := checkName(s[:i])
		if err != nil {
			return View{}, err
		}
		sl, err := parseSlices(s[i+1 : len(s)-1])
		if err != nil {
			return View{}, err
		}
		return View{Var: name, Slices: sl}, nil
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		name, err := checkName(s[:i])
		if err != nil {
			return View{}, err
		}
		fs, err := parseFilters(s[i+1:])
		if err != nil {
			return View{}, err
		}
		return View{Var: name, Filters: fs}, nil
	}
	name, err := checkName(s)
	return View{Var: name}, err
}

func checkName(s string) (string, error) {
	if s == "" || s == "." || s == ".." {
		return "", fmt.Errorf("empty variable name: %w", ErrInvalid)
	}
	if strings.ContainsAny(s, "[]@=,\x00") {
		return "", fmt.Errorf("variable name %q has one of []@=,: %w", s, ErrInvalid)
	}
	return s, nil
}

func parseSlices(s string) ([]Slice, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty []: %w", ErrInvalid)
	}
	parts := strings.Split(s, ",")
	out := make([]Slice, 0, len(parts))
	for _, p := range parts {
		sl, err := parseSlice(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, sl)
	}
	return out, nil
}

func parseSlice(p string) (Slice, error) {
	fields := strings.Split(p, ":")
	if len(fields) > 3 {
		return Slice{}, fmt.Errorf("slice %q has more than two ':': %w", p, ErrInvalid)
	}
	var sl Slice
	if len(fields) == 1 {
		n, err := parseIndex(fields[0])
		if err != nil {
			return Slice{}, err
		}
		return Slice{Start: n, HasStart: true, Index: true}, nil
	}
	targets := []struct {
		v   *int64
		has *bool
	}{{&sl.Start, &sl.HasStart}, {&sl.Stop, &sl.HasStop}, {&sl.Step, &sl.HasStep}}
	for i, f := range fields {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := parseIndex(f)
		if err != nil {
			return Slice{}, err
		}
		*targets[i].v, *targets[i].has = n, true
	}
	if sl.HasStep && sl.Step == 0 {
		return Slice{}, fmt.Errorf("slice %q: step 0: %w", p, ErrInvalid)
	}
	return sl, nil
}

func parseIndex(f string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("index %q: %w", f, ErrInvalid)
	}
	return n, nil
}

func parseFilters(s string) ([]Filter, error) {
	if s == "" {
		return nil, fmt.Errorf("empty filter after @: %w", ErrInvalid)
	}
	var out []Filter
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		dim, val, ok := strings.Cut(p, "=")
		dim = strings.TrimSpace(dim)
		if !ok || dim == "" || strings.ContainsAny(dim, "[]@") {
			return nil, fmt.Errorf("filter %q is not dim=lo:hi: %w", p, ErrInvalid)
		}
		if seen[dim] {
			return nil, fmt.Errorf("dimension %q filtered twice: %w", dim, ErrInvalid)
		}
		seen[dim] = true
		lo, hi, err := splitRange(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("filter %q: %w", p, err)
		}
		out = append(out, Filter{Dim: dim, Lo: lo, Hi: hi})
	}
	return out, nil
}

// splitRange splits "lo:hi" at the ':' that leaves a value on each side
// (dates with times hold colons too). "v" alone means v:v.
func splitRange(s string) (string, string, error) {
	if s == "" {
		return "", "", fmt.Errorf("empty range: %w", ErrInvalid)
	}
	if !strings.Contains(s, ":") {
		if !isValue(s) {
			return "", "", fmt.Errorf("value %q is neither a number nor a date: %w", s, ErrInvalid)
		}
		return s, s, nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		lo, hi := s[:i], s[i+1:]
		if (lo == "" || isValue(lo)) && (hi == "" || isValue(hi)) {
			return lo, hi, nil
		}
	}
	return "", "", fmt.Errorf("range %q is not lo:hi of numbers or dates: %w", s, ErrInvalid)
}

func isValue(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return true
	}
	_, _, err := ParseDate(s)
	return err == nil
}

// String renders v back in view syntax; ParseView(v.String()) == v.
func (v View) String() string {
	var b strings.Builder
	b.WriteString(v.Var)
	if v.Slices != nil {
		b.WriteByte('[')
		for i, s := range v.Slices {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(s.String())
		}
		b.WriteByte(']')
	}
	if v.Filters != nil {
		b.WriteByte('@')
		for i, f := range v.Filters {
			if i > 0 {
				b.WriteByte(',')
			}
			if f.Lo == f.Hi && f.Lo != "" {
				fmt.Fprintf(&b, "%s=%s", f.Dim, f.Lo)
			} else {
				fmt.Fprintf(&b, "%s=%s:%s", f.Dim, f.Lo, f.Hi)
			}
		}
	}
	return b.String()
}

func (s Slice) String() string {
	if s.Index {
		return strconv.FormatInt(s.Start, 10)
	}
	var b strings.Builder
	if s.HasStart {
		b.WriteString(strconv.FormatInt(s.Start, 10))
	}
	b.WriteByte(':')
	if s.HasStop {
		b.WriteString(strconv.FormatInt(s.Stop, 10))
	}
	if s.HasStep {
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(s.Step, 10))
	}
	return b.String()
}

// Hyperslab resolves the slices against shape with Python semantics
// (negative indices count from the end, out-of-range bounds are clamped);
// axes without a slice are taken whole. Negative steps are not supported.
func (v View) Hyperslab(shape []int64) (Hyperslab, error) {
	if len(v.Slices) > len(shape) {
		return Hyperslab{}, fmt.Errorf("%d indices for %d axes: %w", len(v.Slices), len(shape), ErrInvalid)
	}
	h := All(shape)
	h.Stride = make([]int64, len(shape))
	for i := range h.Stride {
		h.Stride[i] = 1
	}
	for i, s := range v.Slices {
		start, count, step, err := s.resolve(shape[i])
		if err != nil {
			return Hyperslab{}, fmt.Errorf("axis %d: %w", i, err)
		}
		h.Start[i], h.Count[i], h.Stride[i] = start, count, step
	}
	return h, nil
}

func (s Slice) resolve(n int64) (start, count, step int64, err error) {
	if s.Index {
		i := s.Start
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return 0, 0, 0, fmt.Errorf("index %d out of range for size %d: %w", s.Start, n, ErrInvalid)
		}
		return i, 1, 1, nil
	}
	step = 1
	if s.HasStep {
		step = s.Step
	}
	if step < 0 {
		return 0, 0, 0, fmt.Errorf("negative step %d: %w", step, ErrNotSupported)
	}
	start, stop := int64(0), n
	if s.HasStart {
		start = clampIndex(s.Start, n)
	}
	if s.HasStop {
		stop = clampIndex(s.Stop, n)
	}
	if stop <= start {
		return start, 0, step, nil
	}
	return start, (stop-start-1)/step + 1, step, nil
}

func clampIndex(i, n int64) int64 {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n)
}
