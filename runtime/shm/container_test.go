package shm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// rec is the element type of the container tests: pointer-free, 16 bytes,
// no padding.
type rec struct {
	Worker uint32
	Seq    uint32
	Val    uint64
}

func TestCheckType(t *testing.T) {
	type inner struct {
		A [3]int16
		B float64
	}
	type withPtr struct {
		A int
		P *int
	}
	type withString struct{ S string }
	type nested struct {
		I inner
		W [2]withString
	}
	type padded struct {
		A uint8
		B uint64
	}
	cases := []struct {
		typ     reflect.Type
		ok, key bool
	}{
		{reflect.TypeFor[int64](), true, true},
		{reflect.TypeFor[rec](), true, true},
		{reflect.TypeFor[inner](), true, false}, // 6 bytes of int16 then padding
		{reflect.TypeFor[[4]complex128](), true, true},
		{reflect.TypeFor[padded](), true, false},
		{reflect.TypeFor[*int](), false, false},
		{reflect.TypeFor[[]byte](), false, false},
		{reflect.TypeFor[string](), false, false},
		{reflect.TypeFor[map[int]int](), false, false},
		{reflect.TypeFor[any](), false, false},
		{reflect.TypeFor[withPtr](), false, false},
		{reflect.TypeFor[nested](), false, false},
		{reflect.TypeFor[uintptr](), false, false},
		{reflect.TypeFor[chan int](), false, false},
		{reflect.TypeFor[struct{}](), false, false},
	}
	for _, c := range cases {
		t.Run(c.typ.String(), func(t *testing.T) {
			if err := checkType(c.typ); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadType)) {
				t.Errorf("checkType = %v, want ok=%v", err, c.ok)
			}
			if err := checkKeyType(c.typ); (err == nil) != c.key {
				t.Errorf("checkKeyType = %v, want ok=%v", err, c.key)
			}
		})
	}
}

