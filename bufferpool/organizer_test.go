package bufferpool

import (
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
