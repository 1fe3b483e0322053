package search

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/mountinfo"
)

// Bounds of the index (Options override the first two).
const (
	DefaultMaxVariables = 200000
	DefaultMaxDatasets  = 20000
	DefaultMaxBytes     = 64 << 20 // of documents held (an estimate; the file is about as large)
	// MaxCoordValues is the most values of one coordinate kept; a longer
	// coordinate keeps its min and max only.
	MaxCoordValues = 4096
	maxFieldBytes  = 1024 // of one text field
	maxAttrText    = 4096 // of the other attributes of one variable
	maxFileBytes   = 512 << 20
	// DefaultLimit is the hits a search returns unless asked; MaxLimit
	// the most it returns.
	DefaultLimit = 20
	MaxLimit     = 1000
)

// ErrCorrupt: the index file does not decode.
var ErrCorrupt = errors.New("search index corrupt")

// Dataset is what the index holds of one dataset.
type Dataset struct {
	Key     string    `json:"key"`    // unique: the view engine's key of the dataset
	Name    string    `json:"name"`   // shown to users: mount-relative path or registry name
	Source  string    `json:"source"` // the file or store
	View    string    `json:"view"`   // its .omni directory
	Format  string    `json:"format,omitempty"`
	Size    int64     `json:"size"`     // of the source when indexed
	ModTime time.Time `json:"mod_time"` // of the source when indexed
	Updated time.Time `json:"updated"`  // when indexed
	Text    string    `json:"text,omitempty"`
	Coords  []Coord   `json:"coords,omitempty"`
	Vars    []Var     `json:"vars"`
}

// Coord is a 1-D coordinate variable's metadata and values.
type Coord struct {
	Path         string    `json:"path"`
	Name         string    `json:"name"`
	Units        string    `json:"units,omitempty"`
	Calendar     string    `json:"calendar,omitempty"`
	StandardName string    `json:"standard_name,omitempty"`
	Axis         string    `json:"axis,omitempty"`
	Min          float64   `json:"min"`
	Max          float64   `json:"max"`
	Values       []float64 `json:"values,omitempty"` // sorted; empty past MaxCoordValues

	role string         // the CF role, as omni.AxisMatches sees it (set by prepare)
	cv   *omni.Variable // the coordinate as omni.Filter.Bounds wants it (set by prepare)
}

// Var is one variable: a document.
type Var struct {
	Path         string   `json:"path"`
	Name         string   `json:"name"`
	DType        string   `json:"dtype"`
	Dims         []string `json:"dims,omitempty"`
	Shape        []int64  `json:"shape,omitempty"`
	Coords       []string `json:"coords,omitempty"` // per axis: the path of its coordinate, "" if none
	LongName     string   `json:"long_name,omitempty"`
	StandardName string   `json:"standard_name,omitempty"`
	Units        string   `json:"units,omitempty"`
	Attrs        string   `json:"attrs,omitempty"` // other attributes: names and string values
}

// Field weights (a term's frequency counts this much per occurrence).
var weights = struct{ name, standard, long, units, attrs, dataset float64 }{3, 2.5, 2, 1, 0.5, 0.3}

const (
	k1 = 1.2
	b  = 0.75
)

// Options bound an Index.
type Options struct {
	MaxVariables int   // 0 = DefaultMaxVariables
	MaxDatasets  int   // 0 = DefaultMaxDatasets
	MaxBytes     int64 // 0 = DefaultMaxBytes
}

// Index is the inverted index; see the package doc.
type Index struct {
	opt Options

	mu sync.RWMutex
	// guarded by mu:
	sets     map[string]*Dataset
	docs     map[uint32]*doc
	byKey    map[string][]uint32 // dataset key -> its docs
	postings map[string]map[uint32]float64
	nextID   uint32
	totalLen float64
	bytes    int64 // sizeOf of every dataset held
	dirty    bool
}

// doc is one indexed variable.
type doc struct {
	set   *Dataset
	v     int // index in set.Vars
	len   float64
	terms []string
}

