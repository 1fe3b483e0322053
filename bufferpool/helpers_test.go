package bufferpool

import (
	"bytes"
	"errors"
	"testing"
)

// testPool returns a pool with a RAM tier of ram bytes and a file tier of
// file bytes (0: none), organizer disabled, closed by t.Cleanup.
func testPool(t testing.TB, ram, file int64, mod ...func(*Config)) *Pool {
	t.Helper()
	cfg := Config{OrganizerInterval: -1, Seed: 1}
	cfg.Tiers = append(cfg.Tiers, TierConfig{Name: "ram", Kind: KindRAM, Capacity: ram})
	if file > 0 {
		cfg.Tiers = append(cfg.Tiers, TierConfig{Name: "nvme", Kind: KindFile, Dir: t.TempDir(), Capacity: file})
	}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func mustBucket(t testing.TB, p *Pool, name string, ps int64) *Bucket {
	t.Helper()
	b, err := p.Bucket(name, BucketOptions{PageSize: ps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func wantBytes(t *testing.T, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes %x..., want %d bytes %x...", len(got), head(got), len(want), head(want))
	}
}

func head(b []byte) []byte { return b[:min(len(b), 16)] }

// checkAccounting verifies every tier's used bytes against the blobs.
func checkAccounting(t *testing.T, p *Pool) {
	t.Helper()
	used := make([]int64, len(p.tiers))
	dirty := make([]int64, len(p.tiers))
	count := make([]int64, len(p.tiers))
	var leased int64
	defer func() {
		if got := p.lease.bytes.Load(); got != leased {
			t.Errorf("pool counts %d bytes leased, the buckets hold %d", got, leased)
		}
	}()
	for _, b := range p.snapshot() {
		b.mu.RLock()
		leased += b.leased
		nd := 0
		add := func(bl *blob) {
			used[bl.tier] += bl.alloc
			if bl.st != nil {
				used[bl.tier] -= bl.st.saved // compressed on a slower tier (stored.go)
			}
			count[bl.tier]++
			if bl.dirty {
				dirty[bl.tier] += bl.size
				nd++
			}
			if bl.alloc != roundUp(bl.size) {
				t.Errorf("blob %s: alloc %d for size %d", bl.key(), bl.alloc, bl.size)
			}
		}
		for _, bl := range b.pages {
			add(bl)
		}
		for _, bl := range b.named {
			add(bl)
		}
		used[0] += b.leased // shim leases are reserved first-tier capacity
		for _, n := range b.stored {
			used[p.st.tier] += n // durable copies in the blob store (durable.go)
		}
		if nd != b.ndirty {
			t.Errorf("bucket %s: ndirty %d, counted %d", b.Name(), b.ndirty, nd)
		}
		for ti, s := range b.segs {
			if s == nil || b.pageSize > 0 {
				continue
			}
			var u int64
			for _, bl := range b.named {
				if bl.tier == ti {
					u += bl.alloc
				}
			}
			if s.ext.used() != u {
				t.Errorf("bucket %s tier %d: extents %d, blobs %d", b.Name(), ti, s.ext.used(), u)
			}
		}
		b.mu.RUnlock()
	}
	for i, ts := range p.tiers {
		if got := ts.used.Load(); got != used[i] {
			t.Errorf("tier %s: used %d, blobs hold %d", ts.cfg.Name, got, used[i])
		}
		if got := ts.dirty.Load(); got != dirty[i] {
			t.Errorf("tier %s: dirty %d, blobs hold %d", ts.cfg.Name, got, dirty[i])
		}
		if got := ts.blobs.Load(); got != count[i] {
			t.Errorf("tier %s: blobs %d, counted %d", ts.cfg.Name, got, count[i])
		}
		if ts.used.Load() > ts.capacity {
			t.Errorf("tier %s: used %d > capacity %d", ts.cfg.Name, ts.used.Load(), ts.capacity)
		}
	}
}
