package view

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/formats/omni"
)

// perFile is a format reader of datasets of generated values that differ
// per file: v (x: 64 Ki) float64 holding base(path)+i, so a page of one
// file read as another's shows.
type perFile struct{ opens atomic.Int32 }

const perFileLen = 64 << 10

func base(path string) float64 { return float64(len(path)*1000+int(path[len(path)-1])) * 1e6 }

func (f *perFile) Open(ctx context.Context, path string) (*omni.Dataset, error) {
	f.opens.Add(1)
	ds := omni.NewDataset(filepath.Base(path), "test")
	ds.Root.Variables = []*omni.Variable{{Name: "v", Path: "/v", DType: omni.Float64,
		Shape: []int64{perFileLen}, Dims: []string{"x"}}}
	return ds, nil
}

func (f *perFile) ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error) {
	b := make([]byte, 0, h.Bytes(v.DType))
	for i := range h.Count[0] {
		b = binary.NativeEndian.AppendUint64(b, math.Float64bits(base(path)+float64(h.Start[0]+i)))
	}
	n, err := dst.WriteAt(b, off)
	return int64(n), err
}

func (f *perFile) ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error) {
	return nil, omni.ErrNotSupported
}

// checkValues reads the whole of p and compares it with the values of
// the file at path.
func checkValues(t *testing.T, p *Plan, path string) {
	t.Helper()
	buf := make([]byte, p.Size())
	if n, err := p.ReadAt(context.Background(), buf, 0, nil); err != nil || n != len(buf) {
		t.Fatalf("read %s: %d bytes, %v", path, n, err)
	}
	for i := range perFileLen {
		if got, want := math.Float64frombits(binary.NativeEndian.Uint64(buf[8*i:])), base(path)+float64(i); got != want {
			t.Fatalf("%s: v[%d] = %v, want %v", path, i, got, want)
		}
	}
}

// TestDatasetsBounded: the engine keeps at most MaxDatasets loaded while
// more are used one after the other; one dropped reads correctly when
// used again (loaded again by a helper), and a plan opened on its
// dropped Generation still reads its own values, not the new
// Generation's pages. Before the bound every Dataset looked up stayed
// loaded (the daemon's RSS grew ~12 MiB per 100 datasets).
func TestDatasetsBounded(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 32 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	dir := t.TempDir()
	f := &perFile{}
	const bound, n = 4, 12
	var loads atomic.Int32
	e := New(Options{Formats: f, Pool: pool, BlockSize: 64 << 10, MaxDatasets: bound,
		OnLoad: func(*Dataset, *Generation) { loads.Add(1) }})
	defer e.Close()
	paths := make([]string, n)
	var first *Plan
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("f%c.nc", 'a'+i))
		if err := os.WriteFile(paths[i], []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := planOf(t, e, paths[i])
		checkValues(t, p, paths[i])
		if i == 0 {
			first = p
		}
		if l := e.Loaded(); l > bound {
			t.Fatalf("after %d datasets: %d loaded, want at most %d", i+1, l, bound)
		}
	}
	if f.opens.Load() != n {
		t.Fatalf("%d opens for %d datasets", f.opens.Load(), n)
	}
	// The first was dropped: used again, it is loaded again and reads
	// the same values; its old plan reads on, from pages of its own.
	p := planOf(t, e, paths[0])
	if p.Generation() == first.Generation() || f.opens.Load() != n+1 {
		t.Fatalf("first dataset not loaded again (%d opens)", f.opens.Load())
	}
	checkValues(t, p, paths[0])
	checkValues(t, first, paths[0])
	if p.base < first.base+first.nblocks*first.ppb {
		t.Fatalf("new plan's pages from %d overlap the dropped plan's %d+%d", p.base, first.base, first.nblocks*first.ppb)
	}
	if l := e.Loaded(); l > bound {
		t.Fatalf("%d loaded, want at most %d", l, bound)
	}
	if loads.Load() != n {
		t.Fatalf("OnLoad called %d times for %d datasets, unchanged, want %d", loads.Load(), n, n)
	}
}

func planOf(t *testing.T, e *Engine, path string) *Plan {
	t.Helper()
	gen, err := e.DatasetOf(path).Current()
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Plan("/", "v")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