// New returns an empty index.
func New(opt Options) *Index {
	if opt.MaxVariables <= 0 {
		opt.MaxVariables = DefaultMaxVariables
	}
	if opt.MaxDatasets <= 0 {
		opt.MaxDatasets = DefaultMaxDatasets
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = DefaultMaxBytes
	}
	return &Index{opt: opt, sets: map[string]*Dataset{}, docs: map[uint32]*doc{}, byKey: map[string][]uint32{},
		postings: map[string]map[uint32]float64{}}
}

// Update adds or replaces the dataset of d.Key (its text fields are
// trimmed to the bounds); the least recently updated datasets make room.
func (x *Index) Update(d Dataset) {
	d = trimmed(d)
	if len(d.Vars) > x.opt.MaxVariables {
		d.Vars = d.Vars[:x.opt.MaxVariables]
	}
	fit(&d, x.opt.MaxBytes)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(d.Key)
	for len(x.sets) >= x.opt.MaxDatasets || len(x.docs)+len(d.Vars) > x.opt.MaxVariables ||
		x.bytes+sizeOf(&d) > x.opt.MaxBytes {
		if !x.evictLocked() {
			break
		}
	}
	x.addLocked(&d)
	x.dirty = true
}

// Remove drops the dataset of key.
func (x *Index) Remove(key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.removeLocked(key) {
		x.dirty = true
	}
}

// Get returns a copy of what the index holds of key.
func (x *Index) Get(key string) (Dataset, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	d, ok := x.sets[key]
	if !ok {
		return Dataset{}, false
	}
	return *d, true
}

// Keys returns the keys of the datasets indexed.
func (x *Index) Keys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.sets))
	for k := range x.sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Len returns the datasets and variables indexed.
func (x *Index) Len() (datasets, variables int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.sets), len(x.docs)
}

func (x *Index) evictLocked() bool {
	var oldest *Dataset
	for _, d := range x.sets {
		if oldest == nil || d.Updated.Before(oldest.Updated) {
			oldest = d
		}
	}
	if oldest == nil {
		return false
	}
	return x.removeLocked(oldest.Key)
}

func (x *Index) removeLocked(key string) bool {
	if _, ok := x.sets[key]; !ok {
		return false
	}
	for _, id := range x.byKey[key] {
		dc := x.docs[id]
		for _, t := range dc.terms {
			if p := x.postings[t]; p != nil {
				delete(p, id)
				if len(p) == 0 {
					delete(x.postings, t)
				}
			}
		}
		x.totalLen -= dc.len
		delete(x.docs, id)
	}
	x.bytes -= sizeOf(x.sets[key])
	delete(x.byKey, key)
	delete(x.sets, key)
	return true
}

// sizeOf estimates the bytes d holds.
func sizeOf(d *Dataset) int64 {
	n := int64(len(d.Key) + len(d.Name) + len(d.Source) + len(d.View) + len(d.Format) + len(d.Text) + 128)
	for i := range d.Vars {
		v := &d.Vars[i]
		n += int64(len(v.Path)+len(v.Name)+len(v.DType)+len(v.LongName)+len(v.StandardName)+len(v.Units)+len(v.Attrs)) + 96
		for j := range v.Dims {
			n += int64(len(v.Dims[j])) + 16
		}
		for j := range v.Coords {
			n += int64(len(v.Coords[j]))
		}
	}
	for i := range d.Coords {
		c := &d.Coords[i]
		n += int64(len(c.Path)+len(c.Name)+len(c.Units)+len(c.Calendar)+len(c.StandardName)+len(c.Axis)) + 8*int64(len(c.Values)) + 96
	}
	return n
}

// fit makes one dataset hold at most max bytes: coordinate values go
// first (min and max stay), then the last variables.
func fit(d *Dataset, max int64) {
	if sizeOf(d) <= max {
		return
	}
	for i := range d.Coords {
		d.Coords[i].Values = nil
	}
	for len(d.Vars) > 0 && sizeOf(d) > max {
		d.Vars = d.Vars[:len(d.Vars)*3/4]
	}
}

