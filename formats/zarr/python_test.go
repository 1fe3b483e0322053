package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/iowarp/iowarp/formats/omni"
)

const python = "/usr/bin/python3"

func needZarrPython(t *testing.T) {
	t.Helper()
	if exec.Command(python, "-c", "import zarr, numcodecs, numpy, xarray").Run() != nil {
		t.Skip("python3-zarr / python3-xarray missing (make deps)")
	}
}

// fixtureDir holds the stores testdata/make_v2.py and make_v3.py write,
// made once for the package's tests and removed by TestMain.
var fixture struct {
	once sync.Once
	dir  string
	err  error
}

func fixtures(t *testing.T) string {
	t.Helper()
	needZarrPython(t)
	fixture.once.Do(func() {
		if fixture.dir, fixture.err = os.MkdirTemp("", "zarr-fixtures"); fixture.err != nil {
			return
		}
		for _, script := range []string{"testdata/make_v2.py", "testdata/make_v3.py"} {
			if out, err := exec.Command(python, script, fixture.dir).CombinedOutput(); err != nil {
				fixture.err = fmt.Errorf("%s: %v\n%s", script, err, out)
				return
			}
		}
	})
	if fixture.err != nil {
		t.Fatal(fixture.err)
	}
	return fixture.dir
}

func removeFixtures() {
	if fixture.dir != "" {
		os.RemoveAll(fixture.dir)
	}
}

