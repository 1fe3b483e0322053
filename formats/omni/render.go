package omni

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// npyAlign: NumPy pads the header so the data starts 64-byte aligned,
// which mmap_mode='r' readers and vector loads like.
const npyAlign = 64

// NPYHeader returns the NumPy format 1.0 header for C-order data of type
// t and the given shape; the raw data follows it unchanged. Variable-length
// strings must be converted first (FixStrings).
func NPYHeader(t DType, shape []int64) ([]byte, error) {
	descr, err := t.NumpyDescr()
	if err != nil {
		return nil, err
	}
	var dims []string
	for _, n := range shape {
		dims = append(dims, strconv.FormatInt(n, 10))
	}
	tuple := "(" + strings.Join(dims, ", ")
	if len(dims) == 1 {
		tuple += ","
	}
	tuple += ")"
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, tuple)
	total := 10 + len(dict) + 1
	pad := (npyAlign - total%npyAlign) % npyAlign
	hdrLen := len(dict) + pad + 1
	if hdrLen > 65535 {
		return nil, fmt.Errorf("npy header of %d bytes: %w", hdrLen, ErrNotSupported)
	}
	out := make([]byte, 0, 10+hdrLen)
	out = append(out, "\x93NUMPY\x01\x00"...)
	out = binary.LittleEndian.AppendUint16(out, uint16(hdrLen))
	out = append(out, dict...)
	out = append(out, strings.Repeat(" ", pad)...)
	return append(out, '\n'), nil
}

// NPYSize is the length of a .npy file: header plus data.
func NPYSize(t DType, shape []int64) (int64, error) {
	h, err := NPYHeader(t, shape)
	if err != nil {
		return 0, err
	}
	return int64(len(h)) + NumElements(shape)*int64(t.Size()), nil
}

// WriteCSV renders the selection h of v (data: its raw bytes) as CSV
// with index columns (a CSVTable without coordinate values).
func WriteCSV(w io.Writer, v *Variable, h Hyperslab, data []byte) error {
	t := &CSVTable{V: v, DType: v.DType, Sel: h}
	if err := t.WriteHeader(w); err != nil {
		return err
	}
	return t.WriteRows(w, h, data)
}

// CSVTable is the CSV rendering of the selection Sel of V, values of type
// DType. A scalar, or a 1-D variable without a coordinate of its own
// (Axes[0] nil), is one column named after V. Otherwise it is in long
// form, as xarray's to_dataframe().to_csv() writes it: one column per
// axis named after its dimension, holding the coordinate's value
// (Axes[i], already rendered: ISO 8601 for CF times) or, where the axis
// has no coordinate variable, the index in V; then the value.
type CSVTable struct {
	V     *Variable
	DType DType
	Sel   Hyperslab
	// Axes holds, per axis, the rendered coordinate value of each index
	// of the selection (len Sel.Count[i]); nil: the axis has none.
	Axes [][]string
}

func (t *CSVTable) long() bool {
	n := len(t.Sel.Count)
	return n > 1 || n == 1 && len(t.Axes) == 1 && t.Axes[0] != nil
}

