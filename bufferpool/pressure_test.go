package bufferpool

import "testing"

// TestShedDemotesRAM: under memory pressure the coldest RAM pages move to
// the file tier, dirty ones included, contents intact; the RAM tier then
// stays at the ceiling (new pages go to the file tier) until Unshed.
func TestShedDemotesRAM(t *testing.T) {
	p := testPool(t, 32*4096, 64*4096)
	b := mustBucket(t, p, "f", 4096)
	pages := make([][]byte, 16)
	buf := make([]byte, 1)
	for i := range int64(16) {
		pages[i] = fill(4096, byte(i))
		if _, err := b.WritePage(i, 0, pages[i], nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := int64(8); i < 16; i++ { // pages 0..7 stay cold
		b.ReadPage(i, 0, buf, nil)
		b.ReadPage(i, 0, buf, nil)
	}
	freed := p.Shed(0.5)
	s := p.Stats()
	if freed != 8*4096 || s.Tiers[0].Used != 8*4096 || s.Tiers[1].Blobs != 8 || s.Tiers[0].Demoted != 8 {
		t.Fatalf("Shed(0.5) freed %d; ram %+v, nvme %+v", freed, s.Tiers[0], s.Tiers[1])
	}
	for i := range int64(16) {
		st, err := b.Stat(itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i >= 8; (st.Tier == "ram") != want || !st.Dirty {
			t.Errorf("page %d after Shed: %+v (the cold half should have moved, still dirty)", i, st)
		}
	}
	snap := make([]byte, 4096)
	for i := range int64(16) {
		b.SnapshotPage(i, snap)
		wantBytes(t, snap, pages[i])
	}
	if s.Tiers[0].Ceiling != 8*4096 {
		t.Errorf("ceiling %d, want %d", s.Tiers[0].Ceiling, 8*4096)
	}

	// Held at the ceiling: a new page goes to the file tier, and the
	// organizer promotes nothing into RAM.
	if _, err := b.WritePage(16, 0, fill(4096, 16), nil); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b.ReadPage(0, 0, buf, nil)
	}
	p.Organize()
	if st, _ := b.Stat("16"); st.Tier != "nvme" {
		t.Errorf("new page under pressure on %s, want nvme", st.Tier)
	}
	if st, _ := b.Stat("0"); st.Tier != "nvme" {
		t.Errorf("hot page promoted to %s under pressure", st.Tier)
	}
	checkAccounting(t, p)

	p.Unshed()
	if s := p.Stats(); s.Tiers[0].Ceiling != 0 {
		t.Fatalf("ceiling %d after Unshed", s.Tiers[0].Ceiling)
	}
	if _, err := b.WritePage(17, 0, fill(4096, 17), nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := b.Stat("17"); st.Tier != "ram" {
		t.Errorf("new page after Unshed on %s, want ram", st.Tier)
	}
	checkAccounting(t, p)
}

// TestShedRAMOnly: with no slower tier, Shed evicts clean pages and keeps
// dirty ones (they exist nowhere else).
func TestShedRAMOnly(t *testing.T) {
	p := testPool(t, 16*4096, 0)
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(8) {
		v, err := b.WritePage(i, 0, fill(4096, byte(i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i < 4 && !b.MarkClean(i, v) { // pages 0..3 written back: clean
			t.Fatalf("MarkClean(%d)", i)
		}
	}
	p.Shed(0)
	s := p.Stats()
	if s.Tiers[0].Blobs != 4 || s.Tiers[0].Dirty != 4*4096 || s.Tiers[0].Evicted != 4 {
		t.Fatalf("after Shed(0): %+v", s.Tiers[0])
	}
	if s.Tiers[0].Ceiling != 4096 { // 1/16 of 16 pages
		t.Errorf("ceiling %d, want the floor of one page", s.Tiers[0].Ceiling)
	}
	checkAccounting(t, p)
}
