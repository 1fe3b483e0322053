package zarr_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/zarr"
)

// TestHelperViews reads Blosc v2 stores (zarr-python, xarray's
// to_zarr) and the v3 store as the OMNI views do: through a helper
// process confined to the store's directory (formats/helper, Landlock and
// seccomp), each variable equal to the reference values.
func TestHelperViews(t *testing.T) {
	dir := zarr.Fixtures(t)
	p := helper.New(helper.Options{Size: 1})
	defer p.Close()
	ctx := helper.WithAs(context.Background(), helper.As{Root: dir})
	n := 0
	for _, store := range []string{"xarray", "blosclz_2", "lz4_1", "zstd_0", "v3"} {
		ds, err := p.Open(ctx, filepath.Join(dir, store))
		if err != nil {
			t.Fatalf("%s: %v", store, err)
		}
		if ds.Format != "zarr" {
			t.Errorf("%s: format %q", store, ds.Format)
		}
		for _, v := range ds.Variables() {
			want, err := os.ReadFile(filepath.Join(dir, store+"."+strings.ReplaceAll(v.Path[1:], "/", "~")+".bin"))
			if err != nil {
				t.Fatalf("%s %s: %v", store, v.Path, err)
			}
			got, err := p.ReadAll(ctx, filepath.Join(dir, store), v)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s %s: %d bytes, %v", store, v.Path, len(got), err)
			}
			n++
		}
	}
	if n < 20 {
		t.Fatalf("%d variables read", n)
	}
}

// TestZarrMalformed: the vendored malformed stores
// (formats/testdata/zarr-malformed), opened and read in a helper as the
// views do: the damaged array ("bad", or the bare store's array) fails
// or is not listed, the good one reads its values, and a store that
// fails as a whole fails with a clear error, never a crash or a hang.
func TestZarrMalformed(t *testing.T) {
	stores, _ := filepath.Glob("../testdata/zarr-malformed/*.zarr")
	if len(stores) < 10 {
		t.Fatalf("%d stores in the corpus", len(stores))
	}
	p := helper.New(helper.Options{Size: 1, Deadline: 10 * time.Second, Logf: t.Logf})
	defer p.Close()
	root, _ := filepath.Abs("../testdata/zarr-malformed")
	ctx := helper.WithAs(context.Background(), helper.As{Root: root})
	goods := 0
	for _, s := range stores {
		s, _ = filepath.Abs(s)
		name := filepath.Base(s)
		ds, err := p.Open(ctx, s)
		if err != nil {
			if errors.Is(err, helper.ErrTimeout) || errors.Is(err, helper.ErrCrashed) {
				t.Errorf("%s: %v", name, err)
			}
			t.Logf("%s: %v", name, err)
			continue
		}
		for _, v := range ds.Variables() {
			got, err := p.ReadAll(ctx, s, v)
			switch {
			case v.Path == "/good" && err == nil:
				want := make([]byte, 0, len(got))
				for i := range omni.All(v.Shape).Len() {
					want = binary.LittleEndian.AppendUint32(want, uint32(i))
					if v.DType == omni.Int16 {
						want = want[:len(want)-2]
					}
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s /good: %v, want 0 1 2 ...", name, got)
				}
				goods++
			case v.Path == "/good":
				t.Errorf("%s /good: %v", name, err)
			case err == nil:
				t.Errorf("%s %s: read %d bytes of a damaged array", name, v.Path, len(got))
			case errors.Is(err, helper.ErrTimeout) || errors.Is(err, helper.ErrCrashed):
				t.Errorf("%s %s: %v", name, v.Path, err)
			}
		}
	}
	if goods < len(stores)-3 {
		t.Errorf("the good array read in %d stores of %d", goods, len(stores))
	}
}
