package bufferpool

import (
	"math/rand"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDirtyRangesAdd(t *testing.T) {
	cases := []struct {
		name string
		adds []Range
		want []Range
	}{
		{"one", []Range{{10, 20}}, []Range{{10, 20}}},
		{"empty ignored", []Range{{10, 10}, {5, 3}}, nil},
		{"overlap", []Range{{10, 20}, {15, 30}}, []Range{{10, 30}}},
		{"inside", []Range{{10, 40}, {15, 30}}, []Range{{10, 40}}},
		{"covering", []Range{{15, 30}, {10, 40}}, []Range{{10, 40}}},
		{"adjacent after", []Range{{10, 20}, {20, 30}}, []Range{{10, 30}}},
		{"adjacent before", []Range{{20, 30}, {10, 20}}, []Range{{10, 30}}},
		{"disjoint sorted", []Range{{40, 50}, {10, 20}}, []Range{{10, 20}, {40, 50}}},
		{"bridge", []Range{{10, 20}, {30, 40}, {50, 60}, {15, 55}}, []Range{{10, 60}}},
		{"bridge touching", []Range{{10, 20}, {30, 40}, {20, 30}}, []Range{{10, 40}}},
		{"four kept", []Range{{0, 1}, {10, 11}, {20, 21}, {30, 31}},
			[]Range{{0, 1}, {10, 11}, {20, 21}, {30, 31}}},
		{"fifth merges the closest", []Range{{0, 1}, {10, 11}, {20, 21}, {40, 41}, {23, 24}},
			[]Range{{0, 1}, {10, 11}, {20, 24}, {40, 41}}},
		{"fifth at the end", []Range{{0, 1}, {10, 11}, {30, 31}, {50, 51}, {52, 60}},
			[]Range{{0, 1}, {10, 11}, {30, 31}, {50, 60}}},
		{"fifth at the start", []Range{{10, 11}, {30, 31}, {50, 51}, {70, 71}, {0, 9}},
			[]Range{{0, 11}, {30, 31}, {50, 51}, {70, 71}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d dirtyRanges
			for _, r := range tc.adds {
				d.add(r.Lo, r.Hi)
			}
			if got := d.r[:d.n]; !slices.Equal(got, tc.want) {
				t.Fatalf("ranges %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDirtyRangesRemove(t *testing.T) {
	cases := []struct {
		name         string
		have         []Range
		remove, want []Range
	}{
		{"all", []Range{{10, 20}}, []Range{{0, 30}}, nil},
		{"exactly", []Range{{10, 20}}, []Range{{10, 20}}, nil},
		{"head", []Range{{10, 20}}, []Range{{5, 15}}, []Range{{15, 20}}},
		{"tail", []Range{{10, 20}}, []Range{{15, 25}}, []Range{{10, 15}}},
		{"split", []Range{{10, 20}}, []Range{{12, 14}}, []Range{{10, 12}, {14, 20}}},
		{"apart", []Range{{10, 20}}, []Range{{20, 30}, {0, 10}}, []Range{{10, 20}}},
		{"across two", []Range{{10, 20}, {30, 40}}, []Range{{15, 35}}, []Range{{10, 15}, {35, 40}}},
		{"split past four merges", []Range{{0, 10}, {20, 30}, {40, 50}, {60, 100}}, []Range{{70, 71}},
			[]Range{{0, 10}, {20, 30}, {40, 50}, {60, 100}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d dirtyRanges
			for _, r := range tc.have {
				d.add(r.Lo, r.Hi)
			}
			for _, r := range tc.remove {
				d.remove(r.Lo, r.Hi)
			}
			if got := d.r[:d.n]; !slices.Equal(got, tc.want) {
				t.Fatalf("ranges %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDirtyRangesModel adds and removes random ranges in a page and in a
// byte map: the ranges stay sorted, disjoint and apart, never more than
// maxDirtyRanges, always cover every byte written, and are exactly the
// bytes written until the written bytes first form more runs than fit.
func TestDirtyRangesModel(t *testing.T) {
	const size = 256
	rng := rand.New(rand.NewSource(1))
	for round := range 200 {
		var d dirtyRanges
		var model [size]bool
		exact := true
		for step := range 12 {
			lo := rng.Int63n(size)
			hi := min(size, lo+1+rng.Int63n(int64(1+rng.Intn(3))*16))
			add := rng.Intn(3) > 0
			if add {
				d.add(lo, hi)
			} else {
				d.remove(lo, hi)
			}
			for i := lo; i < hi; i++ {
				model[i] = add
			}
			if runs(model[:]) > maxDirtyRanges {
				exact = false
			}
			checkRanges(t, round, step, d.r[:d.n], model[:], exact)
		}
	}
}

func runs(m []bool) int {
	n := 0
	for i, v := range m {
		if v && (i == 0 || !m[i-1]) {
			n++
		}
	}
	return n
}

func checkRanges(t *testing.T, round, step int, rs []Range, model []bool, exact bool) {
	t.Helper()
	var got [256]bool
	for k, r := range rs {
		if r.Lo >= r.Hi || (k > 0 && rs[k-1].Hi >= r.Lo) {
			t.Fatalf("round %d step %d: ranges %v not sorted, disjoint and apart", round, step, rs)
		}
		for i := r.Lo; i < r.Hi; i++ {
			got[i] = true
		}
	}
	for i, w := range model {
		if w && !got[i] || exact && got[i] != w {
			t.Fatalf("round %d step %d: ranges %v, byte %d written %v (exact %v)", round, step, rs, i, w, exact)
		}
	}
}

// TestSnapshotDirtyRanges: a page's dirty ranges are what was written
// since it was clean; writes that say no range make it whole; MarkClean
// of a stale version keeps them all.
func TestSnapshotDirtyRanges(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	b := mustBucket(t, p, "f", ps)
	buf := make([]byte, ps)
	snap := func() PageSnapshot {
		t.Helper()
		s, err := b.SnapshotDirty(0, buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := func(s PageSnapshot, rs ...Range) {
		t.Helper()
		if !s.Found || s.Dirty != (len(rs) > 0) || !slices.Equal(s.Ranges, rs) {
			t.Fatalf("snapshot %+v, want ranges %v", s, rs)
		}
	}
	if _, err := b.WritePage(0, 100, []byte("abc"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WritePage(0, 200, []byte("de"), nil); err != nil {
		t.Fatal(err)
	}
	s := snap()
	want(s, Range{100, 103}, Range{200, 202})
	if _, err := b.WritePage(0, 103, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if b.MarkClean(0, s.Version) {
		t.Fatal("MarkClean of a stale version cleaned the page")
	}
	s = snap()
	want(s, Range{100, 104}, Range{200, 202})
	if !b.MarkClean(0, s.Version) {
		t.Fatal("MarkClean of the current version failed")
	}
	want(snap())
	if _, err := b.WritePage(0, 10, []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	want(snap(), Range{10, 11})
	b.MarkDirty(0)
	want(snap(), Range{0, ps})
	if err := b.PutPage(0, make([]byte, ps), false); err != nil {
		t.Fatal(err)
	}
	want(snap())
	if err := b.ZeroRange(ps-8, 8); err != nil {
		t.Fatal(err)
	}
	want(snap(), Range{ps - 8, ps})
	if err := b.PutPage(0, make([]byte, ps), true); err != nil {
		t.Fatal(err)
	}
	want(snap(), Range{0, ps})
	// PunchRange zeroes without dirtying: the caller punched its copy.
	if err := b.PunchRange(100, 50); err != nil {
		t.Fatal(err)
	}
	s = snap()
	want(s, Range{0, 100}, Range{150, ps})
	if err := b.PunchRange(0, ps+100); err != nil {
		t.Fatal(err)
	}
	if s2 := snap(); s2.Dirty || s2.Version == s.Version || len(b.DirtyPages()) != 0 {
		t.Fatalf("after punching all that was dirty: %+v, dirty pages %v", s2, b.DirtyPages())
	}
	if _, err := b.WritePage(0, 10, []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.PunchRange(20, 8); err != nil {
		t.Fatal(err)
	}
	want(snap(), Range{10, 11})
	checkAccounting(t, p)
}

// TestShimWriteDirtiesWholePage: the shim's fast path sets a page's
// dirty bit and says no range, so a harvest makes the whole page dirty,
// whatever ranges the pool's own writes had recorded.
func TestShimWriteDirtiesWholePage(t *testing.T) {
	const ps = 64 << 10
	p := testPool(t, 4*ps, 16*ps)
	b := mustBucket(t, p, "f", ps)
	if _, err := b.WritePage(0, 10, []byte("pool"), nil); err != nil {
		t.Fatal(err)
	}
	_, dfd, err := b.PageTable(true)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := unix.Mmap(dfd, 0, ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(seg)
	if !shimWrite(b.pt, seg, 0, ps, 's') {
		t.Fatal("shim write refused")
	}
	b.DirtyPages() // harvests
	s, err := b.SnapshotDirty(0, make([]byte, ps), nil)
	if err != nil || !s.Dirty || !slices.Equal(s.Ranges, []Range{{0, ps}}) {
		t.Fatalf("after a shim write: %+v, %v; want the whole page dirty", s, err)
	}
}
