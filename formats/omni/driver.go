package omni

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Reader is an open dataset. Readers that wrap C libraries are not safe
// for concurrent use; callers serialise (the helper processes do).
type Reader interface {
	Dataset() *Dataset
	// ReadInto reads the selection h of the fixed-size variable at path
	// into dst, which holds exactly h.Bytes(v.DType) bytes, C order.
	ReadInto(path string, h Hyperslab, dst []byte) error
	// ReadStrings reads the selection of a variable-length string variable.
	ReadStrings(path string, h Hyperslab) ([]string, error)
	Close() error
}

// CheckReadInto checks the arguments of a Reader's ReadInto of v (asked
// for as path): a fixed-size variable, and dst of exactly h.Bytes(v.DType)
// bytes. h itself is checked against v's shape by the caller.
func CheckReadInto(path string, v *Variable, h Hyperslab, dst []byte) error {
	if v.DType == String {
		return fmt.Errorf("%s: strings: use ReadStrings: %w", path, ErrInvalid)
	}
	if int64(len(dst)) != h.Bytes(v.DType) {
		return fmt.Errorf("%s: buffer of %d bytes for %d: %w", path, len(dst), h.Bytes(v.DType), ErrInvalid)
	}
	return nil
}

// CheckReadStrings checks that a Reader's ReadStrings of v (asked for as
// path) is of a string variable.
func CheckReadStrings(path string, v *Variable) error {
	if v.DType != String {
		return fmt.Errorf("%s is %s, not string: %w", path, v.DType, ErrInvalid)
	}
	return nil
}

// ReadFunc reads a whole variable as raw bytes (EncodeStrings form for
// variable-length strings). Writers pull data through it.
type ReadFunc func(v *Variable) ([]byte, error)

// Driver is a format: how to recognise, open and write it.
type Driver struct {
	Name string // hdf5, netcdf, zarr, csv, jsonl, parquet
	// Sniff reports whether the file or directory p shows is in this
	// format. It looks at nothing but p: detection works the same on a
	// local path (Detect) and on a mount's file layer (fusefs).
	Sniff func(p Probe) bool
	// Exts are the file name extensions of the format (".h5"): a
	// listing shows such files as datasets without reading them.
	Exts []string
	Open func(path string) (Reader, error)
	// Write creates path holding ds, data pulled through read. Optional.
	Write func(path string, ds *Dataset, read ReadFunc) error
	// Priority orders sniffing: higher first (NetCDF-4 before HDF5).
	Priority int
}

var (
	driversMu sync.Mutex
	drivers   []Driver
)

// Register adds a format driver; format packages call it from init.
func Register(d Driver) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers = append(drivers, d)
	slices.SortStableFunc(drivers, func(a, b Driver) int { return b.Priority - a.Priority })
}

// Drivers returns the registered drivers, in sniffing order.
func Drivers() []Driver {
	driversMu.Lock()
	defer driversMu.Unlock()
	return slices.Clone(drivers)
}

// DriverNamed returns the driver called name.
func DriverNamed(name string) (Driver, error) {
	for _, d := range Drivers() {
		if d.Name == name {
			return d, nil
		}
	}
	return Driver{}, fmt.Errorf("format %q: %w (registered: %s)", name, ErrNotSupported, strings.Join(DriverNames(), ", "))
}

// DriverNames lists the registered format names.
func DriverNames() []string {
	var out []string
	for _, d := range Drivers() {
		out = append(out, d.Name)
	}
	return out
}

// Probe is what format detection looks at.
type Probe struct {
	// Path is the file's path or name; extensions are read from it.
	Path string
	// Head is the file's first 4 KiB (less for a shorter file); nil for
	// a directory.
	Head []byte
	// Has reports whether a directory holds an entry called name (nil
	// for a file).
	Has func(name string) bool
}

// Recognise returns the driver, in sniffing order, that claims p.
func Recognise(p Probe) (Driver, bool) {
	for _, d := range Drivers() {
		if d.Sniff != nil && d.Sniff(p) {
			return d, true
		}
	}
	return Driver{}, false
}

// HasDatasetExt reports whether name has the extension of a registered
// format.
func HasDatasetExt(name string) bool {
	for _, d := range Drivers() {
		if HasExt(name, d.Exts...) {
			return true
		}
	}
	return false
}

// Detect returns the driver for the file or store at path.
func Detect(path string) (Driver, error) {
	head, err := readHead(path)
	if err != nil {
		return Driver{}, err
	}
	p := Probe{Path: path, Head: head}
	if head == nil {
		p.Has = func(name string) bool {
			_, err := os.Stat(filepath.Join(path, name))
			return err == nil
		}
	}
	if d, ok := Recognise(p); ok {
		return d, nil
	}
	return Driver{}, fmt.Errorf("%s: format not recognised: %w", path, ErrNotSupported)
}

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, nil
	}
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	return head[:n], nil
}

// OpenFile detects the format of path and opens it. The reader shows
// the names the file stores escaped (EscapeName): any name is a path
// component.
func OpenFile(path string) (Reader, error) {
	d, err := Detect(path)
	if err != nil {
		return nil, err
	}
	r, err := d.Open(path)
	if err != nil {
		return nil, err
	}
	return EscapedReader(r), nil
}

// HDF5Signature starts every HDF5 file (at 0, 512, 1024, … with a user block).
var HDF5Signature = []byte("\x89HDF\r\n\x1a\n")

// HasHDF5Signature reports the signature at offset 0 or a power-of-two
// user-block offset within head.
func HasHDF5Signature(head []byte) bool {
	for off := 0; off+len(HDF5Signature) <= len(head); off = max(512, off*2) {
		if bytes.Equal(head[off:off+len(HDF5Signature)], HDF5Signature) {
			return true
		}
	}
	return false
}

// HasExt reports whether path ends in one of exts (case-insensitive).
func HasExt(path string, exts ...string) bool {
	e := strings.ToLower(filepath.Ext(path))
	return slices.Contains(exts, e)
}

// ReadAll reads a whole variable of r in raw form (EncodeStrings for
// variable-length strings).
func ReadAll(r Reader, v *Variable) ([]byte, error) {
	return ReadSlab(r, v, All(v.Shape))
}

// ReadSlab reads a selection of v in raw form.
func ReadSlab(r Reader, v *Variable, h Hyperslab) ([]byte, error) {
	if err := h.Check(v.Shape); err != nil {
		return nil, err
	}
	if v.DType == String {
		ss, err := r.ReadStrings(v.Path, h)
		if err != nil {
			return nil, err
		}
		return EncodeStrings(ss), nil
	}
	buf := make([]byte, h.Bytes(v.DType))
	if err := r.ReadInto(v.Path, h, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
