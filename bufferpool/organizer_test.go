package bufferpool

import (
	"fmt"
	"testing"
	"time"
)

func TestOrganizerDemotesPastHighWatermark(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096) // ram: high 14.4 pages, low 11.2
	b := mustBucket(t, p, "f", 4096)
	page := fill(4096, 1)
	buf := make([]byte, 1)
	for i := range int64(16) {
		if _, err := b.WritePage(i, 0, page, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(5); i < 16; i++ { // pages 0..4 stay cold
		b.ReadPage(i, 0, buf, nil)
	}
	p.Organize()
	s := p.Stats()
	if s.Tiers[0].Used > s.Tiers[0].Capacity*7/10 {
		t.Fatalf("ram used %d after organize, low watermark %d", s.Tiers[0].Used, s.Tiers[0].Capacity*7/10)
	}
	if s.Tiers[0].Demoted != 5 || s.Tiers[1].Blobs != 5 {
		t.Fatalf("demoted %d, nvme blobs %d", s.Tiers[0].Demoted, s.Tiers[1].Blobs)
	}
	for i := range int64(5) {
		if st, _ := b.Stat(itoa(i)); st.Tier != "nvme" || !st.Dirty {
			t.Fatalf("page %d: %+v", i, st)
		}
	}
	// Contents survive the move.
	snap := make([]byte, 4096)
	for i := range int64(16) {
		b.SnapshotPage(i, snap)
		wantBytes(t, snap, page)
	}
	checkAccounting(t, p)
}

func TestOrganizerPinnedNotDemoted(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096)
	b := mustBucket(t, p, "f", 4096)
	b.Pin()
	for i := range int64(16) {
		b.WritePage(i, 0, []byte{1}, nil)
	}
	p.Organize()
	if s := p.Stats(); s.Tiers[0].Demoted != 0 || s.Tiers[0].Blobs != 16 {
		t.Fatalf("pinned bucket demoted: %+v", s.Tiers[0])
	}
	b.Unpin()
	p.Organize()
	if s := p.Stats(); s.Tiers[0].Demoted == 0 {
		t.Fatalf("unpinned bucket not demoted: %+v", s.Tiers[0])
	}
}

func TestOrganizerEvictsLastTier(t *testing.T) {
	p := testPool(t, 10*4096, 0)
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(10) {
		b.PutPage(i, fill(4096, 1), i < 2) // pages 0, 1 dirty
	}
	p.Organize()
	s := p.Stats()
	if s.Tiers[0].Used > 7*4096 || s.Tiers[0].Evicted != 3 {
		t.Fatalf("after organize %+v", s.Tiers[0])
	}
	if !b.HasPage(0) || !b.HasPage(1) {
		t.Fatal("dirty page evicted")
	}
}

func TestOrganizerPromotesHotBlobs(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096)
	b := mustBucket(t, p, "f", 4096)
	page := fill(4096, 7)
	for i := range int64(16) {
		b.PutPage(i, page, false)
	}
	// The RAM tier is full: these land on nvme.
	for i := int64(16); i < 20; i++ {
		b.PutPage(i, page, false)
	}
	p.Organize() // demotes cold ones out of ram to below the low watermark
	var onNvme []int64
	for _, bi := range b.List() {
		if bi.Tier == "nvme" {
			onNvme = append(onNvme, bi.Page)
		}
	}
	if len(onNvme) == 0 {
		t.Fatal("nothing on nvme")
	}
	hot := onNvme[0]
	buf := make([]byte, 8)
	for range 5 {
		b.ReadPage(hot, 0, buf, nil)
	}
	p.Organize()
	if st, _ := b.Stat(itoa(hot)); st.Tier != "ram" {
		t.Fatalf("hot page %d still on %s", hot, st.Tier)
	}
	if s := p.Stats(); s.Tiers[0].Promoted == 0 {
		t.Fatalf("promoted counter %+v", s.Tiers[0])
	}
	b.ReadPage(hot, 0, buf, nil)
	wantBytes(t, buf, page[:8])
	checkAccounting(t, p)
}

