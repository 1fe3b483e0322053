package pdb

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// cifToken is one value or keyword of a CIF file.
type cifToken struct {
	s      string
	quoted bool // a quoted string or text field: never a keyword or null
	line   int
}

// cifTokens splits a CIF file into tokens (CIF 1.1 syntax): whitespace
// separated words, 'single' and "double" quoted strings (closed by a
// quote followed by whitespace), ;text fields; and # comments.
func cifTokens(b []byte) ([]cifToken, error) {
	var out []cifToken
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		if strings.HasPrefix(line, ";") {
			start := i + 1
			var sb strings.Builder
			sb.WriteString(line[1:])
			for i++; ; i++ {
				if i >= len(lines) {
					return nil, fmt.Errorf("line %d: text field not closed: %w", start, omni.ErrCorrupt)
				}
				l := strings.TrimRight(lines[i], "\r")
				if strings.HasPrefix(l, ";") {
					break
				}
				sb.WriteByte('\n')
				sb.WriteString(l)
			}
			out = append(out, cifToken{s: sb.String(), quoted: true, line: start})
			continue
		}
		for j := 0; j < len(line); {
			c := line[j]
			switch {
			case c == ' ' || c == '\t':
				j++
			case c == '#':
				j = len(line)
			case c == '\'' || c == '"':
				k := j + 1
				for ; k < len(line); k++ {
					if line[k] == c && (k+1 == len(line) || line[k+1] == ' ' || line[k+1] == '\t') {
						break
					}
				}
				if k >= len(line) {
					return nil, fmt.Errorf("line %d: quoted string not closed: %w", i+1, omni.ErrCorrupt)
				}
				out = append(out, cifToken{s: line[j+1 : k], quoted: true, line: i + 1})
				j = k + 1
			default:
				k := j
				for k < len(line) && line[k] != ' ' && line[k] != '\t' {
					k++
				}
				out = append(out, cifToken{s: line[j:k], line: i + 1})
				j = k
			}
		}
	}
	return out, nil
}

func isKeyword(t cifToken) bool {
	if t.quoted {
		return false
	}
	l := strings.ToLower(t.s)
	return strings.HasPrefix(t.s, "_") || l == "loop_" || strings.HasPrefix(l, "data_") || strings.HasPrefix(l, "save_") || l == "stop_" || l == "global_"
}

// parseCIF reads the _atom_site category of the first data block (a
// loop, or single items for one atom), and _entry.id, _struct.title and
// _struct_keywords.pdbx_keywords.
func parseCIF(b []byte) (*columns, error) {
	toks, err := cifTokens(b)
	if err != nil {
		return nil, err
	}
	c := newColumns()
	var tags []string
	var vals []cifToken
	single := map[string]cifToken{}
	blocks := 0
	for i := 0; i < len(toks); {
		t := toks[i]
		l := strings.ToLower(t.s)
		switch {
		case !t.quoted && strings.HasPrefix(l, "data_"):
			if blocks++; blocks > 1 {
				i = len(toks) // the first block only (as Bio.PDB)
				continue
			}
			i++
		case !t.quoted && l == "loop_":
			j := i + 1
			var lt []string
			for j < len(toks) && !toks[j].quoted && strings.HasPrefix(toks[j].s, "_") {
				lt = append(lt, strings.ToLower(toks[j].s))
				j++
			}
			k := j
			for k < len(toks) && !isKeyword(toks[k]) {
				k++
			}
			if len(lt) == 0 || (k-j)%len(lt) != 0 {
				return nil, fmt.Errorf("line %d: loop of %d items with %d values: %w", t.line, len(lt), k-j, omni.ErrCorrupt)
			}
			if strings.HasPrefix(lt[0], "_atom_site.") {
				if tags != nil {
					return nil, fmt.Errorf("line %d: a second _atom_site loop: %w", t.line, omni.ErrCorrupt)
				}
				tags, vals = lt, toks[j:k]
			}
			i = k
		case !t.quoted && strings.HasPrefix(t.s, "_"):
			if i+1 >= len(toks) || isKeyword(toks[i+1]) {
				return nil, fmt.Errorf("line %d: %s without a value: %w", t.line, t.s, omni.ErrCorrupt)
			}
			single[strings.ToLower(t.s)] = toks[i+1]
			i += 2
		default:
			return nil, fmt.Errorf("line %d: value %q outside a loop: %w", t.line, t.s, omni.ErrCorrupt)
		}
	}
	if tags == nil { // one atom, as single items
		for k, v := range single {
			if strings.HasPrefix(k, "_atom_site.") {
				tags, vals = append(tags, k), append(vals, v)
			}
		}
	}
	for _, m := range []struct{ tag, attr string }{{"_entry.id", "idCode"}, {"_struct.title", "title"}, {"_struct_keywords.pdbx_keywords", "classification"}} {
		if v, ok := single[m.tag]; ok && !isNull(v) {
			c.attrs = append(c.attrs, omni.StringAttr(m.attr, strings.TrimSpace(v.s)))
		}
	}
	if len(tags) == 0 {
		return nil, fmt.Errorf("no _atom_site category: %w", omni.ErrCorrupt)
	}
	if err := cifAtoms(c, tags, vals); err != nil {
		return nil, err
	}
	return c, nil
}

