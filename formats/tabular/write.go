package tabular

import (
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/iowarp/iowarp/formats/omni"
)

// frame is a dataset flattened to columns of equal length.
type frame struct {
	names []string
	types []omni.DType
	cols  [][]byte // raw values (EncodeStrings for strings), one per row
	rows  int64
}

// ErrNotFlat: the dataset's variables do not make one table (they do not
// all share the dimensions of one, or are its coordinates); the error
// names those left over. Export them one file per variable (iowarp
// export --split).
var ErrNotFlat = errors.New("cannot be flattened into one table")

// flatten lays the dataset out in long form: the variables that share the
// dimensions of the largest variable (the data variables), one row per
// element, preceded by one column per coordinate (or index, for a
// dimension without a coordinate variable, when rank > 1). Any other
// variable fails it (ErrNotFlat): nothing is dropped.
func flatten(ds *omni.Dataset, read omni.ReadFunc) (*frame, error) {
	var best *omni.Variable
	for _, v := range ds.Variables() {
		if best == nil || v.Len() > best.Len() || (v.Len() == best.Len() && len(v.Shape) > len(best.Shape)) {
			best = v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("no variables to write: %w", omni.ErrInvalid)
	}
	f := &frame{rows: best.Len()}
	var data []*omni.Variable
	carried := map[string]bool{}
	for _, v := range ds.Variables() {
		if sameDims(v, best) {
			data = append(data, v)
			carried[v.Path] = true
		}
	}
	for i := range best.Shape {
		if c, err := ds.Coord(best, i); err == nil {
			carried[c.Path] = true
		}
	}
	var left []string
	for _, v := range ds.Variables() {
		if !carried[v.Path] {
			left = append(left, fmt.Sprintf("%s (%s)", v.Path, strings.Join(v.Dims, ",")))
		}
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("%d of %d variables do not share the dimensions (%s) of %s nor are its coordinates: %s: %w (export one file per variable: iowarp export --split)",
			len(left), len(ds.Variables()), strings.Join(best.Dims, ","), best.Path, strings.Join(left, ", "), ErrNotFlat)
	}
	for i := range best.Shape {
		c, err := ds.Coord(best, i)
		if err == nil && sameDims(c, best) {
			continue // the coordinate is itself a data column
		}
		var col []byte
		t := omni.Int64
		if err == nil {
			raw, rerr := read(c)
			if rerr != nil {
				return nil, rerr
			}
			t, col = c.DType, broadcast(raw, c.DType, best.Shape, i)
		} else if len(best.Shape) > 1 {
			col = broadcast(indices(best.Shape[i]), t, best.Shape, i)
		} else {
			continue
		}
		f.add(omni.ColumnName(best.Dims[i]), t, col)
	}
	for _, v := range data {
		raw, err := read(v)
		if err != nil {
			return nil, err
		}
		f.add(omni.ColumnName(v.Name), v.DType, raw)
	}
	return f, nil
}

func (f *frame) add(name string, t omni.DType, col []byte) {
	f.names, f.types, f.cols = append(f.names, name), append(f.types, t), append(f.cols, col)
}

func sameDims(a, b *omni.Variable) bool {
	if len(a.Dims) != len(b.Dims) {
		return false
	}
	for i := range a.Dims {
		if a.Dims[i] != b.Dims[i] || a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}

func indices(n int64) []byte {
	out := make([]byte, 0, n*8)
	for i := int64(0); i < n; i++ {
		out = binary.LittleEndian.AppendUint64(out, uint64(i))
	}
	return out
}

// broadcast repeats the values of a coordinate of axis ax over shape, C order.
func broadcast(raw []byte, t omni.DType, shape []int64, ax int) []byte {
	var vals [][]byte
	if t == omni.String {
		ss, _ := omni.DecodeStrings(raw)
		for _, s := range ss {
			vals = append(vals, omni.EncodeStrings([]string{s}))
		}
	} else {
		size := t.Size()
		for i := 0; i+size <= len(raw); i += size {
			vals = append(vals, raw[i:i+size])
		}
	}
	inner := omni.NumElements(shape[ax+1:])
	var out []byte
	n := omni.NumElements(shape)
	for e := int64(0); e < n; e++ {
		k := (e / inner) % shape[ax]
		if k < int64(len(vals)) {
			out = append(out, vals[k]...)
		}
	}
	return out
}

// values renders column c as text, one string per row.
func (f *frame) values(c int) ([]string, error) {
	t := f.types[c]
	if t.IsString() {
		return omni.Strings(t, f.cols[c])
	}
	size := t.Size()
	out := make([]string, len(f.cols[c])/size)
	for i := range out {
		out[i] = omni.FormatElement(t, f.cols[c][i*size:])
		if t.IsFloat() && !strings.ContainsAny(out[i], ".eEnN") {
			out[i] += ".0" // so readers that infer from the first rows see a float
		}
	}
	return out, nil
}

// WriteCSV writes ds as a CSV table (see flatten).
func WriteCSV(p string, ds *omni.Dataset, read omni.ReadFunc) error {
	f, err := flatten(ds, read)
	if err != nil {
		return err
	}
	cols := make([][]string, len(f.cols))
	for i := range cols {
		if cols[i], err = f.values(i); err != nil {
			return err
		}
	}
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	w := csv.NewWriter(out)
	w.Write(f.names)
	row := make([]string, len(cols))
	for r := int64(0); r < f.rows; r++ {
		for i := range cols {
			row[i] = cols[i][r]
		}
		w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var toArrow = map[omni.DType]arrow.DataType{
	omni.Int8: arrow.PrimitiveTypes.Int8, omni.Int16: arrow.PrimitiveTypes.Int16,
	omni.Int32: arrow.PrimitiveTypes.Int32, omni.Int64: arrow.PrimitiveTypes.Int64,
	omni.Uint8: arrow.PrimitiveTypes.Uint8, omni.Uint16: arrow.PrimitiveTypes.Uint16,
	omni.Uint32: arrow.PrimitiveTypes.Uint32, omni.Uint64: arrow.PrimitiveTypes.Uint64,
	omni.Float32: arrow.PrimitiveTypes.Float32, omni.Float64: arrow.PrimitiveTypes.Float64,
	omni.Bool: arrow.FixedWidthTypes.Boolean,
}

// WriteParquet writes ds as a zstd-compressed Parquet table (see flatten).
func WriteParquet(p string, ds *omni.Dataset, read omni.ReadFunc) error {
	f, err := flatten(ds, read)
	if err != nil {
		return err
	}
	mem := memory.DefaultAllocator
	fields := make([]arrow.Field, len(f.cols))
	arrs := make([]arrow.Array, len(f.cols))
	for i := range f.cols {
		at, ok := toArrow[f.types[i]]
		if !ok {
			at = arrow.BinaryTypes.String
		}
		fields[i] = arrow.Field{Name: f.names[i], Type: at}
		if arrs[i], err = f.arrowColumn(i, at, mem); err != nil {
			return err
		}
		defer arrs[i].Release()
	}
	schema := arrow.NewSchema(fields, nil)
	rec := array.NewRecordBatch(schema, arrs, f.rows)
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	out, err := os.Create(p)
	if err != nil {
		return err
	}
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	if err := pqarrow.WriteTable(tbl, out, 1<<20, props, pqarrow.DefaultWriterProps()); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil // WriteTable closes out
}

func (f *frame) arrowColumn(i int, at arrow.DataType, mem memory.Allocator) (arrow.Array, error) {
	b := array.NewBuilder(mem, at)
	defer b.Release()
	t, raw := f.types[i], f.cols[i]
	if at.ID() == arrow.STRING {
		ss, err := f.values(i)
		if err != nil {
			return nil, err
		}
		b.(*array.StringBuilder).AppendValues(ss, nil)
		return b.NewArray(), nil
	}
	size := t.Size()
	le := binary.LittleEndian
	for k := 0; k+size <= len(raw); k += size {
		x := raw[k:]
		switch bb := b.(type) {
		case *array.Int8Builder:
			bb.Append(int8(x[0]))
		case *array.Int16Builder:
			bb.Append(int16(le.Uint16(x)))
		case *array.Int32Builder:
			bb.Append(int32(le.Uint32(x)))
		case *array.Int64Builder:
			bb.Append(int64(le.Uint64(x)))
		case *array.Uint8Builder:
			bb.Append(x[0])
		case *array.Uint16Builder:
			bb.Append(le.Uint16(x))
		case *array.Uint32Builder:
			bb.Append(le.Uint32(x))
		case *array.Uint64Builder:
			bb.Append(le.Uint64(x))
		case *array.Float32Builder:
			bb.Append(math.Float32frombits(le.Uint32(x)))
		case *array.Float64Builder:
			bb.Append(math.Float64frombits(le.Uint64(x)))
		case *array.BooleanBuilder:
			bb.Append(x[0] != 0)
		}
	}
	return b.NewArray(), nil
}
