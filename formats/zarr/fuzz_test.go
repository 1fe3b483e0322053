package zarr

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iowarp/iowarp/formats/omni"
)

// FuzzOpen: a Zarr store is metadata anyone with write access to the
// backing directory wrote. The input is one array's .zarray and .zattrs,
// one chunk, written under the keys of chunk 0 in 1 to 3 dimensions, and
// the omni.json manifest (none if empty).
// No panic; an error returns no store; an opened store's dataset is
// valid, and reading each small variable either fails or returns its
// bytes.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<f8","compressor":null,"fill_value":"NaN","order":"C","filters":null}`),
		[]byte(`{"_ARRAY_DIMENSIONS":["x"],"units":"days since 2000-01-01","scale":[1,2.5]}`), make([]byte, 16), []byte(`{"omni":1,"schema":{"root":{"name":"","path":"/","variables":[{"name":"v","path":"/v","dtype":"f8","shape":[4],"dims":["t"]}]}}}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[2,3],"chunks":[1,3],"dtype":">i4","compressor":{"id":"zlib","level":1},"fill_value":0,"order":"C","filters":null,"dimension_separator":"."}`),
		[]byte(`{"_ARRAY_DIMENSIONS":["y","x"]}`), []byte("x\x9cc`\xc0\x0e\x00\x00\x18\x00\x01"), []byte{})
	f.Add([]byte(`{"zarr_format":2,"shape":[1],"chunks":[1],"dtype":"|S4","compressor":{"id":"zstd"},"fill_value":null,"order":"F","filters":[{"id":"delta"}]}`),
		[]byte(`{"_ARRAY_DIMENSIONS":[1]}`), []byte{}, []byte(`{"schema":{"root":null}}`))
	f.Add([]byte(`{"zarr_format":2,"shape":[1],"chunks":[1125899906842624],"dtype":"<u1","compressor":{"id":"gzip"},"fill_value":7,"order":"C","filters":null}`),
		[]byte(`{"n":NaN}`), []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03c\x07\x00.zfL\x01\x00\x00\x00"), []byte{})
	f.Fuzz(func(t *testing.T, zarray, zattrs, chunk, manifest []byte) {
		dir := t.TempDir()
		v := filepath.Join(dir, "v")
		write(t, filepath.Join(dir, ".zgroup"), []byte(`{"zarr_format":2}`))
		write(t, filepath.Join(v, ".zarray"), zarray)
		write(t, filepath.Join(v, ".zattrs"), zattrs)
		for _, k := range []string{"0", "0.0", "0.0.0"} {
			write(t, filepath.Join(v, k), chunk)
		}
		if len(manifest) > 0 {
			write(t, filepath.Join(dir, Manifest), manifest)
		}
		s, err := Open(dir)
		if err != nil {
			if s != nil {
				t.Fatalf("error %v with a store", err)
			}
			return
		}
		defer s.Close()
		if err := s.Dataset().Validate(); err != nil {
			t.Fatalf("opened store has an invalid dataset: %v", err)
		}
		for _, vr := range s.Dataset().Variables() {
			if vr.DType == omni.String || omni.All(vr.Shape).Bytes(vr.DType) > 1<<20 {
				continue
			}
			b, err := omni.ReadAll(s, vr)
			if err == nil && int64(len(b)) != omni.All(vr.Shape).Bytes(vr.DType) {
				t.Fatalf("%s: read %d bytes", vr.Path, len(b))
			}
		}
	})
}

func write(t *testing.T, p string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
