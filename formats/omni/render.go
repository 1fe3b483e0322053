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

// WriteCSV renders the selection h of v (data: its raw bytes) as CSV.
// A 1-D or scalar variable is one column named after it; an N-D variable
// is in long form: one index column per dimension (absolute indices in v),
// then the value.
func WriteCSV(w io.Writer, v *Variable, h Hyperslab, data []byte) error {
	if err := WriteCSVHeader(w, v, len(h.Count)); err != nil {
		return err
	}
	return WriteCSVRows(w, v, h, data)
}

// WriteCSVHeader writes the header line of WriteCSV for a selection of
// rank dimensions of v.
func WriteCSVHeader(w io.Writer, v *Variable, rank int) error {
	var line string
	if rank > 1 {
		line = csvJoin(append(append([]string(nil), v.Dims...), v.Name))
	} else {
		line = csvField(v.Name)
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// WriteCSVRows writes the rows of WriteCSV for selection h of v (data:
// its raw bytes) without the header, so that the blocks of a large
// selection, each with its own h, make one CSV one after the other.
func WriteCSVRows(w io.Writer, v *Variable, h Hyperslab, data []byte) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	vals, err := csvValues(v.DType, data)
	if err != nil {
		return err
	}
	if int64(len(vals)) != h.Len() {
		return fmt.Errorf("csv of %s: %d values for %d selected: %w", v.Path, len(vals), h.Len(), ErrInvalid)
	}
	long := len(h.Count) > 1
	idx := make([]int64, len(h.Count))
	for _, val := range vals {
		if long {
			for i, k := range idx {
				bw.WriteString(strconv.FormatInt(h.Start[i]+k*h.StrideAt(i), 10))
				bw.WriteByte(',')
			}
			next(idx, h.Count)
		}
		bw.WriteString(val)
		bw.WriteByte('\n')
	}
	return bw.Flush()
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
