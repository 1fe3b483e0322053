package view

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"syscall"

	"github.com/iowarp/iowarp/formats/omni"
)

// data.csv is rendered in pieces, never whole: sizing it (stat must tell
// tar, rsync and cp its true size) is one streaming pass that renders
// csvChunk values at a time and keeps only where each chunk's rows start
// (csvIndex); a read renders the chunks it covers again from the
// selection's bytes, which the pool caches like any read of the view.
// What a render holds is therefore bounded whatever the record count:
// one chunk's values and text per reader, the index (8 bytes per chunk)
// and the coordinate columns of the CSVTable (at most maxCSVCoordText).
const (
	// MaxCSV bounds the raw bytes of a view rendered as data.csv: sizing
	// it reads them all through the helpers.
	MaxCSV = 64 << 20
	// csvChunk is the values rendered together (and the granularity of
	// the row index): 32 Ki values are a few MiB of text at most.
	csvChunk = 32 << 10
	// maxCSVCoordText bounds the coordinate values a CSVTable keeps
	// rendered (their text plus 16 bytes each); an axis whose column
	// would pass it holds indices, like an axis without a coordinate.
	maxCSVCoordText = 32 << 20
	// maxCoordElems bounds a coordinate read whole for the CSV columns;
	// past it the column holds indices.
	maxCoordElems = 16 << 20
)

// csvIndex is where the rows of data.csv start: hdr, then the rows of
// values [k*csvChunk, (k+1)*csvChunk) at off[k]; off[len-1] is the size.
type csvIndex struct {
	hdr []byte
	off []int64
}

// CSVTooBig reports whether the selection is too large to render as CSV
// (more than MaxCSV raw bytes).
func (p *Plan) CSVTooBig() bool { return p.size > MaxCSV }

// CSVSize is the length of the view's CSV rendering (CSVTable): found
// by rendering it once, chunk by chunk, keeping nothing but the row
// index, and remembered in the plan, so that stat of data.csv tells tar,
// rsync and cp its true size.
func (p *Plan) CSVSize(ctx context.Context) (int64, error) {
	x, err := p.csvIndex(ctx)
	if err != nil {
		return 0, err
	}
	return x.off[len(x.off)-1], nil
}

// csvIndex returns the plan's row index, built at the first call that
// succeeds.
func (p *Plan) csvIndex(ctx context.Context) (*csvIndex, error) {
	if p.CSVTooBig() {
		return nil, fmt.Errorf("%s: %d bytes, more than %d to render as CSV: %w", p.v.Path, p.size, int64(MaxCSV), syscall.EFBIG)
	}
	p.csvMu.Lock()
	defer p.csvMu.Unlock()
	if p.csvIdx != nil {
		return p.csvIdx, nil
	}
	t, err := p.CSVTable()
	if err != nil {
		return nil, err
	}
	var hdr bytes.Buffer
	if err := t.WriteHeader(&hdr); err != nil {
		return nil, err
	}
	x := &csvIndex{hdr: hdr.Bytes(), off: []int64{int64(hdr.Len())}}
	r := &CSVReader{p: p, t: t, x: x, c: NewCursor()}
	for k := int64(0); k < r.chunks(); k++ {
		var n countWriter
		if err := r.render(ctx, k, &n); err != nil {
			return nil, err
		}
		x.off = append(x.off, x.off[len(x.off)-1]+int64(n))
	}
	p.csvIdx = x
	return x, nil
}

// countWriter counts the bytes written to it and keeps none.
type countWriter int64

func (n *countWriter) Write(b []byte) (int, error) {
	*n += countWriter(len(b))
	return len(b), nil
}

// CSVReader reads the view's data.csv by rendering the chunks of rows a
// read covers; it keeps the last chunk rendered for the next sequential
// read. Safe for concurrent use (reads are serialised).
type CSVReader struct {
	p *Plan
	t *omni.CSVTable
	x *csvIndex
	c *Cursor

	mu sync.Mutex
	// k is the chunk whose rows text holds (-1: none); raw is the
	// buffer its values were read into.
	k    int64
	text bytes.Buffer
	raw  []byte
}

// CSV returns a reader of the view's CSV rendering, sizing it first
// (CSVSize) when no reader or stat did.
func (p *Plan) CSV(ctx context.Context) (*CSVReader, error) {
	x, err := p.csvIndex(ctx)
	if err != nil {
		return nil, err
	}
	t, err := p.CSVTable()
	if err != nil {
		return nil, err
	}
	return &CSVReader{p: p, t: t, x: x, c: NewCursor(), k: -1}, nil
}

// Size is the length of the rendering.
func (r *CSVReader) Size() int64 { return r.x.off[len(r.x.off)-1] }

// Plan is the plan the reader renders.
func (r *CSVReader) Plan() *Plan { return r.p }

