package pdb

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// field returns columns [from, to] (1-based, inclusive, as the PDB
// format specification numbers them) of line, trimmed; "" past its end.
func field(line string, from, to int) string {
	if from > len(line) {
		return ""
	}
	return strings.TrimSpace(line[from-1 : min(to, len(line))])
}

// parsePDB reads the ATOM and HETATM records of a PDB file (format 3.3).
func parsePDB(b []byte) (*columns, error) {
	c := newColumns()
	model := int64(1)
	var title []string
	for no, raw := range bytes.Split(b, []byte("\n")) {
		line := strings.TrimRight(string(raw), "\r")
		rec := line
		if len(rec) > 6 {
			rec = rec[:6]
		}
		switch strings.TrimSpace(rec) {
		case "HEADER":
			c.attrs = appendAttr(c.attrs, "classification", field(line, 11, 50))
			c.attrs = appendAttr(c.attrs, "depDate", field(line, 51, 59))
			c.attrs = appendAttr(c.attrs, "idCode", field(line, 63, 66))
		case "TITLE":
			title = append(title, field(line, 11, 80))
		case "MODEL":
			n, err := strconv.ParseInt(field(line, 11, 14), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: MODEL number %q: %w", no+1, field(line, 11, 14), omni.ErrCorrupt)
			}
			model = n
		case "ATOM", "HETATM":
			a, err := pdbAtom(line, model)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", no+1, err)
			}
			if err := c.add(a); err != nil {
				return nil, err
			}
		}
	}
	if len(title) > 0 {
		c.attrs = appendAttr(c.attrs, "title", strings.Join(title, " "))
	}
	if c.n == 0 {
		return nil, fmt.Errorf("no ATOM or HETATM record: %w", omni.ErrCorrupt)
	}
	return c, nil
}

func appendAttr(as []omni.Attribute, name, v string) []omni.Attribute {
	if v == "" {
		return as
	}
	return append(as, omni.StringAttr(name, v))
}

// pdbAtom parses one ATOM/HETATM line.
func pdbAtom(line string, model int64) (atom, error) {
	if len(line) < 54 {
		return atom{}, fmt.Errorf("%s record of %d columns (at least 54): %w", field(line, 1, 6), len(line), omni.ErrCorrupt)
	}
	a := atom{s: map[string]string{}, i: map[string]int64{}, f: map[string]float64{}}
	a.s["record"] = field(line, 1, 6)
	a.s["name"] = field(line, 13, 16)
	a.s["altLoc"] = field(line, 17, 17)
	a.s["resName"] = field(line, 18, 20)
	a.s["chainID"] = field(line, 22, 22)
	a.s["iCode"] = field(line, 27, 27)
	a.s["element"] = field(line, 77, 78)
	a.s["charge"] = field(line, 79, 80)
	a.i["model"] = model
	var err error
	if a.i["serial"], err = hybrid36(field(line, 7, 11), 5); err != nil {
		return atom{}, fmt.Errorf("serial: %w", err)
	}
	if a.i["resSeq"], err = hybrid36(field(line, 23, 26), 4); err != nil {
		return atom{}, fmt.Errorf("resSeq: %w", err)
	}
	for _, f := range []struct {
		name     string
		from, to int
		need     bool
	}{{"x", 31, 38, true}, {"y", 39, 46, true}, {"z", 47, 54, true}, {"occupancy", 55, 60, false}, {"tempFactor", 61, 66, false}} {
		s := field(line, f.from, f.to)
		if s == "" && !f.need {
			a.f[f.name] = math.NaN()
			continue
		}
		if a.f[f.name], err = strconv.ParseFloat(s, 64); err != nil {
			return atom{}, fmt.Errorf("%s %q: %w", f.name, s, omni.ErrCorrupt)
		}
	}
	return a, nil
}

// hybrid36 decodes a PDB number field of width digits: decimal, or
// hybrid-36 past the decimal range (A0000 = 100000 for width 5); blank
// is 0.
func hybrid36(s string, width int) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if len(s) != width {
		return 0, fmt.Errorf("%q: %w", s, omni.ErrCorrupt)
	}
	digits := "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	upper := s[0] >= 'A' && s[0] <= 'Z'
	if !upper {
		digits = "0123456789abcdefghijklmnopqrstuvwxyz"
		if s[0] < 'a' || s[0] > 'z' {
			return 0, fmt.Errorf("%q: %w", s, omni.ErrCorrupt)
		}
	}
	n := int64(0)
	for _, ch := range []byte(s) {
		d := strings.IndexByte(digits, ch)
		if d < 0 {
			return 0, fmt.Errorf("%q: %w", s, omni.ErrCorrupt)
		}
		n = n*36 + int64(d)
	}
	// A000..0 follows 99999 (width 5): subtract the offset of "A000.."
	// in base 36 and add 10^width; lower case follows upper case.
	p := int64(math.Pow(36, float64(width-1)))
	dec := int64(math.Pow(10, float64(width)))
	n = n - 10*p + dec
	if !upper {
		n += 26 * p
	}
	return n, nil
}