func TestOrganizerGoroutine(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096, func(c *Config) { c.OrganizerInterval = 5 * time.Millisecond })
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(16) {
		b.WritePage(i, 0, []byte{1}, nil)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().Tiers[0].Demoted == 0 {
		if time.Now().After(deadline) {
			t.Fatal("organizer never demoted")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestScoreDecays(t *testing.T) {
	bl := &blob{}
	for range 4 {
		bl.touch(0, true)
	}
	bl.foldLocked(0)
	s, r := bl.scores(int64(halfLife))
	if s < 1.99 || s > 2.01 || r < 1.99 || r > 2.01 {
		t.Fatalf("after one half-life: score %v reads %v", s, r)
	}
}

func itoa(i int64) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int64) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// fullRAM sets the RAM tier's watermarks so that a full RAM tier is not
// demoted from (high 1) but is above its low watermark (0.95): promotion
// into it can only swap.
func fullRAM(c *Config) { c.Tiers[0].HighWatermark, c.Tiers[0].LowWatermark = 1, 0.95 }

// TestOrganizerSwaps: a RAM tier at its low watermark, full of blobs
// nobody reads, takes a blob read often on the file tier by demoting the
// coldest one (it only waited for room before); a blob read about as
// often as the RAM blobs is not worth the copies and stays.
func TestOrganizerSwaps(t *testing.T) {
	const blk = 64 << 10
	p := testPool(t, 16*blk, 64*blk, fullRAM)
	b := mustBucket(t, p, "n", 0)
	for i := range 16 {
		if err := b.Put(fmt.Sprint("cold", i), fill(blk, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	hot := fill(blk, 99)
	if err := b.Put("hot", hot); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Stat("hot"); st.Tier != "nvme" {
		t.Fatalf("hot placed on %s, want nvme (ram full)", st.Tier)
	}
	p.Organize() // nothing read yet: nothing moves
	if s := p.Stats(); s.Tiers[0].Promoted != 0 || s.Tiers[0].Demoted != 0 {
		t.Fatalf("first pass moved blobs: %+v", s.Tiers[0])
	}
	buf := make([]byte, 16)
	for range 10 {
		if _, err := b.PartialGet("hot", 0, buf); err != nil {
			t.Fatal(err)
		}
	}
	p.Organize()
	st, _ := b.Stat("hot")
	s := p.Stats()
	if st.Tier != "ram" || s.Tiers[0].Swapped != 1 || s.Tiers[0].Promoted != 1 {
		t.Fatalf("hot on %s, ram swapped %d promoted %d; want a swap into ram", st.Tier, s.Tiers[0].Swapped, s.Tiers[0].Promoted)
	}
	if s.Tiers[0].Used > s.Tiers[0].Capacity*95/100 || s.Tiers[0].Demoted != 2 {
		t.Fatalf("after the swap ram used %d of %d, demoted %d (want 2: room for the hot blob below the low watermark)",
			s.Tiers[0].Used, s.Tiers[0].Capacity, s.Tiers[0].Demoted)
	}
	got, _ := b.Get("hot")
	wantBytes(t, got, hot)
	for i := range 16 {
		got, err := b.Get(fmt.Sprint("cold", i))
		if err != nil {
			t.Fatal(err)
		}
		wantBytes(t, got, fill(blk, byte(i)))
	}
	checkAccounting(t, p)
}

// TestOrganizerSwapMustPay: with the RAM blobs read about as often as a
// blob on the file tier, swapping would cost more copies than it saves:
// nothing moves (and SwapCost < 0 never swaps).
func TestOrganizerSwapMustPay(t *testing.T) {
	const blk = 64 << 10
	for _, tc := range []struct {
		name      string
		cost      float64
		coldReads int
		hotReads  int
		swap      bool
	}{
		{"pays", 0, 0, 10, true},
		{"close scores", 0, 4, 6, false},
		{"disabled", -1, 0, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPool(t, 16*blk, 64*blk, fullRAM, func(c *Config) { c.SwapCost = tc.cost })
			b := mustBucket(t, p, "n", 0)
			for i := range 16 {
				if err := b.Put(fmt.Sprint("c", i), fill(blk, 1)); err != nil {
					t.Fatal(err)
				}
			}
			b.Put("h", fill(blk, 2))
			p.Organize()
			buf := make([]byte, 1)
			for _, bi := range b.List() {
				n := tc.coldReads
				if bi.Name == "h" {
					n = tc.hotReads
				}
				for range n {
					b.PartialGet(bi.Name, 0, buf)
				}
			}
			p.Organize()
			st, _ := b.Stat("h")
			if swapped := p.Stats().Tiers[0].Swapped == 1; swapped != tc.swap || (st.Tier == "ram") != tc.swap {
				t.Fatalf("h on %s, swapped %v; want swap %v", st.Tier, swapped, tc.swap)
			}
			checkAccounting(t, p)
		})
	}
}

// TestOrganizerSwapsPages: the same for the pages of a file: a page read
// repeatedly on the file tier displaces the coldest RAM page.
func TestOrganizerSwapsPages(t *testing.T) {
	p := testPool(t, 16*4096, 64*4096, fullRAM)
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(17) { // page 16 lands on nvme
		if _, err := b.WritePage(i, 0, fill(4096, byte(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := b.Stat("16"); st.Tier != "nvme" {
		t.Fatalf("page 16 on %s", st.Tier)
	}
	buf := make([]byte, 8)
	for i := int64(1); i < 16; i++ { // page 0 stays cold
		b.ReadPage(i, 0, buf, nil)
	}
	for range 12 {
		b.ReadPage(16, 0, buf, nil)
	}
	p.Organize()
	if st, _ := b.Stat("16"); st.Tier != "ram" {
		t.Fatalf("hot page 16 on %s after organize", st.Tier)
	}
	if st, _ := b.Stat("0"); st.Tier != "nvme" {
		t.Fatalf("coldest page 0 on %s, want demoted for the swap", st.Tier)
	}
	snap := make([]byte, 4096)
	for i := range int64(17) {
		b.SnapshotPage(i, snap)
		wantBytes(t, snap, fill(4096, byte(i)))
	}
	checkAccounting(t, p)
}
