package view

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/formats/omni"
)

// records is the record count of the NetCDF classic mutant that made the
// daemon render 44 MB of values as one ~440 MB CSV text.
const records = 2_752_515

// generated is a format reader of one dataset of generated values: v
// (record, pair) float64 holding rec*2+pair+0.25, with no coordinate
// variables, so data.csv is in long form with index columns.
type generated struct{}

func (generated) Open(ctx context.Context, path string) (*omni.Dataset, error) {
	ds := omni.NewDataset(filepath.Base(path), "test")
	ds.Root.Variables = []*omni.Variable{{Name: "v", Path: "/v", DType: omni.Float64,
		Shape: []int64{records, 2}, Dims: []string{"record", "pair"}}}
	return ds, nil
}

func (generated) ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error) {
	b := make([]byte, 0, h.Bytes(v.DType))
	for r := range h.Count[0] {
		for p := range h.Count[1] {
			val := float64((h.Start[0]+r)*2+h.Start[1]+p) + 0.25
			b = binary.NativeEndian.AppendUint64(b, math.Float64bits(val))
		}
	}
	n, err := dst.WriteAt(b, off)
	return int64(n), err
}

func (generated) ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error) {
	return nil, omni.ErrNotSupported
}

// peakHeap samples the heap in use until stop is closed and returns its
// peak.
func peakHeap(stop <-chan struct{}, peak *atomic.Uint64) {
	var ms runtime.MemStats
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak.Load() {
			peak.Store(ms.HeapInuse)
		}
		select {
		case <-stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestCSVBoundedMemory: data.csv of 2,752,515 records (44 MB of values,
// over 100 MB of CSV text) is sized and read whole with the heap growing
// by less than 16 MiB, and reads the values generated, row by row. It
// failed before data.csv was rendered by chunks: the whole text was
// built in memory at the first stat.
func TestCSVBoundedMemory(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	src := filepath.Join(t.TempDir(), "x.nc")
	if err := os.WriteFile(src, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Formats: generated{}, Pool: pool, BlockSize: 1 << 20})
	defer e.Close()
	gen, err := e.DatasetOf(src).Current()
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.Plan("/", "v")
	if err != nil {
		t.Fatal(err)
	}
	// A low GC target, so the heap in use follows what is live rather
	// than the garbage the default pacing lets accumulate.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { peakHeap(stop, &peak); close(done) }()

	size, err := p.CSVSize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.CSV(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows := checkRows(t, io.NewSectionReader(readerAt{r}, 0, size))
	close(stop)
	<-done

	if size < 100<<20 || r.Size() != size {
		t.Fatalf("data.csv of %d bytes (reader: %d), want over 100 MiB", size, r.Size())
	}
	if rows != 2*records {
		t.Fatalf("%d rows, want %d", rows, 2*records)
	}
	growth := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("data.csv: %d bytes, %d rows, peak heap growth %.1f MiB", size, rows, float64(growth)/(1<<20))
	if growth > 16<<20 {
		t.Fatalf("heap grew by %.1f MiB rendering %d MiB of CSV, want under 16 MiB", float64(growth)/(1<<20), size>>20)
	}
}

// readerAt adapts a CSVReader to io.ReaderAt, reading 1 MiB at a time as
// FUSE does.
type readerAt struct{ r *CSVReader }

func (a readerAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := a.r.ReadAt(context.Background(), b, off)
	if err == nil && n < len(b) {
		err = io.EOF
	}
	return n, err
}

// checkRows checks the header and every row of the CSV (record, pair,
// value) against the generated values and returns the rows read.
func checkRows(t *testing.T, src io.Reader) int64 {
	t.Helper()
	sc := bufio.NewScanner(bufio.NewReaderSize(src, 1<<20))
	if !sc.Scan() || sc.Text() != "record,pair,v" {
		t.Fatalf("header %q, want record,pair,v", sc.Text())
	}
	var i int64
	for ; sc.Scan(); i++ {
		f := strings.Split(sc.Text(), ",")
		want := fmt.Sprint(i/2, ",", i%2, ",")
		if len(f) != 3 || f[0]+","+f[1]+"," != want {
			t.Fatalf("row %d: %q, want %s<value>", i, sc.Text(), want)
		}
		if v, err := strconv.ParseFloat(f[2], 64); err != nil || v != float64(i)+0.25 {
			t.Fatalf("row %d: value %q, want %v", i, f[2], float64(i)+0.25)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return i
}