func isNull(t cifToken) bool { return !t.quoted && (t.s == "." || t.s == "?") }

// cifItems maps columns to _atom_site items, preferred first.
var cifItems = map[string][]string{
	"record": {"group_pdb"}, "serial": {"id"}, "name": {"label_atom_id", "auth_atom_id"},
	"altLoc": {"label_alt_id"}, "resName": {"label_comp_id", "auth_comp_id"},
	"chainID": {"auth_asym_id", "label_asym_id"}, "resSeq": {"auth_seq_id", "label_seq_id"},
	"iCode": {"pdbx_pdb_ins_code"}, "x": {"cartn_x"}, "y": {"cartn_y"}, "z": {"cartn_z"},
	"occupancy": {"occupancy"}, "tempFactor": {"b_iso_or_equiv"}, "element": {"type_symbol"},
	"charge": {"pdbx_formal_charge"}, "model": {"pdbx_pdb_model_num"},
}

func cifAtoms(c *columns, tags []string, vals []cifToken) error {
	idx := map[string]int{}
	for i, t := range tags {
		idx[strings.TrimPrefix(t, "_atom_site.")] = i
	}
	col := map[string]int{}
	for k, items := range cifItems {
		col[k] = -1
		for _, it := range items {
			if i, ok := idx[it]; ok {
				col[k] = i
				break
			}
		}
	}
	for _, need := range []string{"x", "y", "z"} {
		if col[need] < 0 {
			return fmt.Errorf("_atom_site without Cartn_%s: %w", need, omni.ErrCorrupt)
		}
	}
	n := len(tags)
	for r := 0; r+n <= len(vals); r += n {
		row := vals[r : r+n]
		a := atom{s: map[string]string{}, i: map[string]int64{}, f: map[string]float64{}}
		get := func(k string) (cifToken, bool) {
			if col[k] < 0 || isNull(row[col[k]]) {
				return cifToken{}, false
			}
			return row[col[k]], true
		}
		for _, k := range stringCols {
			if t, ok := get(k); ok {
				a.s[k] = strings.TrimSpace(t.s)
			}
		}
		for _, k := range intCols {
			a.i[k] = 0
			if k == "model" {
				a.i[k] = 1
			}
			if t, ok := get(k); ok {
				v, err := strconv.ParseInt(t.s, 10, 64)
				if err != nil {
					return fmt.Errorf("line %d: %s %q: %w", t.line, k, t.s, omni.ErrCorrupt)
				}
				a.i[k] = v
			}
		}
		for _, k := range floatCols {
			a.f[k] = math.NaN()
			t, ok := get(k)
			if !ok {
				if k == "x" || k == "y" || k == "z" {
					return fmt.Errorf("line %d: atom without %s: %w", row[0].line, k, omni.ErrCorrupt)
				}
				continue
			}
			num := t.s
			if i := strings.IndexByte(num, '('); i > 0 { // a standard uncertainty: 1.234(5)
				num = num[:i]
			}
			v, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return fmt.Errorf("line %d: %s %q: %w", t.line, k, t.s, omni.ErrCorrupt)
			}
			a.f[k] = v
		}
		if err := c.add(a); err != nil {
			return err
		}
	}
	return nil
}
