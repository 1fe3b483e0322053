package cte

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/runtime"
)

// caller runs the module's methods as one session (uid, gid).
type caller struct {
	t   *testing.T
	m   *Module
	s   *runtime.Session
	ids map[string]uint32
}

func newCaller(t *testing.T, m *Module, uid, gid uint32) *caller {
	ids := map[string]uint32{}
	for i, n := range m.Names() {
		ids[n] = uint32(i)
	}
	s := runtime.NewSession(uint64(uid)+1, 100, uid, gid)
	t.Cleanup(func() { s.Close() })
	return &caller{t: t, m: m, s: s, ids: ids}
}

func (c *caller) run(method string, args *runtime.ArgWriter, in []byte) ([]byte, runtime.Result, error) {
	out := make([]byte, 64<<10)
	var a []byte
	if args != nil {
		a = args.Bytes()
	}
	res, err := c.m.Run(context.Background(), &runtime.Task{MethodID: c.ids[method], Args: a, In: in, Out: out, Session: c.s})
	return out[:res.N], res, err
}

func (c *caller) buckets(prefix string) []string {
	c.t.Helper()
	out, _, err := c.run(MBuckets, runtime.NewArgWriter(nil).String(prefix), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	r := runtime.NewArgReader(out)
	var names []string
	for n := r.U32(); n > 0; n-- {
		names = append(names, r.String(MaxName))
	}
	return names
}

func testModule(t *testing.T) (*Module, *bufferpool.Pool) {
	pool, err := bufferpool.New(bufferpool.Config{OrganizerInterval: -1, Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return New(pool), pool
}

// TestAccess: a bucket belongs to the uid that created it; the mode's
// group and other bits decide what others may do, on every request (a
// handle opened before a chmod grants nothing after it); root may do
// everything; the file layer's buckets are out of reach.
func TestAccess(t *testing.T) {
	m, pool := testModule(t)
	alice := newCaller(t, m, 1000, 100)
	bob := newCaller(t, m, 1001, 200)   // another group
	carol := newCaller(t, m, 1002, 100) // alice's group
	root := newCaller(t, m, 0, 0)
	want := func(err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("err = %v, want %v", err, target)
		}
	}
	_, res, err := alice.run(MOpenWith, runtime.NewArgWriter(nil).String("sim/a").U32(0o640).U32(0), nil)
	want(err, nil)
	h := res.Value
	_, _, err = alice.run(MPut, ref("sim/a").String("x"), []byte("alice's"))
	want(err, nil)
	_, _, err = alice.run(MSetTag, ref("sim/a").String("x").String("k").String("v"), nil)
	want(err, nil)

	// bob: other bits 0: nothing.
	for _, tc := range []struct {
		method string
		args   *runtime.ArgWriter
	}{
		{MOpen, runtime.NewArgWriter(nil).String("sim/a")},
		{MGet, ref("sim/a").String("x")},
		{MStat, ref("sim/a").String("x")},
		{MList, ref("sim/a")},
		{MPut, ref("sim/a").String("y")},
		{MDelete, ref("sim/a").String("x")},
		{MSetTag, ref("sim/a").String("x").String("k").String("w")},
		{MDeleteBucket, runtime.NewArgWriter(nil).String("sim/a")},
		{MChmod, ref("sim/a").U32(0o666)},
		{MListVersions, ref("sim/a").String("x")},
	} {
		if _, _, err := bob.run(tc.method, tc.args, []byte("bob")); !errors.Is(err, runtime.ErrPermission) {
			t.Errorf("bob %s: err = %v, want permission denied", tc.method, err)
		}
	}
	if got := bob.buckets(""); len(got) != 0 {
		t.Errorf("bob lists %q", got)
	}
	res2, _ := runQuery(bob, Query{Tags: []TagFilter{{Key: "k", Value: "v"}}})
	if len(res2) != 0 {
		t.Errorf("bob's query finds %d blobs", len(res2))
	}
	// bob's handle number means nothing in his session.
	_, _, err = bob.run(MGet, runtime.NewArgWriter(nil).U64(h).String("x"), nil)
	want(err, runtime.ErrInvalid)

	// carol: group r--: reads and lists, never writes or deletes.
	out, _, err := carol.run(MGet, ref("sim/a").String("x"), nil)
	if err != nil || string(out) != "alice's" {
		t.Fatalf("carol get: %q, %v", out, err)
	}
	if got := carol.buckets("sim"); !slices.Equal(got, []string{"sim/a"}) {
		t.Errorf("carol lists %q", got)
	}
	_, _, err = carol.run(MPut, ref("sim/a").String("x"), []byte("carol"))
	want(err, runtime.ErrPermission)
	_, _, err = carol.run(MDeleteBucket, runtime.NewArgWriter(nil).String("sim/a"), nil)
	want(err, runtime.ErrPermission)
	_, _, err = carol.run(MChmod, ref("sim/a").U32(0o666), nil)
	want(err, runtime.ErrPermission)

	// Checked on every request: carol's open handle stops working when
	// alice takes the group's bits away.
	_, res, err = carol.run(MOpen, runtime.NewArgWriter(nil).String("sim/a"), nil)
	want(err, nil)
	ch := res.Value
	_, _, err = alice.run(MChmod, runtime.NewArgWriter(nil).U64(h).U32(0o600), nil)
	want(err, nil)
	_, _, err = carol.run(MGet, runtime.NewArgWriter(nil).U64(ch).String("x"), nil)
	want(err, runtime.ErrPermission)

	// Other bits rw-: bob may now write, still not delete the bucket.
	_, _, err = alice.run(MChmod, ref("sim/a").U32(0o606), nil)
	want(err, nil)
	_, _, err = bob.run(MPut, ref("sim/a").String("y"), []byte("bob"))
	want(err, nil)
	_, _, err = bob.run(MDeleteBucket, runtime.NewArgWriter(nil).String("sim/a"), nil)
	want(err, runtime.ErrPermission)

	// bob's own bucket is his; alice cannot see it.
	_, _, err = bob.run(MPut, ref("bob/data").String("z"), []byte("z"))
	want(err, nil)
	if got := alice.buckets(""); !slices.Equal(got, []string{"sim/a"}) {
		t.Errorf("alice lists %q", got)
	}
	if b, _ := pool.LookupBucket("bob/data"); b.Meta().Owner != 1001 || b.Meta().Mode != 0o600 {
		t.Errorf("bob's bucket meta %+v", b.Meta())
	}

	// Root reads, lists and deletes anything.
	if got := root.buckets(""); !slices.Equal(got, []string{"bob/data", "sim/a"}) {
		t.Errorf("root lists %q", got)
	}
	_, _, err = root.run(MDeleteBucket, runtime.NewArgWriter(nil).String("bob/data"), nil)
	want(err, nil)

	// The file layer's buckets and reserved names are out of reach.
	if _, err := pool.Bucket("file:7", bufferpool.BucketOptions{PageSize: 4096}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*caller{alice, root} {
		_, _, err = c.run(MDeleteBucket, runtime.NewArgWriter(nil).String("file:7"), nil)
		want(err, runtime.ErrInvalid)
		_, _, err = c.run(MList, ref("file:7"), nil)
		want(err, runtime.ErrInvalid)
	}
	if got := root.buckets(""); !slices.Equal(got, []string{"sim/a"}) {
		t.Errorf("root lists %q", got)
	}
	// Bad names are refused.
	for _, n := range []string{"a//b", "../x", "a/", "/a"} {
		_, _, err = alice.run(MOpen, runtime.NewArgWriter(nil).String(n), nil)
		want(err, runtime.ErrInvalid)
	}
}

func runQuery(c *caller, q Query) ([]string, error) {
	w := runtime.NewArgWriter(nil)
	WriteQuery(w, q)
	out, _, err := c.run(MQuery, w, nil)
	if err != nil {
		return nil, err
	}
	r := runtime.NewArgReader(out)
	var got []string
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		b := r.String(MaxName)
		got = append(got, b+":"+ReadInfo(r).Name)
	}
	return got, r.Done()
}

// TestQueryMethod: the query method answers from the pool's indexes with
// the caller's readable buckets only.
func TestQueryMethod(t *testing.T) {
	m, _ := testModule(t)
	alice := newCaller(t, m, 1000, 100)
	bob := newCaller(t, m, 1001, 200)
	for _, c := range []struct {
		who    *caller
		bucket string
		step   string
	}{{alice, "sim/run1", "1"}, {alice, "sim/run2", "5"}, {bob, "sim/run3", "3"}} {
		if _, _, err := c.who.run(MPut, ref(c.bucket).String("t"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.who.run(MSetTag, ref(c.bucket).String("t").String("step").String(c.step), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := runQuery(alice, Query{Tags: []TagFilter{{Key: "step", Range: true, Min: "1", Max: "4"}}})
	if err != nil || !slices.Equal(got, []string{"sim/run1:t"}) {
		t.Fatalf("alice: %q, %v", got, err)
	}
	got, err = runQuery(bob, Query{Prefix: "sim"})
	if err != nil || !slices.Equal(got, []string{"sim/run3:t"}) {
		t.Fatalf("bob: %q, %v", got, err)
	}
}

func TestQueryWire(t *testing.T) {
	q := Query{Prefix: "a/b", Tags: []TagFilter{{Key: "k", Value: "v"}, {Key: "n", Range: true, Min: "1", Max: "9"}},
		MinSize: 1, MaxSize: 100, Limit: 3}
	w := runtime.NewArgWriter(nil)
	WriteQuery(w, q)
	r := runtime.NewArgReader(w.Bytes())
	got := ReadQuery(r)
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	if got.Prefix != q.Prefix || !slices.Equal(got.Tags, q.Tags) || got.MaxSize != 100 || got.Limit != 3 ||
		!got.ModifiedAfter.IsZero() {
		t.Fatalf("got %+v", got)
	}
}

// BenchmarkAccessCheck: a 4 KiB get of the cte module from a session (its
// uid checked against the bucket's owner and mode on the request) against
// the same get without a session (the daemon's own tasks, unchecked).
// Compare the ns/op: the cost of the check as a ratio.
func BenchmarkAccessCheck(b *testing.B) {
	pool, err := bufferpool.New(bufferpool.Config{OrganizerInterval: -1, Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: 4 << 20}}})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	m := New(pool)
	ids := map[string]uint32{}
	for i, n := range m.Names() {
		ids[n] = uint32(i)
	}
	s := runtime.NewSession(1, 1, 1000, 1000)
	defer s.Close()
	if _, err := m.Run(context.Background(), &runtime.Task{MethodID: ids[MPut], Args: ref("bench").String("x").Bytes(),
		In: make([]byte, 4096), Session: s}); err != nil {
		b.Fatal(err)
	}
	args := ref("bench").String("x").Bytes()
	out := make([]byte, 4096)
	for _, tc := range []struct {
		name string
		s    *runtime.Session
	}{{"unchecked", nil}, {"checked", s}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := m.Run(context.Background(), &runtime.Task{MethodID: ids[MGet], Args: args, Out: out, Session: tc.s}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