func (x *Index) addLocked(d *Dataset) {
	for i := range d.Coords {
		d.Coords[i].prepare()
	}
	x.sets[d.Key] = d
	dsTerms := tokens(d.Name + " " + d.Text)
	for i := range d.Vars {
		v := &d.Vars[i]
		tf := map[string]float64{}
		add := func(s string, w float64) {
			for _, t := range tokens(s) {
				tf[t] += w
			}
		}
		add(v.Name, weights.name)
		add(v.StandardName, weights.standard)
		add(v.LongName, weights.long)
		add(v.Units, weights.units)
		add(v.Attrs, weights.attrs)
		for _, t := range dsTerms {
			tf[t] += weights.dataset
		}
		id := x.nextID
		x.nextID++
		dc := &doc{set: d, v: i}
		for t, f := range tf {
			p := x.postings[t]
			if p == nil {
				p = map[uint32]float64{}
				x.postings[t] = p
			}
			p[id] = f
			dc.len += f
			dc.terms = append(dc.terms, t)
		}
		x.docs[id] = dc
		x.byKey[d.Key] = append(x.byKey[d.Key], id)
		x.totalLen += dc.len
	}
	x.bytes += sizeOf(d)
}

func trimmed(d Dataset) Dataset {
	d.Text = cut(d.Text, maxFieldBytes)
	vars := make([]Var, len(d.Vars))
	for i, v := range d.Vars {
		v.LongName = cut(v.LongName, maxFieldBytes)
		v.StandardName = cut(v.StandardName, maxFieldBytes)
		v.Units = cut(v.Units, maxFieldBytes)
		v.Attrs = cut(v.Attrs, maxAttrText)
		vars[i] = v
	}
	d.Vars = vars
	coords := make([]Coord, len(d.Coords))
	for i, c := range d.Coords {
		if len(c.Values) > MaxCoordValues {
			c.Values = nil
		}
		coords[i] = c
	}
	d.Coords = coords
	return d
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8Start(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	if len(s) > 0 {
		s = s[:len(s)-1] // the rune whose start we stopped at may be cut
	}
	return s
}

func utf8Start(c byte) bool { return c&0xC0 != 0x80 }

// Query is one search.
type Query struct {
	Text   string        `json:"text"`
	Within []omni.Filter `json:"within,omitempty"`
	Limit  int           `json:"limit,omitempty"` // 0 = DefaultLimit; at most MaxLimit
}

// Hit is one variable found.
type Hit struct {
	Dataset      string   `json:"dataset"` // its name
	Source       string   `json:"source"`
	Variable     string   `json:"variable"` // path in the dataset
	Score        float64  `json:"score"`
	Path         string   `json:"path"` // ready .omni path of the variable (filtered by Within)
	Dims         []string `json:"dims,omitempty"`
	Shape        []int64  `json:"shape,omitempty"`
	DType        string   `json:"dtype"`
	LongName     string   `json:"long_name,omitempty"`
	StandardName string   `json:"standard_name,omitempty"`
	Units        string   `json:"units,omitempty"`
}

// ParseWithin parses `lat=-10:10,lon=350:10,time=2024-01-01:2024-06-30`
// (the filter syntax of views) into filters.
func ParseWithin(s string) ([]omni.Filter, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	v, err := omni.ParseView("x@" + s)
	if err != nil {
		return nil, fmt.Errorf("--within %q: %w", s, err)
	}
	return v.Filters, nil
}

// Search ranks the variables matching q: every query term counts (BM25,
// any term may match); with no text, every variable inside the filters,
// in dataset order. Filters that name a coordinate a variable lacks, or
// whose range misses its values, exclude it.
func (x *Index) Search(q Query) []Hit {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	x.mu.RLock()
	defer x.mu.RUnlock()
	scores := map[uint32]float64{}
	terms := tokens(q.Text)
	if len(terms) == 0 {
		for id := range x.docs {
			scores[id] = 0
		}
	}
	n := float64(len(x.docs))
	avg := 1.0
	if n > 0 && x.totalLen > 0 {
		avg = x.totalLen / n
	}
	seen := map[string]bool{}
	for _, t := range terms {
		if seen[t] {
			continue
		}
		seen[t] = true
		p := x.postings[t]
		if len(p) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(p))+0.5)/(float64(len(p))+0.5))
		for id, f := range p {
			dl := x.docs[id].len
			scores[id] += idf * f * (k1 + 1) / (f + k1*(1-b+b*dl/avg))
		}
	}
	// Best first (ties by dataset and variable), then the filters, until
	// limit hits: only the hits shown are built.
	type scored struct {
		dc    *doc
		score float64
	}
	ranked := make([]scored, 0, len(scores))
	for id, sc := range scores {
		ranked = append(ranked, scored{x.docs[id], sc})
	}
	sort.Slice(ranked, func(i, j int) bool {
		a, b := ranked[i], ranked[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.dc.set.Name != b.dc.set.Name {
			return a.dc.set.Name < b.dc.set.Name
		}
		return a.dc.set.Vars[a.dc.v].Path < b.dc.set.Vars[b.dc.v].Path
	})
	m := newMatcher(q.Within)
	hits := make([]Hit, 0, min(len(ranked), limit))
	for _, r := range ranked {
		if len(hits) == limit {
			break
		}
		ok, fs := m.within(r.dc.set, &r.dc.set.Vars[r.dc.v])
		if ok {
			hits = append(hits, hitOf(r.dc, r.score, fs))
		}
	}
	return hits
}

