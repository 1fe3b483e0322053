package view

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/formats/omni"
)

// panicky is a Formats whose reads of blocks past the first two panic (a
// reader bug that slipped past every check): the engine must turn each
// into an EIO of that block.
type panicky struct{ reads atomic.Int32 }

// good is how many elements from the start read fine.
const good = 2 * 8192

func (f *panicky) Open(ctx context.Context, path string) (*omni.Dataset, error) {
	ds := omni.NewDataset(filepath.Base(path), "test")
	ds.Root.Variables = []*omni.Variable{{Name: "v", Path: "/v", DType: omni.Float64, Shape: []int64{64 << 10}, Dims: []string{"x"}}}
	return ds, nil
}

func (f *panicky) ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error) {
	f.reads.Add(1)
	if h.Start[0]+h.Count[0] <= good {
		n, err := dst.WriteAt(make([]byte, h.Bytes(v.DType)), off)
		return int64(n), err
	}
	var m map[string]int
	m["block"]++ // a nil-map write: a real runtime panic
	return 0, nil
}

func (f *panicky) ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error) {
	return nil, omni.ErrNotSupported
}

// TestFetchPanicIsEIO: a panic while a block is read, on the reader's
// goroutine or in a prefetch goroutine, fails that block's reads with EIO
// and leaves the process (the daemon) running.
func TestFetchPanicIsEIO(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	src := filepath.Join(t.TempDir(), "x.h5")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged atomic.Int32
	f := &panicky{}
	e := New(Options{Formats: f, Pool: pool, BlockSize: 64 << 10, RetryAfter: time.Hour,
		Logf: func(string, ...any) { logged.Add(1) }})
	defer e.Close()
	gen, err := e.DatasetOf(src).Current()
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Plan("/", "v")
	if err != nil {
		t.Fatal(err)
	}
	if p.nblocks < 4 {
		t.Fatalf("%d blocks, want several", p.nblocks)
	}
	if p.nblocks < 4 || p.blockLen(0) != 8192*8 {
		t.Fatalf("%d blocks of %d bytes, want 8 of 64 KiB", p.nblocks, p.blockLen(0))
	}
	// Sequential reads of the two good blocks: the second starts the
	// prefetch of blocks 2 and 3 in goroutines of their own, which panic.
	c := NewCursor()
	buf := make([]byte, 4096)
	for j := range int64(2) {
		if _, err := p.ReadAt(context.Background(), buf, j*p.blockLen(0), c); err != nil {
			t.Fatalf("good block %d: %v", j, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.failure(3) == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.failure(3); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("prefetched block 3: %v, want its panic remembered as EIO", err)
	}
	// A read on the reader's own goroutine: EIO, not a crash.
	if _, err := p.ReadAt(context.Background(), buf, 6*p.blockLen(0), c); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("read of block 6: %v, want EIO naming the panic", err)
	}
	if logged.Load() < 2 {
		t.Fatalf("logged %d failures, want one per failed block", logged.Load())
	}
}
