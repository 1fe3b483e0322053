package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/internal/host"
)

// TestPressureDemotes: a memory-pressure event (a PSI stall injected
// through a PSI file written by the test) makes the daemon's handler move
// RAM pages to the file tier and hold RAM there; once the pressure has
// passed, the RAM tier may fill again.
func TestPressureDemotes(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Config{OrganizerInterval: -1, Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 64 << 20},
		{Name: "nvme", Kind: bufferpool.KindFile, Dir: t.TempDir(), Capacity: 256 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := pool.Bucket("file", bufferpool.BucketOptions{PageSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	page := make([]byte, 1<<20)
	for i := range int64(16) {
		page[0] = byte(i)
		if _, err := b.WritePage(i, 0, page, nil); err != nil {
			t.Fatal(err)
		}
	}
	psi := filepath.Join(t.TempDir(), "memory")
	setPSI := func(total int) {
		s := "some avg10=0.00 avg60=0.00 avg300=0.00 total=" + strconv.Itoa(total) + "\n"
		if err := os.WriteFile(psi, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := host.NewPressureWatcher(pressureOptions(pool, host.PressureOptions{PSI: psi, Events: "-"}))
	t0 := time.Unix(1000, 0)
	setPSI(0)
	w.Sample(t0)
	setPSI(500_000) // half of the next second stalled on memory
	w.Sample(t0.Add(time.Second))

	s := pool.Stats()
	if s.Tiers[0].Used != 12<<20 || s.Tiers[1].Blobs != 4 || s.Tiers[0].Ceiling != 12<<20 {
		t.Fatalf("after one pressure event: ram %+v, nvme %+v; want 12 of 16 pages left in RAM, 4 on nvme", s.Tiers[0], s.Tiers[1])
	}
	if s.DirtyBytes != 16<<20 {
		t.Errorf("dirty bytes %d after demotion, want all 16MiB still dirty", s.DirtyBytes)
	}
	w.Sample(t0.Add(40 * time.Second)) // quiet since
	if s := pool.Stats(); s.Tiers[0].Ceiling != 0 {
		t.Fatalf("ceiling %d after the pressure passed", s.Tiers[0].Ceiling)
	}
}