func TestContainersRefuseBadTypes(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	if _, err := NewVector[string](s, 0); !errors.Is(err, ErrBadType) {
		t.Errorf("Vector[string]: %v", err)
	}
	if _, err := NewList[[]int](s); !errors.Is(err, ErrBadType) {
		t.Errorf("List[[]int]: %v", err)
	}
	if _, err := NewMap[int, *int](s); !errors.Is(err, ErrBadType) {
		t.Errorf("Map[int,*int]: %v", err)
	}
	if _, err := NewMap[any, int](s); !errors.Is(err, ErrBadType) {
		t.Errorf("Map[any,int]: %v", err)
	}
	if _, err := NewRing[map[int]int](s, 4); !errors.Is(err, ErrBadType) {
		t.Errorf("Ring[map]: %v", err)
	}
	v, err := NewVector[uint64](s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenVector[uint32](s, v.Pointer()); !errors.Is(err, ErrBadType) {
		t.Errorf("open Vector[uint64] as Vector[uint32]: %v", err)
	}
	if _, err := OpenVector[float64](s, v.Pointer()); !errors.Is(err, ErrBadType) {
		t.Errorf("open Vector[uint64] as Vector[float64]: %v", err)
	}
	if _, err := OpenList[uint64](s, v.Pointer()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("open a vector as a list: %v", err)
	}
	if st, _ := s.Stats(); st.Allocations != 1 {
		t.Errorf("failed constructors leaked: %+v", st)
	}
}

func TestString(t *testing.T) {
	s := newMemfdSegment(t, 1<<16)
	x, err := NewString(s, "")
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := 0; i < 200; i++ {
		piece := strings.Repeat(string(rune('a'+i%26)), i%7)
		if err := x.Append(piece); err != nil {
			t.Fatal(err)
		}
		want += piece
	}
	if got, err := x.Load(); err != nil || got != want {
		t.Fatalf("Load = %q, %v; want %q", got, err, want)
	}
	if err := x.Store("short"); err != nil {
		t.Fatal(err)
	}
	y, err := OpenString(s, x.Pointer())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := y.Load(); got != "short" {
		t.Errorf("second handle sees %q", got)
	}
	if n, _ := y.Len(); n != 5 {
		t.Errorf("Len = %d", n)
	}
	if err := x.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := y.Load(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load after Free: %v", err)
	}
	if st, _ := s.Stats(); st.Allocations != 0 {
		t.Errorf("leak %+v", st)
	}
	mustCheck(t, s)
}

// TestContainersModel applies random operations to every container and to
// a plain Go model and compares them after each step.
func TestContainersModel(t *testing.T) {
	s := newMemfdSegment(t, 4<<20)
	vec, _ := NewVector[rec](s, 0)
	list, _ := NewList[rec](s)
	m, _ := NewMap[uint64, rec](s)
	var mvec, mlist []rec
	mmap := map[uint64]rec{}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := 0; step < 5000; step++ {
		r := rec{Worker: 1, Seq: uint32(step), Val: rng.Uint64()}
		k := rng.Uint64N(200)
		var err error
		switch op := rng.IntN(10); op {
		case 0, 1:
			_, err = vec.Push(r)
			mvec = append(mvec, r)
		case 2:
			var got rec
			got, err = vec.Pop()
			if len(mvec) == 0 {
				if !errors.Is(err, ErrEmpty) {
					t.Fatalf("step %d: Pop of empty: %v", step, err)
				}
				err = nil
			} else if got != mvec[len(mvec)-1] {
				t.Fatalf("step %d: Pop = %v", step, got)
			} else {
				mvec = mvec[:len(mvec)-1]
			}
		case 3:
			if len(mvec) > 0 {
				i := rng.IntN(len(mvec))
				err = vec.Set(i, r)
				mvec[i] = r
			}
		case 4:
			err = list.PushBack(r)
			mlist = append(mlist, r)
		case 5:
			err = list.PushFront(r)
			mlist = slices.Insert(mlist, 0, r)
		case 6:
			var got rec
			back := rng.IntN(2) == 0
			if back {
				got, err = list.PopBack()
			} else {
				got, err = list.PopFront()
			}
			switch {
			case len(mlist) == 0:
				if !errors.Is(err, ErrEmpty) {
					t.Fatalf("step %d: pop of empty list: %v", step, err)
				}
				err = nil
			case back:
				if got != mlist[len(mlist)-1] {
					t.Fatalf("step %d: PopBack = %v", step, got)
				}
				mlist = mlist[:len(mlist)-1]
			default:
				if got != mlist[0] {
					t.Fatalf("step %d: PopFront = %v", step, got)
				}
				mlist = mlist[1:]
			}
		case 7, 8:
			err = m.Put(k, r)
			mmap[k] = r
		case 9:
			var ok bool
			ok, err = m.Delete(k)
			if _, had := mmap[k]; had != ok {
				t.Fatalf("step %d: Delete(%d) = %v, model %v", step, k, ok, had)
			}
			delete(mmap, k)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%97 == 0 || step == 4999 {
			compareAll(t, vec, list, m, mvec, mlist, mmap)
		}
	}
	for k, want := range mmap {
		if got, ok, err := m.Get(k); err != nil || !ok || got != want {
			t.Fatalf("Get(%d) = %v %v %v, want %v", k, got, ok, err, want)
		}
	}
	if _, ok, _ := m.Get(1 << 40); ok {
		t.Error("Get of absent key found something")
	}
	mustCheck(t, s)
	for _, free := range []func() error{vec.Free, list.Free, m.Free} {
		if err := free(); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Stats()
	if st.Allocations != 0 || st.Free != st.Capacity {
		t.Errorf("containers leaked: %+v", st)
	}
	mustCheck(t, s)
}

func compareAll(t *testing.T, vec *Vector[rec], list *List[rec], m *Map[uint64, rec], mvec, mlist []rec, mmap map[uint64]rec) {
	t.Helper()
	gv, err := vec.Values()
	if err != nil || !slices.Equal(gv, mvec) {
		t.Fatalf("vector %d elements (%v), model %d", len(gv), err, len(mvec))
	}
	gl, err := list.Values()
	if err != nil || !slices.Equal(gl, mlist) {
		t.Fatalf("list %d elements (%v), model %d", len(gl), err, len(mlist))
	}
	gm, err := m.All()
	if err != nil || !reflect.DeepEqual(gm, mmap) && !(len(gm) == 0 && len(mmap) == 0) {
		t.Fatalf("map %d entries (%v), model %d", len(gm), err, len(mmap))
	}
	if n, _ := m.Len(); n != len(mmap) {
		t.Fatalf("map Len %d, model %d", n, len(mmap))
	}
}

// workerOps is what one worker (goroutine or process) does to the shared
// containers: push its records in order, count into a shared map key, put
// and delete its own keys, append tagged tokens to the shared string.
func workerOps(s *Segment, roots sharedRoots, w uint32, n int) error {
	vec, list, m, str, err := roots.open(s)
	if err != nil {
		return err
	}
	popped, err := OpenVector[rec](s, roots.popped[w])
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		r := rec{Worker: w, Seq: uint32(i), Val: uint64(w)<<32 | uint64(i)}
		if _, err := vec.Push(r); err != nil {
			return err
		}
		if err := list.PushBack(r); err != nil {
			return err
		}
		if i%3 == 2 {
			got, err := list.PopFront()
			if err != nil {
				return fmt.Errorf("pop: %w", err)
			}
			if _, err := popped.Push(got); err != nil {
				return err
			}
		}
		if err := m.Put(workerKey(w, i), r); err != nil {
			return err
		}
		if i%2 == 1 {
			if ok, err := m.Delete(workerKey(w, i-1)); err != nil || !ok {
				return fmt.Errorf("delete %d: %v %v", i-1, ok, err)
			}
		}
		err := m.Update(0, func(old rec, _ bool) rec { old.Val++; return old })
		if err != nil {
			return err
		}
		if i%16 == 0 {
			if err := str.Append(fmt.Sprintf("%d.%d;", w, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func workerKey(w uint32, i int) uint64 { return uint64(w+1)<<32 | uint64(i) }

// sharedRoots are the Pointers of the containers shared by workers.
type sharedRoots struct {
	vec, list, m, str Pointer
	popped            []Pointer // per worker
}

func (r sharedRoots) open(s *Segment) (*Vector[rec], *List[rec], *Map[uint64, rec], *String, error) {
	vec, err1 := OpenVector[rec](s, r.vec)
	list, err2 := OpenList[rec](s, r.list)
	m, err3 := OpenMap[uint64, rec](s, r.m)
	str, err4 := OpenString(s, r.str)
	return vec, list, m, str, errors.Join(err1, err2, err3, err4)
}

// makeShared creates the containers for workers workers and records them as
// roots, so that other processes find them by name.
func makeShared(t *testing.T, s *Segment, workers int) sharedRoots {
	t.Helper()
	vec, err := NewVector[rec](s, 0)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := NewList[rec](s)
	m, _ := NewMap[uint64, rec](s)
	str, _ := NewString(s, "")
	r := sharedRoots{vec: vec.Pointer(), list: list.Pointer(), m: m.Pointer(), str: str.Pointer()}
	for w := 0; w < workers; w++ {
		p, err := NewVector[rec](s, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.popped = append(r.popped, p.Pointer())
	}
	for name, p := range map[string]Pointer{"vec": r.vec, "list": r.list, "map": r.m, "str": r.str} {
		if err := s.SetRoot(name, p); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// verifyShared checks the containers against the model of workers workers
// that each ran workerOps with n.
func verifyShared(t *testing.T, s *Segment, r sharedRoots, workers, n int) {
	t.Helper()
	vec, list, m, str, err := r.open(s)
	if err != nil {
		t.Fatal(err)
	}
	gv, err := vec.Values()
	if err != nil {
		t.Fatal(err)
	}
	checkPerWorkerOrder(t, "vector", gv, workers, n)
	// Pushed to the list = left in the list + popped by anyone.
	all, err := list.Values()
	if err != nil {
		t.Fatal(err)
	}
	inList := len(all)
	for w := range workers {
		pv, _ := OpenVector[rec](s, r.popped[w])
		got, err := pv.Values()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
	}
	if inList != workers*n-workers*(n/3) {
		t.Errorf("list holds %d, want %d", inList, workers*n-workers*(n/3))
	}
	// FIFO: what is left of each worker's records is in push order.
	last := map[uint32]int64{}
	for _, x := range all[:inList] {
		if l, ok := last[x.Worker]; ok && int64(x.Seq) <= l {
			t.Fatalf("list: worker %d record %d after %d", x.Worker, x.Seq, l)
		}
		last[x.Worker] = int64(x.Seq)
	}
	slices.SortFunc(all, func(a, b rec) int { return cmpU64(a.Val, b.Val) })
	checkPerWorkerOrder(t, "list+popped", all, workers, n)
	// Map: every worker's odd keys, plus the shared counter.
	want := map[uint64]rec{0: {Val: uint64(workers * n)}}
	for w := range workers {
		for i := 1; i < n; i += 2 {
			want[workerKey(uint32(w), i)] = rec{Worker: uint32(w), Seq: uint32(i), Val: uint64(w)<<32 | uint64(i)}
		}
		if n%2 == 1 {
			want[workerKey(uint32(w), n-1)] = rec{Worker: uint32(w), Seq: uint32(n - 1), Val: uint64(w)<<32 | uint64(n-1)}
		}
	}
	got, err := m.All()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("map: %d entries, want %d; counter %v", len(got), len(want), got[0])
	}
	text, err := str.Load()
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, workers)
	for _, tok := range strings.Split(strings.TrimSuffix(text, ";"), ";") {
		var w, i int
		if _, err := fmt.Sscanf(tok, "%d.%d", &w, &i); err != nil || w >= workers || i != next[w] {
			t.Fatalf("string token %q out of order (next %v)", tok, next)
		}
		next[w] += 16
	}
	mustCheck(t, s)
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkPerWorkerOrder wants each worker's records exactly once, in order.
func checkPerWorkerOrder(t *testing.T, what string, rs []rec, workers, n int) {
	t.Helper()
	next := make([]uint32, workers)
	for _, r := range rs {
		if int(r.Worker) >= workers || r.Seq != next[r.Worker] || r.Val != uint64(r.Worker)<<32|uint64(r.Seq) {
			t.Fatalf("%s: record %+v out of order (next %v)", what, r, next)
		}
		next[r.Worker]++
	}
	for w, c := range next {
		if int(c) != n {
			t.Fatalf("%s: worker %d has %d records, want %d", what, w, c, n)
		}
	}
}

func TestContainersConcurrentGoroutines(t *testing.T) {
	const workers, n = 6, 1500
	s := newMemfdSegment(t, 16<<20)
	r := makeShared(t, s, workers)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = workerOps(s, r, uint32(w), n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	verifyShared(t, s, r, workers, n)
}

// TestCorruptContainers plants damage in container headers and nodes; every
// operation must answer ErrCorrupt (or ErrInvalidPointer), never crash.
func TestCorruptContainers(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, s *Segment) error
	}{
		{"vector len beyond cap", func(t *testing.T, s *Segment) error {
			v, _ := NewVector[rec](s, 4)
			store64(s.mem, v.off+vLen, 5)
			_, err := v.Get(4)
			return err
		}},
		{"vector data offset garbage", func(t *testing.T, s *Segment) error {
			v, _ := NewVector[rec](s, 4)
			store64(s.mem, v.off+vData, v.off+8)
			_, err := v.Push(rec{})
			return err
		}},
		{"vector cap beyond block", func(t *testing.T, s *Segment) error {
			v, _ := NewVector[rec](s, 4)
			store64(s.mem, v.off+vCap, 1<<30)
			_, err := v.Values()
			return err
		}},
		{"list cycle", func(t *testing.T, s *Segment) error {
			l, _ := NewList[rec](s)
			l.PushBack(rec{Seq: 1})
			l.PushBack(rec{Seq: 2})
			head := l.u64(lHead)
			tail := l.u64(lTail)
			store64(s.mem, tail+nNext, head) // tail points back to head
			_, err := l.Values()
			return err
		}},
		{"list length lies", func(t *testing.T, s *Segment) error {
			l, _ := NewList[rec](s)
			l.PushBack(rec{Seq: 1})
			l.set64(lLen, 1000)
			_, err := l.Values()
			return err
		}},
		{"list node freed under it", func(t *testing.T, s *Segment) error {
			l, _ := NewList[rec](s)
			l.PushBack(rec{Seq: 1})
			s.Free(Pointer{s.ID(), l.u64(lHead)})
			_, err := l.PopFront()
			return err
		}},
		{"map cap not a power of two", func(t *testing.T, s *Segment) error {
			m, _ := NewMap[uint64, rec](s)
			m.Put(1, rec{})
			m.set64(mCap, 12)
			_, _, err := m.Get(1)
			return err
		}},
		{"map table full of garbage", func(t *testing.T, s *Segment) error {
			m, _ := NewMap[uint64, rec](s)
			m.Put(1, rec{})
			tab, _ := s.Bytes(Pointer{s.ID(), m.u64(mTable)})
			for i := range tab {
				tab[i] = 0xFF
			}
			return m.Put(2, rec{})
		}},
		{"string length beyond buffer", func(t *testing.T, s *Segment) error {
			x, _ := NewString(s, "abc")
			x.set64(sLen, 1<<20)
			_, err := x.Load()
			return err
		}},
		{"wrong magic", func(t *testing.T, s *Segment) error {
			v, _ := NewVector[rec](s, 0)
			_, err := OpenMap[uint64, rec](s, v.Pointer())
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newMemfdSegment(t, 1<<16)
			err := c.run(t, s)
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalidPointer) {
				t.Errorf("got %v, want ErrCorrupt", err)
			}
		})
	}
}