func hitOf(dc *doc, score float64, fs []omni.Filter) Hit {
	d, v := dc.set, &dc.set.Vars[dc.v]
	p := filepath.Join(d.View, strings.TrimPrefix(v.Path, "/"))
	if len(fs) > 0 {
		parts := make([]string, len(fs))
		for i, f := range fs {
			parts[i] = f.Dim + "=" + f.Lo + ":" + f.Hi
		}
		p += "@" + strings.Join(parts, ",")
	}
	return Hit{Dataset: d.Name, Source: d.Source, Variable: v.Path, Score: math.Round(score*1e4) / 1e4, Path: p,
		Dims: v.Dims, Shape: v.Shape, DType: v.DType, LongName: v.LongName, StandardName: v.StandardName,
		Units: v.Units}
}

// roles are the CF roles a filter name or a coordinate may have.
var roles = []string{"time", "lat", "lon", "level"}

// roleOfName is the CF role a filter's name answers to ("" for none),
// as omni.AxisMatches sees it.
func roleOfName(name string) string {
	stub := &omni.Variable{Dims: []string{""}}
	for _, r := range roles {
		if omni.AxisMatches(stub, 0, &omni.Variable{Name: r}, name) {
			return r
		}
	}
	return ""
}

// prepare computes the coordinate's CF role (standard_name, axis, units
// or its name, as omni.AxisMatches sees it) and its variable, once, when
// the dataset enters the index.
func (c *Coord) prepare() {
	c.cv = c.variable()
	stub := &omni.Variable{Dims: []string{""}}
	for _, r := range roles {
		if omni.AxisMatches(stub, 0, c.cv, r) {
			c.role = r
			return
		}
	}
}

// matcher answers the filters of one search, remembering each
// coordinate's answer (the variables of a dataset share them).
type matcher struct {
	fs    []omni.Filter
	roles []string
	memo  map[matchKey]match
}

type matchKey struct {
	c *Coord
	f int
}

type match struct {
	ok    bool
	shift float64
}

func newMatcher(fs []omni.Filter) *matcher {
	m := &matcher{fs: fs, memo: map[matchKey]match{}}
	for _, f := range fs {
		m.roles = append(m.roles, roleOfName(f.Dim))
	}
	return m
}

// within reports whether every filter keeps some of v, and the filters
// as v's view should be given them: a longitude range that meets v's
// values only modulo 360 is shifted into the coordinate's convention
// (lon=170:190 on a -180..180 grid is lon=-190:-170), so the path reads.
func (m *matcher) within(d *Dataset, v *Var) (bool, []omni.Filter) {
	var out []omni.Filter
	for i, f := range m.fs {
		ok, shift := m.withinOne(d, v, i)
		if !ok {
			return false, nil
		}
		if shift != 0 {
			if out == nil {
				out = append([]omni.Filter(nil), m.fs...)
			}
			out[i] = shiftFilter(f, shift)
		}
	}
	if out == nil {
		out = m.fs
	}
	return true, out
}

