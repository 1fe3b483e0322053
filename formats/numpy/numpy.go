// Package numpy reads NumPy .npy files and .npz archives as OMNI datasets
// (formats/omni), in pure Go.
//
// A .npy file is a dataset of one variable, "array", over dimensions
// dim_0, dim_1, …; an .npz archive (np.savez, a zip of .npy members; also
// np.savez_compressed, deflated) holds one variable per member, named as
// numpy.load names it (the member name without .npy; a "/" in it makes
// groups), over dimensions NAME_dim_0, …. Header versions 1.0, 2.0 and
// 3.0; C and Fortran order; either byte order (big-endian data is
// swapped on read). Element types: bool, int8…int64, uint8…uint64,
// float32, float64; float16 is widened to float32; complex64 and
// complex128 become float32/float64 with a trailing axis "real_imag" of
// size 2 (real, imaginary); datetime64 and timedelta64 become int64 with
// CF units ("nanoseconds since 1970-01-01T00:00:00") and NaT as
// _FillValue; 'S' is a fixed-size byte string and 'U' a variable-length
// string. Every variable carries its NumPy dtype as the attribute
// numpy_dtype. Object arrays (pickles), structured dtypes, longdouble and
// clongdouble are not supported: a .npy file of one fails to open with
// omni.ErrNotSupported; an .npz member of one is left out and named in
// the root attribute numpy_unsupported.
//
// Headers are parsed by this package (ParseHeader, fuzzed) and checked
// against the file's size before anything is read: a shape that needs
// more bytes than the file holds is omni.ErrCorrupt. Reads of a stored
// array touch only the bytes of the selection (blocks of 1 MiB); a
// compressed member is inflated from its start, once per read in file
// order.
//
// A File is safe for concurrent use.
package numpy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/iowarp/iowarp/formats/omni"
)

// ArrayName is the variable of a .npy file.
const ArrayName = "array"

