package bufferpool

import (
	"testing"
)

func threeTiers(policy string) func(*Config) {
	return func(c *Config) {
		c.Placement = policy
		c.Tiers = append(c.Tiers, TierConfig{Name: "nvme1", Kind: KindFile, Dir: c.Tiers[1].Dir + "1", Capacity: 1 << 20})
	}
}

func TestPlacementPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy string
		check  func(t *testing.T, blobs []int64)
	}{
		{PlaceMinimizeIOTime, func(t *testing.T, blobs []int64) {
			if blobs[0] != 30 {
				t.Errorf("minimize_io_time: %v", blobs)
			}
		}},
		{PlaceRoundRobin, func(t *testing.T, blobs []int64) {
			if blobs[0] != 10 || blobs[1] != 10 || blobs[2] != 10 {
				t.Errorf("round_robin: %v", blobs)
			}
		}},
		{PlaceRandom, func(t *testing.T, blobs []int64) {
			for i, n := range blobs {
				if n == 0 || n == 30 {
					t.Errorf("random: tier %d has %d of 30: %v", i, n, blobs)
				}
			}
		}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p := testPool(t, 1<<20, 1<<20, threeTiers(tc.policy))
			b := mustBucket(t, p, "f", 4096)
			for i := range int64(30) {
				if _, err := b.WritePage(i, 0, []byte{1}, nil); err != nil {
					t.Fatal(err)
				}
			}
			var blobs []int64
			for _, ts := range p.Stats().Tiers {
				blobs = append(blobs, ts.Blobs)
			}
			tc.check(t, blobs)
			checkAccounting(t, p)
		})
	}
}

func TestPlacementFallsThroughFullTier(t *testing.T) {
	p := testPool(t, 2*4096, 1<<20)
	b := mustBucket(t, p, "f", 4096)
	for i := range int64(5) {
		b.WritePage(i, 0, []byte{1}, nil)
	}
	if s := p.Stats(); s.Tiers[0].Blobs != 2 || s.Tiers[1].Blobs != 3 {
		t.Fatalf("%+v", s.Tiers)
	}
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]Config{
		"no tiers":    {},
		"bad kind":    {Tiers: []TierConfig{{Name: "x", Kind: "tape", Capacity: 1}}},
		"no capacity": {Tiers: []TierConfig{{Name: "x", Kind: KindRAM}}},
		"dup name":    {Tiers: []TierConfig{{Name: "x", Kind: KindRAM, Capacity: 1}, {Name: "x", Kind: KindRAM, Capacity: 1}}},
		"no dir":      {Tiers: []TierConfig{{Name: "x", Kind: KindFile, Capacity: 1}}},
		"watermarks":  {Tiers: []TierConfig{{Name: "x", Kind: KindFile, Dir: dir, Capacity: 1, HighWatermark: 0.5, LowWatermark: 0.8}}},
		"placement":   {Placement: "best", Tiers: []TierConfig{{Name: "x", Kind: KindRAM, Capacity: 1}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			wantErr(t, err, ErrInvalid)
		}
	}
}