// ReadAt reads the rendering at off into dst; short only at its end.
func (r *CSVReader) ReadAt(ctx context.Context, dst []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if off < int64(len(r.x.hdr)) {
		n = copy(dst, r.x.hdr[off:])
	}
	for n < len(dst) && off+int64(n) < r.Size() {
		at := off + int64(n)
		k := int64(sort.Search(len(r.x.off), func(i int) bool { return r.x.off[i] > at })) - 1
		if err := r.renderLocked(ctx, k); err != nil {
			return n, err
		}
		n += copy(dst[n:], r.text.Bytes()[at-r.x.off[k]:])
	}
	return n, nil
}

// renderLocked makes text the rows of chunk k.
func (r *CSVReader) renderLocked(ctx context.Context, k int64) error {
	if r.k == k {
		return nil
	}
	r.k = -1
	r.text.Reset()
	if err := r.render(ctx, k, &r.text); err != nil {
		return err
	}
	if want := r.x.off[k+1] - r.x.off[k]; int64(r.text.Len()) != want {
		return fmt.Errorf("csv of %s: rows %d rendered as %d bytes, %d when sized: %w", r.p.v.Path, k*csvChunk, r.text.Len(), want, syscall.EIO)
	}
	r.k = k
	return nil
}

// chunks is the number of chunks of rows.
func (r *CSVReader) chunks() int64 {
	n := omni.NumElements(r.p.shape)
	return (n + csvChunk - 1) / csvChunk
}

// render writes the rows of chunk k to w: its values read through the
// plan (the pool, else a helper), rendered by the CSVTable.
func (r *CSVReader) render(ctx context.Context, k int64, w io.Writer) error {
	n := omni.NumElements(r.p.shape)
	if n == 0 {
		return nil
	}
	esize := r.p.size / n
	first := k * csvChunk
	m := min(csvChunk, n-first)
	if int64(cap(r.raw)) < m*esize {
		r.raw = make([]byte, m*esize)
	}
	raw := r.raw[:m*esize]
	got, err := r.p.ReadAt(ctx, raw, first*esize, r.c)
	if err != nil {
		return err
	}
	if int64(got) != m*esize {
		return fmt.Errorf("csv of %s: %d bytes of rows %d, want %d: %w", r.p.v.Path, got, first, m*esize, syscall.EIO)
	}
	return r.t.WriteRange(w, first, raw)
}

// CSVTable is the CSV layout of the view: per axis the values of its
// coordinate variable (decoded as the data is: ISO 8601 for CF times;
// stored values for a raw plan), or indices where the axis has none.
// Coordinates are read once per plan.
func (p *Plan) CSVTable() (*omni.CSVTable, error) {
	p.csvOnce.Do(func() { p.csv, p.csvErr = p.csvTable() })
	return p.csv, p.csvErr
}

func (p *Plan) csvTable() (*omni.CSVTable, error) {
	t := &omni.CSVTable{V: p.v, DType: p.dtype, Sel: p.h, Axes: make([][]string, len(p.shape))}
	var text int64 // the coordinate columns' bytes kept (maxCSVCoordText)
	defer func() {
		for i, col := range t.Axes {
			if text += colBytes(col); text > maxCSVCoordText {
				t.Axes[i] = nil // past the bound: indices
				text -= colBytes(col)
			}
		}
	}()
	for i := range p.shape {
		c, err := p.g.ds.Coord(p.v, i)
		if err != nil || c.Path == p.v.Path || c.External || c.Len() > maxCoordElems || 16*p.shape[i] > maxCSVCoordText {
			continue // no coordinate (or the variable is its own, or too long): indices
		}
		raw, err := p.g.readCoord(c)
		if err != nil {
			return nil, fmt.Errorf("coordinate %s of %s: %w", c.Path, p.v.Path, err)
		}
		if tu, err := omni.ParseTimeUnits(c.Units(), c.Calendar()); err == nil && !p.raw && !omni.DecodingOf(c).Time() && !c.DType.IsString() {
			// A calendar datetime64 cannot hold (noleap, 360_day, ...):
			// dates in that calendar, the stored numbers staying in data.
			vals, err := omni.Float64s(c.DType, raw)
			if err != nil {
				return nil, err
			}
			col := make([]string, p.h.Count[i])
			for k := range col {
				if j := p.h.Start[i] + int64(k)*p.h.StrideAt(i); j < int64(len(vals)) {
					col[k] = tu.Format(vals[j])
				}
			}
			t.Axes[i] = col
			continue
		}
		ct := c.DType
		if dec := omni.DecodingOf(c); !p.raw && !dec.Identity() {
			if raw, err = dec.Decode(raw); err != nil {
				return nil, fmt.Errorf("coordinate %s of %s: %w", c.Path, p.v.Path, err)
			}
			ct = dec.Out
		}
		if t.Axes[i], err = omni.CoordStrings(ct, raw, p.h, i); err != nil {
			return nil, fmt.Errorf("coordinate %s of %s: %w", c.Path, p.v.Path, err)
		}
	}
	return t, nil
}

// colBytes is what a coordinate column holds: its text and a string
// header per value.
func colBytes(col []string) int64 {
	n := 16 * int64(len(col))
	for _, s := range col {
		n += int64(len(s))
	}
	return n
}