// WriteHeader writes the header line: the stored names (ColumnName) of
// the dimensions and the variable.
func (t *CSVTable) WriteHeader(w io.Writer) error {
	line := csvField(ColumnName(t.V.Name))
	if t.long() {
		cols := make([]string, 0, len(t.V.Dims)+1)
		for _, d := range t.V.Dims {
			cols = append(cols, ColumnName(d))
		}
		line = csvJoin(append(cols, ColumnName(t.V.Name)))
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// WriteRows writes the rows of the block h of the selection (data: its
// bytes, of DType), without the header, so that the blocks of a large
// selection, each with its own h, make one CSV one after the other.
func (t *CSVTable) WriteRows(w io.Writer, h Hyperslab, data []byte) error {
	vals, err := csvValues(t.DType, data)
	if err != nil {
		return err
	}
	if int64(len(vals)) != h.Len() {
		return fmt.Errorf("csv of %s: %d values for %d selected: %w", t.V.Path, len(vals), h.Len(), ErrInvalid)
	}
	return t.writeVals(w, h, make([]int64, len(h.Count)), vals)
}

// WriteRange writes the rows of the values first, first+1, ... of the
// selection Sel in C order (data: their bytes, of DType), without the
// header: any run of the selection renders alone, so a large CSV is
// served by rendering the rows a read needs (CSVTable holds no values).
func (t *CSVTable) WriteRange(w io.Writer, first int64, data []byte) error {
	vals, err := csvValues(t.DType, data)
	if err != nil {
		return err
	}
	if first < 0 || first+int64(len(vals)) > t.Sel.Len() {
		return fmt.Errorf("csv of %s: rows %d+%d of %d: %w", t.V.Path, first, len(vals), t.Sel.Len(), ErrInvalid)
	}
	idx := make([]int64, len(t.Sel.Count))
	for i := len(idx) - 1; i >= 0 && first > 0; i-- {
		if t.Sel.Count[i] > 0 {
			idx[i], first = first%t.Sel.Count[i], first/t.Sel.Count[i]
		}
	}
	return t.writeVals(w, t.Sel, idx, vals)
}

// writeVals writes the rows of vals, the rendered values of h from its
// C-order multi-index idx on (advanced in place).
func (t *CSVTable) writeVals(w io.Writer, h Hyperslab, idx []int64, vals []string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	long := t.long()
	for _, val := range vals {
		if long {
			for i, k := range idx {
				abs := h.Start[i] + k*h.StrideAt(i)
				if i < len(t.Axes) && t.Axes[i] != nil {
					sel := (abs - t.Sel.Start[i]) / t.Sel.StrideAt(i)
					if sel < 0 || sel >= int64(len(t.Axes[i])) {
						return fmt.Errorf("csv of %s: index %d outside the selection: %w", t.V.Path, abs, ErrInvalid)
					}
					bw.WriteString(t.Axes[i][sel])
				} else {
					bw.WriteString(strconv.FormatInt(abs, 10))
				}
				bw.WriteByte(',')
			}
			next(idx, h.Count)
		}
		bw.WriteString(val)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// CoordStrings renders the values of coordinate c (data: its whole
// decoded bytes, of type t) at the indices of axis i of the selection h:
// the column of that axis in a CSVTable.
func CoordStrings(t DType, data []byte, h Hyperslab, i int) ([]string, error) {
	size := int64(t.Size())
	if size == 0 || t.IsString() && t == String {
		if t == String {
			ss, err := DecodeStrings(data)
			if err != nil {
				return nil, err
			}
			out := make([]string, h.Count[i])
			for k := range out {
				j := h.Start[i] + int64(k)*h.StrideAt(i)
				if j >= int64(len(ss)) {
					return nil, fmt.Errorf("coordinate index %d of %d: %w", j, len(ss), ErrInvalid)
				}
				out[k] = csvField(ss[j])
			}
			return out, nil
		}
		return nil, fmt.Errorf("coordinate of %s: %w", t, ErrNotSupported)
	}
	out := make([]string, h.Count[i])
	for k := range out {
		j := h.Start[i] + int64(k)*h.StrideAt(i)
		if (j+1)*size > int64(len(data)) {
			return nil, fmt.Errorf("coordinate index %d of %d bytes: %w", j, len(data), ErrInvalid)
		}
		out[k] = csvField(FormatElement(t, data[j*size:]))
	}
	return out, nil
}

// next advances a C-order multi-index; false after the last one.
func next(idx, count []int64) bool {
	for i := len(idx) - 1; i >= 0; i-- {
		idx[i]++
		if idx[i] < count[i] {
			return true
		}
		idx[i] = 0
	}
	return false
}

func csvValues(t DType, data []byte) ([]string, error) {
	if t.IsString() {
		ss, err := Strings(t, data)
		for i := range ss {
			ss[i] = csvField(ss[i])
		}
		return ss, err
	}
	size := t.Size()
	if size == 0 || len(data)%size != 0 {
		return nil, fmt.Errorf("csv: %d bytes of %s: %w", len(data), t, ErrInvalid)
	}
	out := make([]string, len(data)/size)
	for i := range out {
		out[i] = FormatElement(t, data[i*size:])
	}
	return out, nil
}

func csvJoin(fields []string) string {
	for i, f := range fields {
		fields[i] = csvField(f)
	}
	return strings.Join(fields, ",")
}

func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
