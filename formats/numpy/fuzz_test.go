package numpy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iowarp/iowarp/formats/omni"
)

func npyHeader(dict string) []byte {
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(b, dict...)
}

// FuzzParseHeader: the header is bytes anyone who wrote the file chose.
// No panic; an error returns the zero Header; a parsed header has a
// known dtype, a shape whose element count fits an int64, and its data
// offset inside what was parsed.
func FuzzParseHeader(f *testing.F) {
	f.Add(npyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }"))
	f.Add(npyHeader("{'descr': '>c16', 'fortran_order': True, 'shape': (), }"))
	f.Add(npyHeader("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2L,)}"))
	f.Add(npyHeader("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}"))
	f.Add(append([]byte("\x93NUMPY\x03\x00\x20\x00\x00\x00"), "{'descr':'<U3','fortran_order':False,'shape':(9223372036854775807,2)}"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			if h.Descr != "" || h.Shape != nil || h.Offset != 0 || h.Fortran {
				t.Fatalf("error %v with a header %+v", err, h)
			}
			return
		}
		if _, err := parseDescr(h.Descr); err != nil {
			t.Fatalf("parsed header with dtype %q: %v", h.Descr, err)
		}
		n := int64(1)
		for _, s := range h.Shape {
			if s < 0 || (s != 0 && n > (1<<63-1)/s) {
				t.Fatalf("shape %v", h.Shape)
			}
			n *= s
		}
		if h.Offset <= 0 || h.Offset > int64(len(b)) {
			t.Fatalf("offset %d of %d bytes", h.Offset, len(b))
		}
	})
}

// FuzzOpen: a whole .npy file. No panic; an error returns no File; an
// opened file's dataset is valid and its variable reads whole or fails.
func FuzzOpen(f *testing.F) {
	f.Add(append(npyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"), make([]byte, 16)...))
	f.Add(append(npyHeader("{'descr': '>c8', 'fortran_order': True, 'shape': (2, 1), }"), make([]byte, 16)...))
	f.Add(append(npyHeader("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }"), 0x41, 0, 0, 0, 0, 0xd8, 0, 0))
	f.Add(append(npyHeader("{'descr': '<f2', 'fortran_order': True, 'shape': (3, 2), }"), make([]byte, 11)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.npy")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(p)
		if err != nil {
			if r != nil {
				t.Fatalf("error %v with a file", err)
			}
			return
		}
		defer r.Close()
		if err := r.Dataset().Validate(); err != nil {
			t.Fatal(err)
		}
		for _, v := range r.Dataset().Variables() {
			if v.Len() > 1<<16 {
				continue
			}
			got, err := omni.ReadAll(r, v)
			if err == nil && v.DType != omni.String && int64(len(got)) != v.Len()*int64(v.DType.Size()) {
				t.Fatalf("read %d bytes", len(got))
			}
		}
	})
}
