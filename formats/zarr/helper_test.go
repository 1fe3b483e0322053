package zarr_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iowarp/iowarp/formats/helper"
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
