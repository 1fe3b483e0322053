package tier

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func ramSegment(t testing.TB, label string) *Segment {
	t.Helper()
	d, err := Open(KindRAM, "ram", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.NewSegment(label)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i%251)
	}
	return p
}

func readBack(t *testing.T, s *Segment, off int64, n int) []byte {
	t.Helper()
	buf := bytes.Repeat([]byte{0xee}, n)
	if err := s.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestMappedPath follows the pages of a RAM segment through the states
// of the copy path: pwrite makes them resident, the next copy maps them,
// a punch or a truncation forgets them; the bytes are right throughout.
func TestMappedPath(t *testing.T) {
	const mib = 1 << 20
	s := ramSegment(t, "path")
	defer s.Close()
	st := func(off, n int64) int { return s.m.usable(off, off+n) }

	a := pattern(mib, 1)
	if err := s.WriteAt(a, 0); err != nil {
		t.Fatal(err)
	}
	if got := st(0, mib); got != pageResident {
		t.Fatalf("after the first write: state %d, want resident", got)
	}
	b := pattern(mib, 2)
	if err := s.WriteAt(b, 0); err != nil { // populates, then copies
		t.Fatal(err)
	}
	if got := st(0, mib); got != pageMapped {
		t.Fatalf("after the second write: state %d, want mapped", got)
	}
	if !bytes.Equal(readBack(t, s, 0, mib), b) {
		t.Fatal("read through the mapping differs")
	}
	if err := s.WriteAt(a[:100], 5000); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(b)
	copy(want[5000:], a[:100])
	if !bytes.Equal(readBack(t, s, 0, mib), want) {
		t.Fatal("small write through the mapping")
	}

	// Grow sparse: a page far away; the hole between reads as zero.
	if err := s.WriteAt(a, 8*mib); err != nil {
		t.Fatal(err)
	}
	if s.Size() != 9*mib || int64(len(s.m.mem)) < s.Size() {
		t.Fatalf("size %d, mapping %d", s.Size(), len(s.m.mem))
	}
	if st(mib, mib) != 0 {
		t.Fatal("a hole is not resident")
	}
	if got := readBack(t, s, mib, 7*mib); !bytes.Equal(got, make([]byte, 7*mib)) {
		t.Fatal("hole not zero")
	}
	if !bytes.Equal(readBack(t, s, 8*mib, mib), a) {
		t.Fatal("far page")
	}
	// Read across the end: zeros past it, through the mapping or not.
	got := readBack(t, s, 9*mib-10, 20)
	if !bytes.Equal(got[:10], a[mib-10:]) || !bytes.Equal(got[10:], make([]byte, 10)) {
		t.Fatalf("read across the end: %v", got)
	}
	if !bytes.Equal(readBack(t, s, 20*mib, 10), make([]byte, 10)) {
		t.Fatal("read past the end")
	}

	// Punch: forgotten, reads zero, also for the mapping; a write after
	// it lands.
	if err := s.Punch(0, mib); err != nil {
		t.Fatal(err)
	}
	if st(0, 4096) != 0 {
		t.Fatal("punched pages still known")
	}
	if !bytes.Equal(readBack(t, s, 0, mib), make([]byte, mib)) {
		t.Fatal("punched range not zero")
	}
	if !bytes.Equal(s.m.mem[:mib], make([]byte, mib)) {
		t.Fatal("punched range not zero in the mapping")
	}
	if err := s.WriteAt(b[:4096], 4096); err != nil {
		t.Fatal(err)
	}
	want = make([]byte, 3*4096)
	copy(want[4096:], b[:4096])
	if !bytes.Equal(readBack(t, s, 0, 3*4096), want) {
		t.Fatal("write after punch")
	}

	// Shrink: the tail is unmapped before the file shrinks.
	if err := s.SetSize(mib + 10); err != nil {
		t.Fatal(err)
	}
	if int64(len(s.m.mem)) != mib+osPage || st(8*mib, 4096) != 0 {
		t.Fatalf("after shrink: mapping %d", len(s.m.mem))
	}
	if err := s.SetSize(0); err != nil {
		t.Fatal(err)
	}
	if s.m.mem != nil || len(s.m.pages.leaves) != 0 {
		t.Fatal("truncation to 0 kept a mapping or page bits")
	}
	if err := s.WriteAt(a, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBack(t, s, 0, mib), a) {
		t.Fatal("write after truncation")
	}
}

// TestSegmentModel applies random operations to each kind of segment and
// to a byte slice, comparing every read.
func TestSegmentModel(t *testing.T) {
	const span = 6 << 20
	for name, d := range devices(t) {
		t.Run(name, func(t *testing.T) {
			s, err := d.NewSegment("model")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			var model []byte
			sealed := false
			viaMap := 0
			src := pattern(2<<20, 0)
			rng := func() (int64, int) {
				off := r.Int64N(span)
				n := 1 + r.IntN(1<<20+4096)
				if r.IntN(3) == 0 { // page-aligned, as the pool does
					off &^= 4095
					n = (n + 4095) &^ 4095
				}
				return off, n
			}
			for step := range 2000 {
				off, n := rng()
				switch op := r.IntN(10); {
				case op < 4:
					k := step % 4096
					p := src[k : k+n]
					if err := s.WriteAt(p, off); err != nil {
						t.Fatal(err)
					}
					if need := off + int64(n); need > int64(len(model)) {
						model = append(model, make([]byte, need-int64(len(model)))...)
					}
					copy(model[off:], p)
				case op < 7:
					if s.m != nil && off+int64(n) <= s.Size() && s.m.usable(off, off+int64(n)) != 0 {
						viaMap++
					}
					got := make([]byte, n)
					if err := s.ReadAt(got, off); err != nil {
						t.Fatal(err)
					}
					want := make([]byte, n)
					if off < int64(len(model)) {
						copy(want, model[off:])
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("step %d: read [%d,+%d) differs", step, off, n)
					}
				case op < 8:
					if err := s.Punch(off, int64(n)); err != nil {
						t.Fatal(err)
					}
					if off < int64(len(model)) {
						clear(model[off:min(int64(len(model)), off+int64(n))])
					}
				case op < 9:
					size := r.Int64N(span)
					if sealed && size < s.Size() {
						if err := s.SetSize(size); err == nil {
							t.Fatal("a sealed segment shrank")
						}
						continue
					}
					if err := s.SetSize(size); err != nil {
						t.Fatal(err)
					}
					if size < int64(len(model)) {
						model = model[:size]
					} else {
						model = append(model, make([]byte, size-int64(len(model)))...)
					}
				default:
					if name == "ram" && step > 1300 && !sealed {
						ok, err := s.SealShrink()
						if !ok || err != nil {
							t.Fatal(ok, err)
						}
						sealed = true
					}
					if err := s.Grow(off + int64(n)); err != nil {
						t.Fatal(err)
					}
					if need := off + int64(n); need > int64(len(model)) {
						model = append(model, make([]byte, need-int64(len(model)))...)
					}
				}
				if s.Size() != int64(len(model)) || fsize(t, s) != s.Size() {
					t.Fatalf("step %d: size %d, file %d, model %d", step, s.Size(), fsize(t, s), len(model))
				}
			}
			if s.m != nil && viaMap < 50 {
				t.Fatalf("only %d reads went through the mapping", viaMap)
			}
			t.Logf("%d reads through the mapping", viaMap)
		})
	}
}

// TestConcurrentReaders reads one RAM segment from many goroutines at
// once, pages mapped, resident and holes mixed (run with -race).
func TestConcurrentReaders(t *testing.T) {
	const mib = 1 << 20
	s := ramSegment(t, "readers")
	defer s.Close()
	want := make([]byte, 8*mib)
	for i := range int64(8) {
		if i == 3 {
			continue // a hole
		}
		p := pattern(mib, byte(i))
		copy(want[i*mib:], p)
		s.WriteAt(p, i*mib)
		if i%2 == 0 {
			s.WriteAt(p, i*mib) // mapped
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			buf := make([]byte, mib+4096)
			for k := range 50 {
				off := int64((g*7+k*3)%8) * mib
				n := min(len(buf), len(want)-int(off))
				if err := s.ReadAt(buf[:n], off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
					errs <- fmt.Errorf("reader %d: [%d,+%d) differs", g, off, n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// mapsOf counts the lines of /proc/self/maps naming the memfd label.
func mapsOf(t *testing.T, label string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:ram:"+label+" ")
}

func TestCloseUnmaps(t *testing.T) {
	before, count := mappedBytes.Load(), mappings.Load()
	for i := range 3 {
		label := fmt.Sprintf("leak-%d", i)
		s := ramSegment(t, label)
		for k := range int64(5) { // growth by remapping: still one mapping
			s.WriteAt(pattern(1<<20, 1), k*3<<20)
		}
		if n := mapsOf(t, label); n != 1 {
			t.Fatalf("%d mappings of %s, want 1", n, label)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := mapsOf(t, label); n != 0 {
			t.Fatalf("%d mappings of %s left after Close", n, label)
		}
	}
	if after := mappedBytes.Load(); after != before {
		t.Fatalf("address space accounted: %d before, %d after", before, after)
	}
	if after := mappings.Load(); after != count {
		t.Fatalf("mappings counted: %d before, %d after", count, after)
	}
}

// TestMapLimit: past the limit on mappings a RAM segment works unmapped.
func TestMapLimit(t *testing.T) {
	old := mapLimit
	mapLimit = mappings.Load()
	defer func() { mapLimit = old }()
	s := ramSegment(t, "limit")
	defer s.Close()
	p := pattern(1<<20, 5)
	s.WriteAt(p, 0)
	s.WriteAt(p, 0)
	if s.m.mem != nil {
		t.Fatal("mapped past the limit")
	}
	if !bytes.Equal(readBack(t, s, 0, 1<<20), p) {
		t.Fatal("unmapped segment")
	}
}

// TestReadMapsAtSecondTouch: a page that pwrite made resident (a
// stage-in) is read the first time with pread and only marked seen; the
// second read maps it. A first read through the mapping cost a fault per
// 4 KiB: staged pages read once came back at a quarter of the rate of
// reading the backing disk (files.BenchmarkSequentialReadahead).
func TestReadMapsAtSecondTouch(t *testing.T) {
	const mib = 1 << 20
	s := ramSegment(t, "touch")
	defer s.Close()
	a := pattern(2*mib, 4)
	if err := s.WriteAt(a, 0); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{pageSeen, pageMapped, pageMapped} {
		if !bytes.Equal(readBack(t, s, 0, mib), a[:mib]) {
			t.Fatalf("read %d differs", i+1)
		}
		if got := s.m.usable(0, mib); got != want {
			t.Fatalf("after read %d: state %d, want %d", i+1, got, want)
		}
	}
	// The second MiB was not read: still resident only; a range over
	// both is as cold as its coldest page.
	if got := s.m.usable(mib, 2*mib); got != pageResident {
		t.Fatalf("unread MiB: state %d, want resident", got)
	}
	if got := s.m.usable(0, 2*mib); got != pageResident {
		t.Fatalf("both MiB: state %d, want resident", got)
	}
	// A punch forgets that a page was seen.
	if err := s.Punch(0, mib); err != nil {
		t.Fatal(err)
	}
	if got := s.m.usable(0, mib); got != 0 {
		t.Fatalf("after the punch: state %d, want 0", got)
	}
}

// TestFaultFallsBack shrinks the memfd behind the segment's back (what a
// client could do to an unsealed one): the copy faults, and the segment
// falls back to pread/pwrite instead of killing the process.
func TestFaultFallsBack(t *testing.T) {
	const mib = 1 << 20
	s := ramSegment(t, "fault")
	defer s.Close()
	p := pattern(2*mib, 3)
	s.WriteAt(p, 0)
	s.WriteAt(p, 0) // mapped
	if s.m.usable(0, 2*mib) != pageMapped {
		t.Fatal("not mapped")
	}
	if err := unix.Ftruncate(s.fd, 4096); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, s, 0, 2*mib)
	if !s.m.broken.Load() {
		t.Fatal("no fault")
	}
	want := make([]byte, 2*mib)
	copy(want, p[:4096])
	if !bytes.Equal(got, want) {
		t.Fatal("fallback read")
	}
	if err := s.WriteAt(p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readBack(t, s, 0, 2*mib), p) {
		t.Fatal("fallback write")
	}
}

func TestSealedSegmentShrinkFails(t *testing.T) {
	s := ramSegment(t, "sealed")
	defer s.Close()
	p := pattern(1<<20, 4)
	s.WriteAt(p, 0)
	s.WriteAt(p, 0)
	if ok, err := s.SealShrink(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := s.SetSize(4096); err == nil {
		t.Fatal("sealed segment shrank")
	}
	if s.Size() != 1<<20 || int64(len(s.m.mem)) < s.Size() {
		t.Fatalf("size %d, mapping %d", s.Size(), len(s.m.mem))
	}
	if !bytes.Equal(readBack(t, s, 0, 1<<20), p) {
		t.Fatal("data after a refused shrink")
	}
}

// BenchmarkSegment copies 1 MiB to and from a segment whose pages are
// resident, through the mapping (ram) and through pread/pwrite (ram-pio,
// the same memfd without its mapping; file).
func BenchmarkSegment(b *testing.B) {
	const n, pages = 1 << 20, 32
	for _, kind := range []string{"ram", "ram-pio", "file"} {
		for _, op := range []string{"write", "read"} {
			b.Run(kind+"/"+op, func(b *testing.B) {
				var s *Segment
				if kind == "file" {
					d, err := Open(KindFile, "f", b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					if s, err = d.NewSegment("bench"); err != nil {
						b.Fatal(err)
					}
				} else {
					s = ramSegment(b, "bench")
				}
				defer s.Close()
				if kind == "ram-pio" {
					s.m.closeLocked()
					s.m = nil
				}
				buf := pattern(n, 1)
				for range 2 {
					for i := range int64(pages) {
						s.WriteAt(buf, i*n)
					}
				}
				b.SetBytes(n)
				for i := 0; b.Loop(); i++ {
					off := int64(i%pages) * n
					var err error
					if op == "write" {
						err = s.WriteAt(buf, off)
					} else {
						err = s.ReadAt(buf, off)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
