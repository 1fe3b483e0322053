// Package tabular reads CSV, JSON lines and Parquet tables through Apache
// Arrow as OMNI datasets (formats/omni): every column is a 1-D variable
// over one dimension, "row". Types are inferred (CSV, JSON lines) or taken
// from the file (Parquet): integers, floats, booleans and strings map to
// OMNI types; dates and timestamps become integers with CF units ("days
// since 1970-01-01", "microseconds since 1970-01-01 00:00:00"); other
// types become strings. Nulls read as NaN (floats), 0 (integers), false
// or "" (a null_count attribute says how many).
//
// A table is read whole at Open (tables are small next to the arrays of
// HDF5 and NetCDF); reads then copy from memory. It writes CSV and Parquet
// (WriteCSV, WriteParquet): N-D datasets are flattened to long form, one
// row per element, with coordinate columns, as xarray's to_dataframe does.
//
// A Table is safe for concurrent use once open.
package tabular

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/iowarp/iowarp/formats/omni"
)

// RowDim is the dimension of every column.
const RowDim = "row"

func init() {
	omni.Register(omni.Driver{
		Name: "csv", Exts: []string{".csv", ".tsv"},
		Sniff: func(p omni.Probe) bool { return p.Head != nil && omni.HasExt(p.Path, ".csv", ".tsv") },
		Open:  func(p string) (omni.Reader, error) { return Open(p) }, Write: WriteCSV,
	})
	omni.Register(omni.Driver{
		Name: "jsonl", Exts: []string{".jsonl", ".ndjson"},
		Sniff: func(p omni.Probe) bool { return p.Head != nil && omni.HasExt(p.Path, ".jsonl", ".ndjson") },
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
	omni.Register(omni.Driver{
		Name: "parquet", Exts: []string{".parquet", ".pq"},
		Sniff: func(p omni.Probe) bool { return bytes.HasPrefix(p.Head, []byte("PAR1")) },
		Open:  func(p string) (omni.Reader, error) { return Open(p) }, Write: WriteParquet,
	})
}

// Table is an open table.
type Table struct {
	ds   *omni.Dataset
	cols map[string]*column
}

type column struct {
	v       *omni.Variable
	raw     []byte   // fixed-size types
	strings []string // String
}

var _ omni.Reader = (*Table)(nil)

// Open reads the table at p; the format comes from the extension (.csv,
// .tsv, .jsonl, .ndjson) or the Parquet magic.
func Open(p string) (*Table, error) {
	tbl, format, err := readArrow(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer tbl.Release()
	t := &Table{ds: omni.NewDataset(p, format), cols: map[string]*column{}}
	n := tbl.NumRows()
	t.ds.Root.AddDim(&omni.Dimension{Name: RowDim, Size: n})
	for i, f := range tbl.Schema().Fields() {
		if t.cols["/"+f.Name] != nil {
			continue // a second column of the same name (any name is kept: omni.EscapeName)
		}
		c, err := convert(f, tbl.Column(i).Data(), n)
		if err != nil {
			return nil, fmt.Errorf("%s: column %s: %w", p, f.Name, err)
		}
		t.ds.Root.AddVariable(c.v)
		t.cols[c.v.Path] = c
	}
	return t, nil
}

func readArrow(p string) (arrow.Table, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var magic [4]byte
	f.ReadAt(magic[:], 0)
	switch {
	case string(magic[:]) == "PAR1":
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", omni.ErrCorrupt, err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", omni.ErrCorrupt, err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", omni.ErrCorrupt, err)
		}
		return tbl, "parquet", nil
	case omni.HasExt(p, ".jsonl", ".ndjson"):
		tbl, err := readJSONL(f)
		return tbl, "jsonl", err
	case omni.HasExt(p, ".csv", ".tsv"):
		opts := []csv.Option{csv.WithHeader(true), csv.WithChunk(1 << 16), csv.WithNullReader(true, "", "NA", "NaN", "null")}
		if omni.HasExt(p, ".tsv") {
			opts = append(opts, csv.WithComma('\t'))
		}
		tbl, err := readAll(csv.NewInferringReader(f, opts...))
		return tbl, "csv", err
	}
	return nil, "", fmt.Errorf("not a CSV, JSON lines or Parquet file: %w", omni.ErrNotSupported)
}

type recordReader interface {
	Next() bool
	RecordBatch() arrow.RecordBatch
	Err() error
	Schema() *arrow.Schema
	Release()
}

func readAll(r recordReader) (arrow.Table, error) {
	defer r.Release()
	var recs []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	if err := r.Err(); err != nil && err != io.EOF {
		return nil, fmt.Errorf("%w: %v", omni.ErrCorrupt, err)
	}
	if r.Schema() == nil {
		return nil, fmt.Errorf("empty table: %w", omni.ErrCorrupt)
	}
	return array.NewTableFromRecords(r.Schema(), recs), nil
}

// readJSONL infers a schema from the first lines (int64, float64, bool,
// string; anything else as string) and reads with Arrow's JSON reader.
func readJSONL(f *os.File) (arrow.Table, error) {
	types := map[string]arrow.DataType{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for lines := 0; sc.Scan() && lines < 1000; lines++ {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			return nil, fmt.Errorf("line %d: %w: %v", lines+1, omni.ErrCorrupt, err)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if _, ok := types[k]; !ok {
				order = append(order, k)
			}
			types[k] = widenType(types[k], obj[k])
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("no JSON objects: %w", omni.ErrCorrupt)
	}
	fields := make([]arrow.Field, len(order))
	for i, k := range order {
		t := types[k]
		if t == nil {
			t = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: k, Type: t, Nullable: true}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return readAll(array.NewJSONReader(f, arrow.NewSchema(fields, nil), array.WithChunk(1<<16)))
}

func widenType(old arrow.DataType, v any) arrow.DataType {
	var t arrow.DataType
	switch x := v.(type) {
	case nil:
		return old
	case bool:
		t = arrow.FixedWidthTypes.Boolean
	case json.Number:
		t = arrow.PrimitiveTypes.Int64
		if _, err := x.Int64(); err != nil {
			t = arrow.PrimitiveTypes.Float64
		}
	case string:
		t = arrow.BinaryTypes.String
	default:
		return arrow.BinaryTypes.String
	}
	switch {
	case old == nil || arrow.TypeEqual(old, t):
		return t
	case isNum(old) && isNum(t):
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.BinaryTypes.String
}

func isNum(t arrow.DataType) bool {
	return t.ID() == arrow.INT64 || t.ID() == arrow.FLOAT64
}

var arrowTypes = map[arrow.Type]omni.DType{
	arrow.INT8: omni.Int8, arrow.INT16: omni.Int16, arrow.INT32: omni.Int32, arrow.INT64: omni.Int64,
	arrow.UINT8: omni.Uint8, arrow.UINT16: omni.Uint16, arrow.UINT32: omni.Uint32, arrow.UINT64: omni.Uint64,
	arrow.FLOAT32: omni.Float32, arrow.FLOAT64: omni.Float64, arrow.BOOL: omni.Bool,
	arrow.DATE32: omni.Int32, arrow.TIMESTAMP: omni.Int64,
}

func convert(f arrow.Field, chunks *arrow.Chunked, n int64) (*column, error) {
	t, ok := arrowTypes[f.Type.ID()]
	if !ok {
		t = omni.String
	}
	v := &omni.Variable{Name: f.Name, DType: t, Shape: []int64{n}, Dims: []string{RowDim}}
	switch ty := f.Type.(type) {
	case *arrow.Date32Type:
		v.Attrs = append(v.Attrs, omni.StringAttr(omni.AttrUnits, "days since 1970-01-01"))
	case *arrow.TimestampType:
		unit := map[arrow.TimeUnit]string{arrow.Second: "seconds", arrow.Millisecond: "milliseconds",
			arrow.Microsecond: "microseconds", arrow.Nanosecond: "nanoseconds"}[ty.Unit]
		if unit == "nanoseconds" { // CF has no nanoseconds; keep the count, say so
			v.Attrs = append(v.Attrs, omni.StringAttr("arrow_unit", unit))
		} else {
			v.Attrs = append(v.Attrs, omni.StringAttr(omni.AttrUnits, unit+" since 1970-01-01 00:00:00"))
		}
	}
	c := &column{v: v}
	nulls := 0
	for _, arr := range chunks.Chunks() {
		nulls += arr.NullN()
		if t == omni.String {
			for i := 0; i < arr.Len(); i++ {
				s := ""
				if !arr.IsNull(i) {
					s = stringAt(arr, i)
				}
				c.strings = append(c.strings, s)
			}
			continue
		}
		c.raw = appendFixed(c.raw, t, arr)
	}
	if nulls > 0 {
		v.Attrs = append(v.Attrs, omni.IntAttr("null_count", int64(nulls)))
	}
	return c, nil
}

func stringAt(arr arrow.Array, i int) string {
	if s, ok := arr.(*array.String); ok {
		return s.Value(i)
	}
	if s, ok := arr.(*array.LargeString); ok {
		return s.Value(i)
	}
	return arr.ValueStr(i)
}

// appendFixed appends the values of arr as little-endian t.
func appendFixed(out []byte, t omni.DType, arr arrow.Array) []byte {
	le := binary.LittleEndian
	for i := 0; i < arr.Len(); i++ {
		null := arr.IsNull(i)
		switch a := arr.(type) {
		case *array.Boolean:
			b := byte(0)
			if !null && a.Value(i) {
				b = 1
			}
			out = append(out, b)
		case *array.Float32:
			f := float32(math.NaN())
			if !null {
				f = a.Value(i)
			}
			out = le.AppendUint32(out, math.Float32bits(f))
		case *array.Float64:
			f := math.NaN()
			if !null {
				f = a.Value(i)
			}
			out = le.AppendUint64(out, math.Float64bits(f))
		default:
			var x uint64
			if !null {
				x = intAt(arr, i)
			}
			switch t.Size() {
			case 1:
				out = append(out, byte(x))
			case 2:
				out = le.AppendUint16(out, uint16(x))
			case 4:
				out = le.AppendUint32(out, uint32(x))
			default:
				out = le.AppendUint64(out, x)
			}
		}
	}
	return out
}

func intAt(arr arrow.Array, i int) uint64 {
	switch a := arr.(type) {
	case *array.Int8:
		return uint64(a.Value(i))
	case *array.Int16:
		return uint64(a.Value(i))
	case *array.Int32:
		return uint64(a.Value(i))
	case *array.Int64:
		return uint64(a.Value(i))
	case *array.Uint8:
		return uint64(a.Value(i))
	case *array.Uint16:
		return uint64(a.Value(i))
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Date32:
		return uint64(a.Value(i))
	case *array.Timestamp:
		return uint64(a.Value(i))
	}
	return 0
}

// Dataset returns the table as a dataset.
func (t *Table) Dataset() *omni.Dataset { return t.ds }

// Close releases nothing (the table lives in Go memory).
func (t *Table) Close() error { return nil }

func (t *Table) col(p string, h omni.Hyperslab) (*column, error) {
	c := t.cols[p] // exact first: a column may be called ".." or "a/b" (omni.EscapeName)
	if c == nil {
		c = t.cols[path.Clean("/"+p)]
	}
	if c == nil {
		return nil, fmt.Errorf("column %s: %w", p, omni.ErrNotFound)
	}
	if err := h.Check(c.v.Shape); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return c, nil
}

// ReadInto copies the selected rows of a fixed-size column into dst.
func (t *Table) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	c, err := t.col(p, h)
	if err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, c.v, h, dst); err != nil {
		return err
	}
	size := int64(c.v.DType.Size())
	for k := int64(0); k < h.Count[0]; k++ {
		i := h.Start[0] + k*h.StrideAt(0)
		copy(dst[k*size:(k+1)*size], c.raw[i*size:(i+1)*size])
	}
	return nil
}

// ReadStrings returns the selected rows of a string column.
func (t *Table) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	c, err := t.col(p, h)
	if err != nil {
		return nil, err
	}
	if err := omni.CheckReadStrings(p, c.v); err != nil {
		return nil, err
	}
	out := make([]string, h.Count[0])
	for k := range out {
		out[k] = c.strings[h.Start[0]+int64(k)*h.StrideAt(0)]
	}
	return out, nil
}
