package files

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// pw is one pwrite of n random bytes at off.
type pw struct{ off, n int64 }

// TestPartialPageWriteBack: writes that overlap, touch or miss each
// other within a page (and across pages, over an existing backing file
// or past its end) leave the backing file equal to a model, and the
// write-back writes the bytes written, once, not whole pages.
func TestPartialPageWriteBack(t *testing.T) {
	const p = testPage
	cases := []struct {
		name   string
		base   int64 // bytes of the backing file before
		writes []pw
		// flushed is what one write-back after all writes writes
		// (writeback mode); writethrough writes each write once.
		flushed int64
	}{
		{"one small", 0, []pw{{100, 10}}, 10},
		{"overlapping", 0, []pw{{100, 50}, {120, 50}}, 70},
		{"inside", 0, []pw{{100, 50}, {110, 10}}, 50},
		{"adjacent", 0, []pw{{100, 50}, {150, 50}, {50, 50}}, 150},
		{"disjoint", 0, []pw{{100, 10}, {p / 2, 10}, {p - 10, 10}}, 30},
		{"bridged", 0, []pw{{100, 10}, {300, 10}, {105, 200}}, 210},
		{"five disjoint merge two", 0, []pw{{0, 1}, {1000, 1}, {2000, 1}, {2010, 1}, {9000, 1}}, 1 + 1 + 11 + 1},
		{"across a page boundary", 0, []pw{{p - 10, 20}, {2*p - 5, 10}}, 30},
		{"over the backing file", 3 * p, []pw{{p + 7, 13}, {2*p + 100, 1}}, 14},
		{"straddling the old end", p + 100, []pw{{p + 50, 100}}, 100},
		{"far past the end", 1000, []pw{{40 * p, 3}}, 3},
		{"full page", 0, []pw{{p, p}, {p + 10, 10}}, p},
	}
	for _, mode := range []Mode{Writeback, Writethrough} {
		for _, tc := range cases {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				fs := newTestFS(t, mode, 64*testPage, 64*testPage, nil)
				rng := rand.New(rand.NewSource(1))
				model := make([]byte, tc.base)
				rng.Read(model)
				if err := os.WriteFile(filepath.Join(fs.backing, "f"), model, 0o644); err != nil {
					t.Fatal(err)
				}
				h := mustOpen(t, fs, "f", os.O_RDWR)
				defer h.Release()
				var sum int64
				for _, w := range tc.writes {
					model = writeModel(t, h, rng, model, w)
					sum += w.n
				}
				if err := h.Fsync(false); err != nil {
					t.Fatal(err)
				}
				// Writethrough writes each write once. Writeback writes
				// the ranges at fsync, unless a stall of flushDelay let
				// the background write-back write some earlier: then
				// at most the writes once more.
				lo, hi := tc.flushed, tc.flushed+sum
				if mode == Writethrough {
					lo, hi = sum, sum
				}
				if got := int64(fs.Stats().FlushedBytes); got < lo || got > hi {
					t.Errorf("wrote back %d bytes, want %d (at most %d)", got, lo, hi)
				}
				got, err := os.ReadFile(filepath.Join(fs.backing, "f"))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, model) {
					t.Fatalf("backing file (%d bytes) differs from the model (%d bytes)", len(got), len(model))
				}
			})
		}
	}
}

// writeModel writes w through h and into model (grown with zeros).
func writeModel(t *testing.T, h *Handle, rng *rand.Rand, model []byte, w pw) []byte {
	t.Helper()
	data := make([]byte, w.n)
	rng.Read(data)
	if _, err := h.WriteAt(data, w.off); err != nil {
		t.Fatal(err)
	}
	if end := w.off + w.n; end > int64(len(model)) {
		model = append(model, make([]byte, end-int64(len(model)))...)
	}
	copy(model[w.off:], data)
	return model
}

