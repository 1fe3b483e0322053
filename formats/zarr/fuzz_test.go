package zarr

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/zarr/blosc"
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
	bl, _ := blosc.Compress([]byte("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40"), blosc.Options{CName: "lz4", Level: 5, TypeSize: 4, Shuffle: true})
	f.Add([]byte(`{"zarr_format":2,"shape":[2,2],"chunks":[2,2],"dtype":"<f4","compressor":{"id":"blosc","cname":"lz4","clevel":5,"shuffle":1,"blocksize":0},"fill_value":"NaN","order":"F","filters":null}`),
		[]byte(`{"_ARRAY_DIMENSIONS":["y","x"]}`), bl, []byte{})
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
		checkFuzzStore(t, dir)
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

// FuzzOpenV3: as FuzzOpen for Zarr v3: the input is one array's
// zarr.json and one chunk (or shard), written under the default and v2
// keys of chunk 0 in 1 to 3 dimensions.
func FuzzOpenV3(f *testing.F) {
	shard := append([]byte{7, 9}, make([]byte, 32)...)
	binary.LittleEndian.PutUint64(shard[2:], 0)
	binary.LittleEndian.PutUint64(shard[10:], 2)
	binary.LittleEndian.PutUint64(shard[18:], math.MaxUint64)
	binary.LittleEndian.PutUint64(shard[26:], math.MaxUint64)
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},`+
		`"chunk_key_encoding":{"name":"default"},"fill_value":5,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2],`+
		`"codecs":[{"name":"bytes"}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}],"index_location":"end"}}],"dimension_names":["x"]}`), shard)
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[2,2],"data_type":"int16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2,2]}},`+
		`"chunk_key_encoding":{"name":"v2","configuration":{"separator":"."}},"fill_value":0,"codecs":[{"name":"transpose","configuration":{"order":[1,0]}},`+
		`{"name":"bytes","configuration":{"endian":"big"}},{"name":"crc32c"}]}`), []byte("\x00\x01\x00\x02\x00\x03\x00\x04\x8e\x2c\x1a\x5b"))
	f.Add([]byte(`{"zarr_format":3,"node_type":"array","shape":[3],"data_type":"float64","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},`+
		`"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":"NaN","codecs":[{"name":"bytes"},{"name":"blosc","configuration":{"cname":"lz4"}}]}`),
		[]byte("\x02\x01\x13\x08\x18\x00\x00\x00\x18\x00\x00\x00\x28\x00\x00\x00"+"\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x08\x40"))
	f.Fuzz(func(t *testing.T, meta, chunk []byte) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"group","attributes":{"a":[1,2]}}`))
		v := filepath.Join(dir, "v")
		write(t, filepath.Join(v, "zarr.json"), meta)
		// c/0 is a file, so the default keys of rank 2 and 3 (c/0/0)
		// are tried with the "." separator only.
		for _, k := range []string{"c/0", "c.0", "0", "c.0.0", "0.0", "c.0.0.0", "0.0.0"} {
			write(t, filepath.Join(v, k), chunk)
		}
		checkFuzzStore(t, dir)
	})
}

// checkFuzzStore opens dir: an error returns no store; an opened store's
// dataset is valid and each small variable reads whole or fails.
func checkFuzzStore(t *testing.T, dir string) {
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
}