func runPython(t *testing.T, script string, args ...string) {
	t.Helper()
	out, err := exec.Command(python, append([]string{script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// checkStores opens every store under dir and compares each variable
// with dir/STORE.PATH.bin (PATH with ~ for /), returning how many were
// compared.
func checkStores(t *testing.T, dir string) int {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, de := range des {
		if !de.IsDir() {
			continue
		}
		n += checkStore(t, filepath.Join(dir, de.Name()), filepath.Join(dir, de.Name()))
	}
	return n
}

// checkStore compares each variable of the store at p with ref.PATH.bin.
func checkStore(t *testing.T, p, ref string) int {
	t.Helper()
	s, err := Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer s.Close()
	n := 0
	for _, v := range s.Dataset().Variables() {
		want, err := os.ReadFile(ref + "." + strings.ReplaceAll(v.Path[1:], "/", "~") + ".bin")
		if err != nil {
			t.Errorf("%s: no reference: %v", v.Path, err)
			continue
		}
		got, err := omni.ReadAll(s, v)
		if err != nil {
			t.Errorf("%s %s: %v", filepath.Base(p), v.Path, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s %s: values differ from zarr-python's", filepath.Base(p), v.Path)
		}
		n++
	}
	return n
}

// TestZarrPython: stores zarr-python 2.13 writes with Blosc (blosclz, lz4,
// lz4hc, zlib, zstd, snappy; no shuffle, shuffle, bitshuffle), C and F
// order, big-endian, chunks never written, consolidated or not, and
// xarray's default to_zarr, read equal to zarr-python's own read.
func TestZarrPython(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixtures(t))); err != nil {
		t.Fatal(err)
	}
	// lz4_1 is consolidated: its metadata is read from .zmetadata alone,
	// as zarr.open_consolidated does.
	for _, f := range []string{"sub/.zgroup", "temp/.zarray", ".zattrs"} {
		if err := os.Remove(filepath.Join(dir, "lz4_1", f)); err != nil {
			t.Fatal(err)
		}
	}
	if n := checkStores(t, dir); n < 18*6+4+5 {
		t.Fatalf("only %d arrays compared", n)
	}
	for _, name := range []string{"zstd_2", "lz4_1"} {
		s, err := Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := omni.AttrString(s.Dataset().Root.Attrs, "title"); got != name {
			t.Errorf("%s: title %q", name, got)
		}
	}
	x, err := Open(filepath.Join(dir, "xarray"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := x.Dataset().Var("/t2m")
	if err != nil || strings.Join(v.Dims, ",") != "time,lat,lon" || omni.AttrString(v.Attrs, "units") != "K" {
		t.Fatalf("xarray t2m: %+v %v", v, err)
	}
}

// TestV3: a Zarr v3 store written from the specification (zarr.json;
// blosc, zstd, gzip, crc32c, transpose, big-endian bytes; two sharded
// arrays, index at the end with crc32c and at the start, with inner
// chunks and a whole shard never written; default and v2 chunk keys; a
// rank-0 array) reads equal to numpy's values.
func TestV3(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "v3"), os.DirFS(filepath.Join(fixtures(t), "v3"))); err != nil {
		t.Fatal(err)
	}
	if n := checkStore(t, filepath.Join(dir, "v3"), filepath.Join(fixtures(t), "v3")); n != 5 {
		t.Fatalf("%d arrays compared, want 5", n)
	}
	s, err := Open(filepath.Join(dir, "v3"))
	if err != nil {
		t.Fatal(err)
	}
	ds := s.Dataset()
	if got := omni.AttrString(ds.Root.Attrs, "title"); got != "v3 by hand" {
		t.Errorf("title %q", got)
	}
	v, err := ds.Var("/plain")
	if err != nil || strings.Join(v.Dims, ",") != "y,x" || omni.AttrString(v.Attrs, "units") != "m" {
		t.Fatalf("plain: %+v %v", v, err)
	}
	// A shard index whose checksum does not match is an error, not fill.
	p := filepath.Join(dir, "v3", "grp", "sharded", "c", "0", "0")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-6] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sv, _ := ds.Var("/grp/sharded")
	if _, err := omni.ReadAll(s, sv); !errors.Is(err, omni.ErrCorrupt) || !strings.Contains(err.Error(), "crc32c") {
		t.Fatalf("corrupt shard index: %v", err)
	}
}

// TestExportZarrPython: Write (export --format zarr) of a zarr-python
// store and of the hand-written v3 store: zarr-python opens each through
// its .zmetadata, finds Blosc on every array and reads the source's
// values; this package reads the export back equal too.
func TestExportZarrPython(t *testing.T) {
	dir := fixtures(t)
	tmp := t.TempDir()
	args := []string{dir}
	for _, name := range []string{"zstd_2", "xarray", "v3"} {
		src, err := Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(tmp, name)
		if err := Write(out, src.Dataset(), func(v *omni.Variable) ([]byte, error) { return omni.ReadAll(src, v) }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkStore(t, out, filepath.Join(dir, name))
		args = append(args, out)
	}
	runPython(t, "testdata/check_export.py", args...)
}

// TestOversizedChunk: a chunk file far larger than any encoding of its
// chunk is an error before it is read.
func TestOversizedChunk(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".zgroup"), []byte(`{"zarr_format":2}`))
	write(t, filepath.Join(dir, "v", ".zarray"), []byte(`{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"<f8","compressor":{"id":"zlib"},"fill_value":0,"order":"C","filters":null}`))
	write(t, filepath.Join(dir, "v", "0"), make([]byte, 1<<17))
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := s.Dataset().Var("/v")
	if _, err := omni.ReadAll(s, v); !errors.Is(err, omni.ErrCorrupt) || !strings.Contains(err.Error(), "bytes stored") {
		t.Fatalf("oversized chunk: %v", err)
	}
}

// TestSeparator: a chunk key separator other than "." or "/" (one that
// would lead out of the array's directory) is refused.
func TestSeparator(t *testing.T) {
	for _, c := range []struct{ name, doc, meta string }{
		{"v2", ".zarray", `{"zarr_format":2,"shape":[4,4],"chunks":[2,2],"dtype":"<u1","compressor":null,"fill_value":0,"order":"C","filters":null,"dimension_separator":"/../"}`},
		{"v3", "zarr.json", `{"zarr_format":3,"node_type":"array","shape":[4,4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,2]}},` +
			`"chunk_key_encoding":{"name":"default","configuration":{"separator":"/../"}},"fill_value":0,"codecs":[{"name":"bytes"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.name == "v2" {
				write(t, filepath.Join(dir, ".zgroup"), []byte(`{"zarr_format":2}`))
			} else {
				write(t, filepath.Join(dir, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group"}`))
			}
			write(t, filepath.Join(dir, "v", c.doc), []byte(c.meta))
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			v, _ := s.Dataset().Var("/v")
			if _, err := omni.ReadAll(s, v); !errors.Is(err, omni.ErrCorrupt) || !strings.Contains(err.Error(), "separator") {
				t.Fatalf("separator /../: %v", err)
			}
		})
	}
}

