// Package reftest holds what the tests of the format drivers share when
// they compare a driver's reads with a reference reader's output: the
// elements a hyperslab selects from the reference's whole array, and a
// strided selection that exercises every axis, and a check that a
// malformed file fails in a helper process with a clear error while the
// helper pool keeps serving, seeded mutants of valid files, the reference
// fixtures a test makes once (Fixtures) and the reference reader run over
// the mutants (Reference).
package reftest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
)

// Slice returns the elements (size bytes each) h selects from whole, a
// C-order array of shape.
func Slice(whole []byte, shape []int64, size int, h omni.Hyperslab) []byte {
	out := make([]byte, 0, h.Len()*int64(size))
	if h.Len() == 0 {
		return out
	}
	rank := len(shape)
	strides := make([]int64, rank)
	s := int64(1)
	for i := rank - 1; i >= 0; i-- {
		strides[i], s = s, s*shape[i]
	}
	k := make([]int64, rank)
	for {
		off := int64(0)
		for i := range rank {
			off += (h.Start[i] + k[i]*h.StrideAt(i)) * strides[i]
		}
		out = append(out, whole[off*int64(size):(off+1)*int64(size)]...)
		i := rank - 1
		for ; i >= 0; i-- {
			if k[i]++; k[i] < h.Count[i] {
				break
			}
			k[i] = 0
		}
		if i < 0 {
			return out
		}
	}
}

// Strided is a selection of shape that starts at 1 and takes every
// second element on each axis longer than 2, the whole of shorter axes.
func Strided(shape []int64) omni.Hyperslab {
	h := omni.All(shape)
	h.Stride = make([]int64, len(shape))
	for i, n := range shape {
		h.Stride[i] = 1
		if n > 2 {
			h.Start[i], h.Stride[i], h.Count[i] = 1, 2, n/2
		}
	}
	return h
}

// CheckRead compares r's reads of v with want (v's whole array, C
// order): all of it, and the Strided selection.
func CheckRead(t *testing.T, r omni.Reader, v *omni.Variable, want []byte) {
	t.Helper()
	got, err := omni.ReadAll(r, v)
	if err != nil {
		t.Errorf("%s: %v", v.Path, err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: read differs from the reference (%d vs %d bytes)", v.Path, len(got), len(want))
		return
	}
	h := Strided(v.Shape)
	got, err = omni.ReadSlab(r, v, h)
	if err != nil {
		t.Errorf("%s %v: %v", v.Path, h, err)
		return
	}
	if w := Slice(want, v.Shape, v.DType.Size(), h); !bytes.Equal(got, w) {
		t.Errorf("%s: strided read %v differs from the reference", v.Path, h)
	}
}

// Malformed opens each file in a helper pool, reads every variable of
// those that open, and requires each to end in an error or in data (never
// a crash of the caller), within the pool's deadline; a file in the
// corpus that opens and reads whole fails the test unless ok lists it.
// The pool must then still answer a good file (good, "" for none).
func Malformed(t *testing.T, files []string, good string) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no malformed files")
	}
	p := helper.New(helper.Options{Size: 1, Deadline: 10 * time.Second, Logf: t.Logf})
	defer p.Close()
	ctx := context.Background()
	for _, f := range files {
		ds, err := p.Open(ctx, f)
		if err == nil {
			for _, v := range ds.Variables() {
				if _, e := p.ReadAll(ctx, f, v); e != nil {
					err = e
					break
				}
			}
		}
		switch {
		case err == nil:
			t.Errorf("%s: opened and read without an error", filepath.Base(f))
		case errors.Is(err, helper.ErrTimeout):
			t.Errorf("%s: %v", filepath.Base(f), err)
		default:
			t.Logf("%s: %v", filepath.Base(f), err)
		}
	}
	if good == "" {
		return
	}
	if _, err := os.Stat(good); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Open(ctx, good); err != nil {
		t.Errorf("good file %s after the corpus: %v", good, err)
	}
}

// Mutant is one mutant of a valid file and what a helper made of it:
// Err when opening failed, else the bytes of every variable it read
// (a variable whose read failed is in Failed).
type Mutant struct {
	Path   string
	Err    error
	Vars   map[string]*omni.Variable
	Data   map[string][]byte
	Failed map[string]error
}

// maxMutantRead bounds what is read of one variable of a mutant.
const maxMutantRead = 16 << 20

// Mutants writes n seeded mutants of the file good into dir (bytes
// flipped, ranges overwritten, the file cut short or a range repeated;
// the same seed gives the same mutants) and opens and reads each in a
// helper pool, as the views do. Every request must end, in data or in
// an error, within the pool's deadline (a helper that crashes costs an
// error, never the caller); afterwards the pool must still read good.
// It returns what each mutant gave, for a comparison with the reference
// reader.
func Mutants(t *testing.T, good, dir string, n int, seed uint64) []Mutant {
	t.Helper()
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x10))
	p := helper.New(helper.Options{Size: 1, Deadline: 10 * time.Second, Logf: func(string, ...any) {}})
	defer p.Close()
	ctx := context.Background()
	out := make([]Mutant, 0, n)
	crashed := 0
	for i := range n {
		m := Mutant{Path: filepath.Join(dir, fmt.Sprintf("mutant-%03d%s", i, filepath.Ext(good))), Vars: map[string]*omni.Variable{}, Data: map[string][]byte{}, Failed: map[string]error{}}
		if err := os.WriteFile(m.Path, mutate(rng, orig), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ds, err := p.Open(ctx, m.Path)
		m.Err = err
		if err == nil {
			for _, v := range ds.Variables() {
				if v.DType == omni.String || omni.All(v.Shape).Bytes(v.DType) > maxMutantRead {
					continue
				}
				b, err := p.ReadAll(ctx, m.Path, v)
				if err != nil {
					m.Failed[v.Path] = err
					continue
				}
				m.Data[v.Path], m.Vars[v.Path] = b, v
			}
		}
		if errors.Is(m.Err, helper.ErrCrashed) {
			crashed++
		}
		if d := time.Since(start); d > time.Minute {
			t.Errorf("%s: %v to answer", m.Path, d)
		}
		out = append(out, m)
	}
	t.Logf("%d mutants of %s: %d opened, %d helpers crashed on open (EIO)", n, filepath.Base(good), countOpened(out), crashed)
	if _, err := p.Open(ctx, good); err != nil {
		t.Errorf("%s after the mutants: %v", good, err)
	}
	return out
}

func countOpened(ms []Mutant) int {
	n := 0
	for _, m := range ms {
		if m.Err == nil {
			n++
		}
	}
	return n
}

// mutate returns a damaged copy of b.
func mutate(rng *rand.Rand, b []byte) []byte {
	m := bytes.Clone(b)
	if len(m) == 0 {
		return m
	}
	switch rng.IntN(4) {
	case 0: // flip bytes, most in the first KiB (headers)
		for range 1 + rng.IntN(8) {
			i := rng.IntN(min(len(m), 1024+rng.IntN(len(m))))
			m[i] ^= byte(1 + rng.IntN(255))
		}
	case 1: // overwrite a range with random bytes
		i := rng.IntN(len(m))
		for j := i; j < min(len(m), i+1+rng.IntN(64)); j++ {
			m[j] = byte(rng.IntN(256))
		}
	case 2: // cut short
		m = m[:rng.IntN(len(m))]
	default: // repeat a range
		i := rng.IntN(len(m))
		j := min(len(m), i+1+rng.IntN(256))
		m = append(m[:j:j], append(bytes.Clone(m[i:j]), m[j:]...)...)
	}
	return m
}
