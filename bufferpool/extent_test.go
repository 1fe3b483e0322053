package bufferpool

import (
	"math/rand/v2"
	"testing"
)

func TestExtentAlloc(t *testing.T) {
	var a extentAlloc
	x := a.alloc(4096)
	y := a.alloc(8192)
	z := a.alloc(4096)
	if x != 0 || y != 4096 || z != 12288 || a.end != 16384 {
		t.Fatalf("alloc %d %d %d end %d", x, y, z, a.end)
	}
	a.release(y, 8192)
	if got := a.alloc(4096); got != 4096 { // first fit in the hole
		t.Fatalf("first fit %d", got)
	}
	a.release(4096, 4096)
	a.release(x, 4096) // coalesces with the hole
	if len(a.free) != 1 || a.free[0] != (extent{0, 12288}) {
		t.Fatalf("free list %v", a.free)
	}
	a.release(z, 4096) // everything free: end shrinks
	if len(a.free) != 0 || a.end != 0 {
		t.Fatalf("free %v end %d", a.free, a.end)
	}
	x = a.alloc(4096)
	if !a.grow(x, 4096, 12288) || a.end != 12288 {
		t.Fatal("grow at end")
	}
}

func TestExtentAllocRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var a extentAlloc
	owned := map[int64]int64{}
	used := int64(0)
	for range 5000 {
		if len(owned) > 0 && rng.IntN(2) == 0 {
			for off, n := range owned {
				if rng.IntN(3) == 0 && a.grow(off, n, n+4096) {
					owned[off] = n + 4096
					used += 4096
				} else {
					a.release(off, n)
					delete(owned, off)
					used -= n
				}
				break
			}
		} else {
			n := int64(rng.IntN(4)+1) * 4096
			off := a.alloc(n)
			for o, m := range owned {
				if off < o+m && o < off+n {
					t.Fatalf("[%d,+%d) overlaps [%d,+%d)", off, n, o, m)
				}
			}
			owned[off] = n
			used += n
		}
		if a.used() != used {
			t.Fatalf("used %d, want %d", a.used(), used)
		}
		for i := 1; i < len(a.free); i++ {
			if a.free[i-1].off+a.free[i-1].n >= a.free[i].off {
				t.Fatalf("free list not sorted/coalesced: %v", a.free)
			}
		}
	}
}