// TestWritethroughStreamNotAmplified: a stream of 4 KiB writes in
// writethrough mode writes each byte to the backing store once (it
// rewrote the page from its start on every write: 8x with 64 KiB pages,
// 123x with 1 MiB ones).
func TestWritethroughStreamNotAmplified(t *testing.T) {
	fs := newTestFS(t, Writethrough, 64*testPage, 64*testPage, nil)
	h := mustOpen(t, fs, "stream", os.O_WRONLY|os.O_CREATE)
	defer h.Release()
	const total = 3000000
	chunk := make([]byte, 4096)
	for off := 0; off < total; off += len(chunk) {
		n := min(len(chunk), total-off)
		if _, err := h.WriteAt(chunk[:n], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Fsync(false); err != nil {
		t.Fatal(err)
	}
	if got := fs.Stats().FlushedBytes; got > total*11/10 {
		t.Fatalf("wrote %d bytes to the backing store for a %d-byte file (%.1fx)", got, total, float64(got)/total)
	}
}

// TestSparseWriteKeepsHoles: a 3-byte write far past the end of a file
// allocates a block or two on the backing store, not the page from its
// start, and the gap from the old end stays a hole (SEEK_DATA skips it).
func TestSparseWriteKeepsHoles(t *testing.T) {
	for _, mode := range []Mode{Writeback, Writethrough} {
		t.Run(string(mode), func(t *testing.T) {
			fs := newTestFS(t, mode, 64*testPage, 64*testPage, nil)
			name := filepath.Join(fs.backing, "sparse")
			if err := os.WriteFile(name, bytes.Repeat([]byte{7}, 1000), 0o644); err != nil {
				t.Fatal(err)
			}
			h := mustOpen(t, fs, "sparse", os.O_RDWR)
			const off = 5000000
			if _, err := h.WriteAt([]byte("abc"), off); err != nil {
				t.Fatal(err)
			}
			if err := h.Fsync(false); err != nil {
				t.Fatal(err)
			}
			h.Release()
			var st unix.Stat_t
			if err := unix.Stat(name, &st); err != nil {
				t.Fatal(err)
			}
			if st.Size != off+3 || st.Blocks*512 > 8192 {
				t.Fatalf("backing file: size %d, %d KiB allocated, want %d and at most 8 KiB", st.Size, st.Blocks/2, off+3)
			}
			fd, err := unix.Open(name, unix.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			data, err := unix.Seek(fd, 4096, unix.SEEK_DATA)
			if err != nil || data != off&^4095 {
				t.Fatalf("SEEK_DATA past the first block = %d, %v; want %d (the gap a hole)", data, err, off&^4095)
			}
		})
	}
}

// TestFailedWriteBackKeepsRanges: a write-back that fails at write or
// at fsync keeps the ranges dirty: after the store recovers, the next
// fsync writes them again, even where the store lost what it was given
// (Linux marks pages clean after a failed fsync; here the bytes are
// scribbled over to show it).
func TestFailedWriteBackKeepsRanges(t *testing.T) {
	for _, op := range []string{"write", "sync"} {
		t.Run(op, func(t *testing.T) {
			fs := newTestFS(t, Writeback, 64*testPage, 64*testPage, nil)
			store := newFaultStore()
			fs.store = store
			captureLog(t, fs)
			name := filepath.Join(fs.backing, "f")
			rng := rand.New(rand.NewSource(2))
			model := make([]byte, 2*testPage)
			rng.Read(model)
			if err := os.WriteFile(name, model, 0o644); err != nil {
				t.Fatal(err)
			}
			h := mustOpen(t, fs, "f", os.O_RDWR)
			defer h.Release()
			store.set(op, unix.EIO)
			for _, w := range []pw{{100, 10}, {testPage + 5, 20}, {3 * testPage, 7}} {
				model = writeModel(t, h, rng, model, w)
			}
			if err := h.Fsync(false); err == nil {
				t.Fatal("fsync succeeded while the store fails")
			}
			model = writeModel(t, h, rng, model, pw{200, 3})
			if err := h.Fsync(false); err == nil {
				t.Fatal("fsync succeeded while the store fails")
			}
			// The store lost the data it was given.
			if err := os.WriteFile(name, bytes.Repeat([]byte{0xee}, 4*testPage), 0o644); err != nil {
				t.Fatal(err)
			}
			store.set(op, nil)
			if err := h.Fsync(false); err != nil {
				t.Fatalf("fsync after the store recovered: %v", err)
			}
			got, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range [][2]int{{100, 110}, {200, 203}, {testPage + 5, testPage + 25}, {3 * testPage, 3*testPage + 7}} {
				if !bytes.Equal(got[r[0]:r[1]], model[r[0]:r[1]]) {
					t.Fatalf("bytes [%d,%d) of the backing file are not what was written", r[0], r[1])
				}
			}
		})
	}
}

// TestPunchHoleStaysHole: fallocate(PUNCH_HOLE) of a file's middle
// stays a hole on the backing store through the next write-back, whether
// the punched bytes were written back before (clean) or not yet (dirty);
// the write-back wrote zeros over it.
func TestPunchHoleStaysHole(t *testing.T) {
	const p = testPage
	for _, mode := range []Mode{Writeback, Writethrough} {
		for _, synced := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/synced=%v", mode, synced), func(t *testing.T) {
				fs := newTestFS(t, mode, 64*testPage, 64*testPage, nil)
				h := mustOpen(t, fs, "p", os.O_RDWR|os.O_CREATE)
				defer h.Release()
				rng := rand.New(rand.NewSource(3))
				model := writeModel(t, h, rng, nil, pw{0, 4 * p})
				if synced {
					if err := h.Fsync(false); err != nil {
						t.Fatal(err)
					}
				}
				const punch = unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE
				if err := h.Allocate(p, 2*p, punch); err != nil {
					t.Fatal(err)
				}
				clear(model[p : 3*p])
				model = writeModel(t, h, rng, model, pw{2*p + 100, 10}) // a write into the hole
				if err := h.Fsync(false); err != nil {
					t.Fatal(err)
				}
				name := filepath.Join(fs.backing, "p")
				if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, model) {
					t.Fatalf("backing file differs from the model (%v)", err)
				}
				fd, err := unix.Open(name, unix.O_RDONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				hole, herr := unix.Seek(fd, 0, unix.SEEK_HOLE)
				data, derr := unix.Seek(fd, p, unix.SEEK_DATA)
				if herr != nil || derr != nil || hole != p || data != (2*p+100)&^4095 {
					t.Fatalf("SEEK_HOLE from 0 = %d (%v), SEEK_DATA from %d = %d (%v): want %d and %d",
						hole, herr, p, data, derr, p, (2*p+100)&^4095)
				}
			})
		}
	}
}