// TestUnreadableArrays: arrays this package cannot read (numcodecs
// filters Delta and FixedScaleOffset, a unicode dtype, a .zarray cut
// short) fail alone: the store opens, every other array reads equal to
// zarr-python's read, the filtered arrays are variables whose reads fail
// with ErrNotSupported, and the root's zarr_unreadable names each with
// its reason. A bare-array store (the root is an array) is a dataset of
// that array. Before, the cut .zarray failed the whole store, the
// unicode array vanished without a trace and a bare-array store did not
// open.
func TestUnreadableArrays(t *testing.T) {
	needZarrPython(t)
	dir := t.TempDir()
	runPython(t, "testdata/make_partial.py", dir)
	if n := checkStore(t, filepath.Join(dir, "bare.zarr"), filepath.Join(dir, "bare")); n != 1 {
		t.Fatalf("bare-array store: %d arrays compared", n)
	}
	s, err := Open(filepath.Join(dir, "partial"))
	if err != nil {
		t.Fatalf("a store with unreadable arrays: %v", err)
	}
	ds := s.Dataset()
	for _, p := range []string{"/ok", "/sub/ok2"} {
		v, err := ds.Var(p)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(filepath.Join(dir, "partial."+strings.ReplaceAll(p[1:], "/", "~")+".bin"))
		if got, err := omni.ReadAll(s, v); err != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: %d bytes, %v; zarr-python reads %d others", p, len(got), err, len(want))
		}
	}
	for _, p := range []string{"/delta", "/fso"} {
		v, err := ds.Var(p)
		if err != nil {
			t.Fatalf("%s is not listed: %v", p, err)
		}
		if _, err := omni.ReadAll(s, v); !errors.Is(err, omni.ErrNotSupported) || !strings.Contains(err.Error(), "filters") {
			t.Errorf("%s: read %v, want filters: ErrNotSupported", p, err)
		}
	}
	for _, p := range []string{"/text", "/broken"} {
		if _, err := ds.Var(p); err == nil {
			t.Errorf("%s is a variable", p)
		}
	}
	why := omni.AttrString(ds.Root.Attrs, AttrUnreadable)
	for _, w := range []string{`broken: .zarray: corrupt`, `delta: v2 filters "delta"`, `fso: v2 filters "fixedscaleoffset"`, `text: numpy dtype "<U3"`} {
		if !strings.Contains(why, w) {
			t.Errorf("zarr_unreadable %q does not say %q", why, w)
		}
	}
}

// TestBareArrayV3: a v3 store whose root is an array is a dataset of it.
func TestBareArrayV3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "level.zarr")
	write(t, filepath.Join(dir, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"array","shape":[5],"data_type":"uint8",`+
		`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},"chunk_key_encoding":{"name":"default"},"fill_value":9,"codecs":[{"name":"bytes"}]}`))
	write(t, filepath.Join(dir, "c", "0"), []byte{1, 2, 3})
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Dataset().Var("/level")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := omni.ReadAll(s, v); err != nil || !bytes.Equal(got, []byte{1, 2, 3, 9, 9}) {
		t.Fatalf("level: %v %v", got, err)
	}
}
