package bufferpool

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the in-memory reference the pool is compared with.
type model struct {
	named map[string][]byte
	pages map[int64][]byte
	dirty map[int64]bool
	ver   map[int64]uint64 // last version the pool returned
}

const modelPS = 4096

// backing is what a Filler stages in for page i.
func backing(i int64) []byte { return fill(modelPS, byte(i)) }

func TestModel(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, 600) })
	}
}

// TestModelCompressed: the same, with the buckets compressing what the
// organizer and the placement move to the file tier.
func TestModelCompressed(t *testing.T) {
	for seed, codec := range []string{CompressZstd, CompressS2, CompressLZ4} {
		t.Run(codec, func(t *testing.T) { runModelCodec(t, uint64(seed)+10, 600, codec) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) { runModelCodec(t, seed, steps, "") }

func runModelCodec(t *testing.T, seed uint64, steps int, codec string) {
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	policy := []string{PlaceMinimizeIOTime, PlaceRoundRobin, PlaceRandom}[seed%3]
	p := testPool(t, 4*modelPS, 10*modelPS, func(c *Config) { c.Placement = policy })
	nb := mustBucket(t, p, "named", 0)
	pb := mustBucket(t, p, "pages", modelPS)
	if err := errors.Join(nb.SetCompress(codec), pb.SetCompress(codec)); err != nil {
		t.Fatal(err)
	}
	m := &model{named: map[string][]byte{}, pages: map[int64][]byte{}, dirty: map[int64]bool{}, ver: map[int64]uint64{}}
	names := []string{"a", "b", "c", "d"}
	randData := func(max int) []byte { return fill(rng.IntN(max+1), byte(rng.Uint32())) }
	noSpace := 0
	var compressed int64 // most blobs stored compressed at once
	defer func() { s := p.Stats(); t.Logf("no space %d, stats %+v", noSpace, s.Tiers) }()
	for step := range steps {
		var op string
		var err error
		name := names[rng.IntN(len(names))]
		i := rng.Int64N(12)
		switch k := rng.IntN(13); k {
		case 0:
			data := randData(3 * modelPS)
			op = fmt.Sprintf("Put(%s, %d)", name, len(data))
			if err = nb.Put(name, data); err == nil {
				m.named[name] = data
			}
		case 1:
			data := randData(modelPS)
			off := rng.Int64N(2 * modelPS)
			op = fmt.Sprintf("PartialPut(%s, %d, %d)", name, off, len(data))
			if err = nb.PartialPut(name, off, data); err == nil {
				cur := m.named[name]
				if end := off + int64(len(data)); end > int64(len(cur)) {
					cur = append(cur, make([]byte, end-int64(len(cur)))...)
				}
				copy(cur[off:], data)
				m.named[name] = cur
			}
		case 2:
			op = fmt.Sprintf("Delete(%s)", name)
			err = nb.Delete(name)
			if _, ok := m.named[name]; ok {
				delete(m.named, name)
			} else if errors.Is(err, ErrNotFound) {
				err = nil
			}
		case 3, 4:
			data := randData(modelPS / 2)
			off := rng.Int64N(modelPS - int64(len(data)) + 1)
			withFill := rng.IntN(2) == 0
			op = fmt.Sprintf("WritePage(%d, %d, %d, fill=%v)", i, off, len(data), withFill)
			var f Filler
			if withFill {
				f = func(b []byte) error { copy(b, backing(i)); return nil }
			}
			var v uint64
			if v, err = pb.WritePage(i, off, data, f); err == nil {
				pg, ok := m.pages[i]
				if !ok {
					pg = make([]byte, modelPS)
					if withFill {
						pg = backing(i)
					}
				}
				copy(pg[off:], data)
				m.pages[i], m.dirty[i], m.ver[i] = pg, true, v
			}
		case 5:
			dirty := rng.IntN(2) == 0
			op = fmt.Sprintf("PutPage(%d, dirty=%v)", i, dirty)
			data := fill(modelPS, byte(rng.Uint32()))
			if err = pb.PutPage(i, data, dirty); err == nil {
				m.pages[i], m.dirty[i] = data, dirty
				m.ver[i], _, _, _ = pb.SnapshotPage(i, make([]byte, modelPS))
			}
		case 6, 7:
			op = fmt.Sprintf("MarkClean(%d)", i)
			if v, ok := m.ver[i]; ok && pb.MarkClean(i, v) {
				m.dirty[i] = false
			}
		case 8:
			off := rng.Int64N(modelPS - 100)
			op = fmt.Sprintf("ReadPage(%d, %d, fill)", i, off)
			buf := make([]byte, 100)
			var found bool
			found, err = pb.ReadPage(i, off, buf, func(b []byte) error { copy(b, backing(i)); return nil })
			if err == nil {
				if !found {
					if _, ok := m.pages[i]; ok && m.dirty[i] {
						t.Fatalf("step %d %s: dirty page not found", step, op)
					}
					m.pages[i], m.dirty[i] = backing(i), false
					m.ver[i], _, _, _ = pb.SnapshotPage(i, make([]byte, modelPS))
				}
				wantBytes(t, buf, m.pages[i][off:off+100])
			}
		case 9:
			size := rng.Int64N(12 * modelPS)
			op = fmt.Sprintf("Truncate(%d)", size)
			if err = pb.Truncate(size); err == nil {
				n := (size + modelPS - 1) / modelPS
				for j := range m.pages {
					if j >= n {
						delete(m.pages, j)
					}
				}
				if tail := size % modelPS; tail != 0 {
					if pg, ok := m.pages[n-1]; ok {
						clear(pg[tail:])
						m.dirty[n-1] = true
						m.ver[n-1], _, _, _ = pb.SnapshotPage(n-1, make([]byte, modelPS))
					}
				}
			}
		case 10:
			off, n := rng.Int64N(12*modelPS), rng.Int64N(2*modelPS)
			op = fmt.Sprintf("ZeroRange(%d, %d)", off, n)
			if err = pb.ZeroRange(off, n); err == nil {
				for j, pg := range m.pages {
					lo, hi := max(off, j*modelPS), min(off+n, (j+1)*modelPS)
					if lo < hi {
						clear(pg[lo-j*modelPS : hi-j*modelPS])
						m.dirty[j] = true
						m.ver[j], _, _, _ = pb.SnapshotPage(j, make([]byte, modelPS))
					}
				}
			}
		case 11:
			op = fmt.Sprintf("DeletePage(%d)", i)
			pb.DeletePage(i)
			delete(m.pages, i)
		case 12:
			op = "Organize"
			p.Organize()
		}
		if errors.Is(err, ErrNoSpace) {
			noSpace++
		}
		if err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("step %d %s: %v", step, op, err)
		}
		m.compare(t, step, op, nb, pb)
		checkAccounting(t, p)
		if t.Failed() {
			t.FailNow()
		}
		compressed = max(compressed, p.Stats().Tiers[1].Compressed)
	}
	if codec != "" && compressed == 0 {
		t.Errorf("%s: no blob was ever stored compressed", codec)
	}
}

// compare checks the pool against the model. Clean pages may have been
// evicted: the model forgets them.
func (m *model) compare(t *testing.T, step int, op string, nb, pb *Bucket) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(m.named)) {
		got, err := nb.Get(name)
		if err != nil {
			t.Fatalf("step %d %s: get %s: %v", step, op, name, err)
		}
		if !slices.Equal(got, m.named[name]) {
			t.Fatalf("step %d %s: blob %s differs (len %d, want %d)", step, op, name, len(got), len(m.named[name]))
		}
	}
	if n := len(nb.List()); n != len(m.named) {
		t.Fatalf("step %d %s: %d named blobs, model %d", step, op, n, len(m.named))
	}
	buf := make([]byte, modelPS)
	var dirty []int64
	for i, want := range m.pages {
		v, d, found, err := pb.SnapshotPage(i, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			if m.dirty[i] {
				t.Fatalf("step %d %s: dirty page %d lost", step, op, i)
			}
			delete(m.pages, i)
			continue
		}
		if d != m.dirty[i] || !slices.Equal(buf, want) {
			t.Fatalf("step %d %s: page %d dirty %v (model %v), equal %v", step, op, i, d, m.dirty[i], slices.Equal(buf, want))
		}
		if d {
			dirty = append(dirty, i)
		}
		m.ver[i] = v
	}
	slices.Sort(dirty)
	if got := pb.DirtyPages(); !slices.Equal(got, dirty) {
		t.Fatalf("step %d %s: DirtyPages %v, model %v", step, op, got, dirty)
	}
	if n, _ := pb.Resident(0); n != int64(len(m.pages)) {
		t.Fatalf("step %d %s: %d pages resident, model %d", step, op, n, len(m.pages))
	}
}