func init() {
	omni.Register(omni.Driver{
		Name:  "npy",
		Exts:  []string{".npy"},
		Sniff: func(p omni.Probe) bool { return bytes.HasPrefix(p.Head, Magic) },
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
	omni.Register(omni.Driver{
		Name:  "npz",
		Exts:  []string{".npz"},
		Sniff: sniffNpz,
		Open:  func(p string) (omni.Reader, error) { return Open(p) },
	})
}

// sniffNpz: a zip archive named .npz, or whose first member is a .npy.
func sniffNpz(p omni.Probe) bool {
	h := p.Head
	if !bytes.HasPrefix(h, []byte("PK\x03\x04")) {
		return false
	}
	if omni.HasExt(p.Path, ".npz") {
		return true
	}
	if len(h) < 30 {
		return false
	}
	n := int(h[26]) | int(h[27])<<8
	return 30+n <= len(h) && strings.HasSuffix(string(h[30:30+n]), ".npy")
}

// File is an open .npy or .npz file.
type File struct {
	f      *os.File
	ds     *omni.Dataset
	arrays map[string]*array
	closer []io.Closer
}

var _ omni.Reader = (*File)(nil)

// Open reads the header(s) of the .npy or .npz file at p.
func Open(p string) (*File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	head := make([]byte, 4)
	if _, err := f.ReadAt(head, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w: %w", p, omni.ErrCorrupt, err)
	}
	nf := &File{f: f, arrays: map[string]*array{}}
	if bytes.Equal(head, []byte("PK\x03\x04")) {
		nf.ds = omni.NewDataset(p, "npz")
		err = nf.openZip(st.Size())
	} else {
		nf.ds = omni.NewDataset(p, "npy")
		err = nf.openNpy(st.Size())
	}
	if err == nil {
		err = nf.ds.Validate()
	}
	if err != nil {
		nf.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return nf, nil
}

// readHeader reads and parses the header at the start of src.
func readHeader(src io.ReaderAt, size int64) (Header, error) {
	pre := make([]byte, min(12, size))
	if _, err := src.ReadAt(pre, 0); err != nil && err != io.EOF {
		return Header{}, err
	}
	n, err := HeaderSize(pre)
	if err != nil {
		return Header{}, err
	}
	if n > size || n > maxHeader+12 {
		return Header{}, fmt.Errorf("npy: header of %d bytes in %d: %w", n, size, omni.ErrCorrupt)
	}
	b := make([]byte, n)
	if _, err := src.ReadAt(b, 0); err != nil && err != io.EOF {
		return Header{}, err
	}
	return ParseHeader(b)
}

func (nf *File) openNpy(size int64) error {
	h, err := readHeader(nf.f, size)
	if err != nil {
		return err
	}
	return nf.add(ArrayName, "dim_", h, nf.f, size)
}

// add makes the variable name (a path below the root) of the array h.
func (nf *File) add(name, dimPrefix string, h Header, src io.ReaderAt, size int64) error {
	a, err := newArray(h, src, size)
	if err != nil {
		return err
	}
	g := nf.ds.Root
	parts := strings.Split(strings.Trim(name, "/"), "/")
	for _, dir := range parts[:len(parts)-1] {
		g = g.Child(dir)
	}
	a.v.Name = parts[len(parts)-1]
	for i, n := range a.v.Shape {
		d := fmt.Sprintf("%s%d", dimPrefix, i)
		if a.e.complex && i == len(a.v.Shape)-1 {
			d = strings.TrimSuffix(dimPrefix, "dim_") + "real_imag"
		}
		a.v.Dims = append(a.v.Dims, d)
		g.AddDim(&omni.Dimension{Name: d, Size: n})
	}
	g.AddVariable(a.v)
	if nf.arrays[a.v.Path] != nil {
		return fmt.Errorf("npz: two members named %s: %w", a.v.Path, omni.ErrCorrupt)
	}
	nf.arrays[a.v.Path] = a
	return nil
}

func (nf *File) openZip(size int64) error {
	zr, err := zip.NewReader(nf.f, size)
	if err != nil {
		return fmt.Errorf("npz: %w: %w", omni.ErrCorrupt, err)
	}
	var skipped []string
	for _, zf := range zr.File {
		name, ok := strings.CutSuffix(zf.Name, ".npy")
		if !ok || strings.HasSuffix(zf.Name, "/") {
			continue // numpy.load lists only .npy members as arrays
		}
		src, msize, err := nf.member(zf)
		if err != nil {
			return fmt.Errorf("npz member %s: %w", zf.Name, err)
		}
		h, err := readHeader(src, msize)
		if err == nil {
			err = nf.add(name, path.Base(name)+"_dim_", h, src, msize)
		}
		if err != nil {
			if isUnsupported(err) {
				skipped = append(skipped, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			return fmt.Errorf("npz member %s: %w", zf.Name, err)
		}
	}
	if len(skipped) > 0 {
		nf.ds.Root.Attrs = append(nf.ds.Root.Attrs, omni.StringAttr("numpy_unsupported", skipped...))
	}
	return nil
}

// member returns a ReaderAt over the bytes of zf and their size.
func (nf *File) member(zf *zip.File) (io.ReaderAt, int64, error) {
	if zf.UncompressedSize64 > 1<<62 {
		return nil, 0, fmt.Errorf("size %d: %w", zf.UncompressedSize64, omni.ErrCorrupt)
	}
	size := int64(zf.UncompressedSize64)
	switch zf.Method {
	case zip.Store:
		off, err := zf.DataOffset()
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", omni.ErrCorrupt, err)
		}
		if int64(zf.CompressedSize64) != size {
			return nil, 0, fmt.Errorf("stored member of %d bytes holding %d: %w", zf.CompressedSize64, size, omni.ErrCorrupt)
		}
		return io.NewSectionReader(nf.f, off, size), size, nil
	case zip.Deflate:
		z := &inflater{f: zf}
		nf.closer = append(nf.closer, z)
		return z, size, nil
	}
	return nil, 0, fmt.Errorf("zip method %d: %w", zf.Method, omni.ErrNotSupported)
}

func isUnsupported(err error) bool { return err != nil && errors.Is(err, omni.ErrNotSupported) }

// Dataset returns the tree.
func (nf *File) Dataset() *omni.Dataset { return nf.ds }

// ReadInto reads the selection h of the variable at path into dst.
func (nf *File) ReadInto(p string, h omni.Hyperslab, dst []byte) error {
	a, err := nf.array(p, h)
	if err != nil {
		return err
	}
	if err := omni.CheckReadInto(p, a.v, h, dst); err != nil {
		return err
	}
	return a.read(h, dst)
}

// ReadStrings reads the selection h of a unicode ('U') variable.
func (nf *File) ReadStrings(p string, h omni.Hyperslab) ([]string, error) {
	a, err := nf.array(p, h)
	if err != nil {
		return nil, err
	}
	if err := omni.CheckReadStrings(p, a.v); err != nil {
		return nil, err
	}
	raw := make([]byte, h.Len()*int64(a.e.fsz))
	if err := a.read(h, raw); err != nil {
		return nil, err
	}
	return a.e.decodeUCS4(raw)
}

func (nf *File) array(p string, h omni.Hyperslab) (*array, error) {
	v, err := nf.ds.Var(p)
	if err != nil {
		return nil, err
	}
	a := nf.arrays[v.Path]
	if a == nil {
		return nil, fmt.Errorf("%s: %w", p, omni.ErrNotFound)
	}
	if err := h.Check(v.Shape); err != nil {
		return nil, err
	}
	return a, nil
}

// Close closes the file.
func (nf *File) Close() error {
	for _, c := range nf.closer {
		c.Close()
	}
	return nf.f.Close()
}