func shiftFilter(f omni.Filter, by float64) omni.Filter {
	move := func(s string) string {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return s
		}
		return strconv.FormatFloat(x+by, 'g', -1, 64)
	}
	return omni.Filter{Dim: f.Dim, Lo: move(f.Lo), Hi: move(f.Hi)}
}

// withinOne: the first axis of v that answers to filter i (its
// dimension's name, or its coordinate's CF role) decides.
func (m *matcher) withinOne(d *Dataset, v *Var, i int) (bool, float64) {
	f, role := m.fs[i], m.roles[i]
	for a := range v.Dims {
		c := coordOf(d, v, a)
		if v.Dims[a] != f.Dim && (c == nil || role == "" || c.role != role) {
			continue
		}
		if c == nil {
			return false, 0 // an axis of that name without coordinate values
		}
		k := matchKey{c, i}
		if r, ok := m.memo[k]; ok {
			return r.ok, r.shift
		}
		var r match
		if lo, hi, hiOpen, err := f.Bounds(c.cv); err == nil {
			r.ok, r.shift = c.meets(lo, hi, hiOpen, role == "lon" || c.role == "lon")
		}
		m.memo[k] = r
		return r.ok, r.shift
	}
	return false, 0
}

func coordOf(d *Dataset, v *Var, i int) *Coord {
	if i >= len(v.Coords) || v.Coords[i] == "" {
		return nil
	}
	for j := range d.Coords {
		if d.Coords[j].Path == v.Coords[i] {
			return &d.Coords[j]
		}
	}
	return nil
}

func (c *Coord) variable() *omni.Variable {
	v := &omni.Variable{Name: c.Name, Path: c.Path, DType: omni.Float64}
	for _, a := range [][2]string{{omni.AttrUnits, c.Units}, {omni.AttrCalendar, c.Calendar},
		{omni.AttrStandardName, c.StandardName}, {omni.AttrAxis, c.Axis}} {
		if a[1] != "" {
			v.Attrs = append(v.Attrs, omni.StringAttr(a[0], a[1]))
		}
	}
	return v
}

// meets reports whether some value of c lies in lo..hi (hi exclusive
// when hiOpen), and the shift of the range that met them; longitudes
// compare modulo 360, and lo > hi wraps through 0 (350:10 is 350..360
// and 0..10; its views are not shifted).
func (c *Coord) meets(lo, hi float64, hiOpen, lon bool) (bool, float64) {
	if !lon {
		return c.meetsRange(lo, hi, hiOpen), 0
	}
	if lo > hi {
		a, _ := c.meets(mod360(lo), 360, true, true)
		b, _ := c.meets(0, mod360(hi), hiOpen, true)
		return a || b, 0
	}
	for _, s := range []float64{0, -360, 360, -720, 720} {
		if c.meetsRange(lo+s, hi+s, hiOpen) {
			return true, s
		}
	}
	return false, 0
}

func mod360(x float64) float64 {
	if math.IsInf(x, 0) {
		return x
	}
	return math.Mod(math.Mod(x, 360)+360, 360)
}

func (c *Coord) meetsRange(lo, hi float64, hiOpen bool) bool {
	in := func(x float64) bool { return x >= lo && (x < hi || (!hiOpen && x == hi)) }
	if len(c.Values) == 0 {
		return c.Max >= lo && (c.Min < hi || (!hiOpen && c.Min == hi))
	}
	i := sort.SearchFloat64s(c.Values, lo)
	return i < len(c.Values) && in(c.Values[i])
}

// file is the persisted form.
type file struct {
	Version  int        `json:"version"`
	Mount    string     `json:"mount"` // first after version: Prune reads it alone
	Datasets []*Dataset `json:"datasets"`
}

const fileVersion = 1

