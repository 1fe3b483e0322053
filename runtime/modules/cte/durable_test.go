package cte

import (
	"errors"
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/runtime"
)

// TestDurableBucketWire: open_with's durable flag creates a durable
// bucket (and only creates: an existing plain bucket stays plain), a
// bucket_stat says so, set_durable is the owner's, and open_with without
// the flags argument (an older client) still opens.
func TestDurableBucketWire(t *testing.T) {
	pool, err := bufferpool.New(bufferpool.Config{OrganizerInterval: -1, Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4 << 20},
		{Name: "nvme", Kind: bufferpool.KindFile, Dir: t.TempDir(), Capacity: 4 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	m := New(pool)
	alice := newCaller(t, m, 1000, 100)
	carol := newCaller(t, m, 1002, 100) // alice's group
	open := func(c *caller, name string, mode uint32, flags ...uint32) error {
		w := runtime.NewArgWriter(nil).String(name).U32(mode).U32(0)
		for _, f := range flags {
			w.U32(f)
		}
		_, _, err := c.run(MOpenWith, w, nil)
		return err
	}
	stat := func(name string) BucketStat {
		t.Helper()
		out, _, err := alice.run(MBucketStat, ref(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := runtime.NewArgReader(out)
		s := ReadBucketStat(r)
		if err := r.Done(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := open(alice, "d", 0o660, BucketFlagDurable); err != nil {
		t.Fatal(err)
	}
	if s := stat("d"); !s.DurableBucket || !s.Durable {
		t.Fatalf("stat %+v", s)
	}
	if err := open(alice, "p", 0o660); err != nil {
		t.Fatal(err)
	}
	if err := open(alice, "p", 0o660, BucketFlagDurable); err != nil {
		t.Fatal(err)
	}
	if s := stat("p"); s.DurableBucket {
		t.Fatal("open_with made an existing bucket durable")
	}
	if err := open(alice, "x", 0, 0x80); !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("unknown flag: %v", err)
	}
	if _, _, err := carol.run(MSetDurable, ref("p").Bool(true), nil); !errors.Is(err, runtime.ErrPermission) {
		t.Fatalf("set_durable by a writer who is not the owner: %v", err)
	}
	if _, _, err := alice.run(MSetDurable, ref("p").Bool(true), nil); err != nil {
		t.Fatal(err)
	}
	if s := stat("p"); !s.DurableBucket {
		t.Fatal("set_durable did not")
	}
	if _, _, err := carol.run(MPut, ref("p").String("b"), []byte("by carol")); err != nil {
		t.Fatal(err)
	}
	out, _, err := alice.run(MStat, ref("p").String("b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if i := ReadInfo(runtime.NewArgReader(out)); !i.Durable {
		t.Fatalf("a plain put into a durable bucket: %+v", i)
	}
}