// Save writes the index to path (temporary file, rename; mode 0600) if
// it changed since the last Save or Load; mount is recorded for Prune.
func (x *Index) Save(path, mount string) error {
	x.mu.Lock()
	if !x.dirty {
		x.mu.Unlock()
		return nil
	}
	f := file{Version: fileVersion, Mount: mount}
	for _, d := range x.sets {
		f.Datasets = append(f.Datasets, d)
	}
	sort.Slice(f.Datasets, func(i, j int) bool { return f.Datasets[i].Key < f.Datasets[j].Key })
	b, err := json.Marshal(f)
	x.dirty = false
	x.mu.Unlock()
	if err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		x.markDirty()
		return fmt.Errorf("search index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		x.markDirty()
		return fmt.Errorf("search index: %w", err)
	}
	return nil
}

func (x *Index) markDirty() {
	x.mu.Lock()
	x.dirty = true
	x.mu.Unlock()
}

// Load reads an index that Save wrote. A missing file is an empty index;
// one that does not decode or check is ErrCorrupt, with an empty index.
func Load(path string, opt Options) (*Index, error) {
	x := New(opt)
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return x, fmt.Errorf("search index: %w", err)
	}
	if st.Size() > maxFileBytes {
		return x, fmt.Errorf("search index %s: %d bytes, more than %d: %w", path, st.Size(), maxFileBytes, ErrCorrupt)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return x, fmt.Errorf("search index: %w", err)
	}
	sets, err := decode(b)
	if err != nil {
		return x, fmt.Errorf("search index %s: %w", path, err)
	}
	for _, d := range sets {
		x.Update(*d)
	}
	x.dirty = false
	return x, nil
}

// decode parses and checks a saved index: all or nothing.
func decode(b []byte) ([]*Dataset, error) {
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("version %d, want %d: %w", f.Version, fileVersion, ErrCorrupt)
	}
	keys := map[string]bool{}
	for i, d := range f.Datasets {
		if d == nil || d.Key == "" || keys[d.Key] {
			return nil, fmt.Errorf("dataset %d: missing or repeated key: %w", i, ErrCorrupt)
		}
		keys[d.Key] = true
		for j := range d.Vars {
			v := &d.Vars[j]
			if len(v.Dims) != len(v.Shape) || (len(v.Coords) != 0 && len(v.Coords) != len(v.Dims)) {
				return nil, fmt.Errorf("dataset %s variable %d: dims, shape and coords disagree: %w", d.Key, j, ErrCorrupt)
			}
		}
		for j := range d.Coords {
			c := &d.Coords[j]
			if !sort.Float64sAreSorted(c.Values) || math.IsNaN(c.Min) || math.IsNaN(c.Max) {
				return nil, fmt.Errorf("dataset %s coordinate %d: values not sorted: %w", d.Key, j, ErrCorrupt)
			}
		}
	}
	return f.Datasets, nil
}

// Prune removes the index files in dir, other than keep, of mounts whose
// mount point is gone (not mounted, and no such directory: each test or
// job mount leaves one otherwise), and files that do not name their
// mount.
func Prune(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	// A mounted point is kept without a stat (the daemon of another
	// mount may hang, and a stat of its root would wait for it).
	mounted := map[string]bool{}
	if ms, err := mountinfo.Mounts(); err == nil {
		for _, m := range ms {
			mounted[m.Point] = true
		}
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if p == keep || !strings.HasSuffix(e.Name(), ".json") || !e.Type().IsRegular() {
			continue
		}
		m, ok := mountOfFile(p)
		if !ok {
			os.Remove(p)
			continue
		}
		if mounted[m] {
			continue
		}
		if st, err := os.Lstat(m); err != nil || !st.IsDir() {
			os.Remove(p)
		}
	}
}

// mountOfFile reads the mount an index file was saved for: its second
// member, without reading the rest.
func mountOfFile(p string) (string, bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 64<<10))
	var toks []any
	for len(toks) < 5 {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		toks = append(toks, t)
	}
	if toks[0] != json.Delim('{') || toks[1] != "version" || toks[3] != "mount" {
		return "", false
	}
	m, ok := toks[4].(string)
	return m, ok && m != ""
}
