package bufferpool

import (
	"slices"
	"testing"
)

func TestNamedBlobs(t *testing.T) {
	type step struct {
		op   string // put, pput, get, pget, del, stat
		name string
		off  int64
		data []byte // put/pput data, or expected get/pget result
		n    int    // pget buffer size
		err  error
	}
	a, bb := fill(5000, 1), fill(100, 2)
	grown := slices.Concat(a, make([]byte, 3000), bb)
	tests := []struct {
		name  string
		steps []step
	}{
		{"put get", []step{{op: "put", name: "x", data: a}, {op: "get", name: "x", data: a}}},
		{"replace smaller then grow reads zeros", []step{
			{op: "put", name: "x", data: a},
			{op: "put", name: "x", data: bb},
			{op: "pput", name: "x", off: 200, data: bb},
			{op: "get", name: "x", data: slices.Concat(bb, make([]byte, 100), bb)},
		}},
		{"partial put grows", []step{
			{op: "put", name: "x", data: a},
			{op: "pput", name: "x", off: 8000, data: bb},
			{op: "get", name: "x", data: grown},
			{op: "pget", name: "x", off: 7990, n: 20, data: slices.Concat(make([]byte, 10), bb[:10])},
			{op: "pget", name: "x", off: 8090, n: 20, data: bb[90:]},
			{op: "pget", name: "x", off: 8100, n: 20, data: []byte{}},
			{op: "pget", name: "x", off: 8101, n: 20, err: ErrInvalid},
		}},
		{"partial put creates", []step{
			{op: "pput", name: "y", off: 10, data: bb},
			{op: "get", name: "y", data: slices.Concat(make([]byte, 10), bb)},
		}},
		{"empty blob", []step{
			{op: "put", name: "e", data: nil},
			{op: "get", name: "e", data: []byte{}},
			{op: "pput", name: "e", off: 4096, data: bb},
			{op: "get", name: "e", data: slices.Concat(make([]byte, 4096), bb)},
		}},
		{"delete", []step{
			{op: "put", name: "x", data: a},
			{op: "del", name: "x"},
			{op: "get", name: "x", err: ErrNotFound},
			{op: "del", name: "x", err: ErrNotFound},
			{op: "stat", name: "x", err: ErrNotFound},
		}},
		{"bad input", []step{
			{op: "put", name: "", err: ErrInvalid},
			{op: "pput", name: "x", off: -1, data: bb, err: ErrInvalid},
			{op: "pget", name: "x", off: -5, n: 1, err: ErrInvalid},
			{op: "get", name: "nope", err: ErrNotFound},
			{op: "pput", name: "x", off: 1<<62 + 1, data: bb, err: ErrInvalid},
			{op: "pput", name: "x", off: 1 << 40, data: bb, err: ErrNoSpace},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testPool(t, 1<<20, 1<<20)
			b := mustBucket(t, p, "b", 0)
			for i, s := range tc.steps {
				var err error
				switch s.op {
				case "put":
					err = b.Put(s.name, s.data)
				case "pput":
					err = b.PartialPut(s.name, s.off, s.data)
				case "get":
					var got []byte
					if got, err = b.Get(s.name); err == nil {
						wantBytes(t, got, s.data)
					}
				case "pget":
					buf := make([]byte, s.n)
					var n int
					if n, err = b.PartialGet(s.name, s.off, buf); err == nil {
						wantBytes(t, buf[:n], s.data)
					}
				case "del":
					err = b.Delete(s.name)
				case "stat":
					_, err = b.Stat(s.name)
				}
				if s.err != nil {
					wantErr(t, err, s.err)
				} else if err != nil {
					t.Fatalf("step %d %s: %v", i, s.op, err)
				}
				checkAccounting(t, p)
			}
		})
	}
}

func TestListStat(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	b := mustBucket(t, p, "b", 0)
	for _, n := range []string{"c", "a", "b"} {
		if err := b.Put(n, fill(10, 0)); err != nil {
			t.Fatal(err)
		}
	}
	b.Get("a")
	var names []string
	for _, bi := range b.List() {
		names = append(names, bi.Name)
		if bi.Tier != "ram" || !bi.Dirty || bi.Size != 10 || bi.Page != -1 || bi.Version != 1 {
			t.Errorf("info %+v", bi)
		}
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("List names %v", names)
	}
	st, err := b.Stat("a")
	if err != nil || st.Reads != 1 || st.Score < 1.5 || st.LastUsed.IsZero() {
		t.Errorf("Stat a = %+v, %v", st, err)
	}
	if s := p.Stats(); s.Tiers[0].Used != 3*4096 || s.Tiers[0].Blobs != 3 || s.DirtyBytes != 30 || s.Buckets != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestWrongKind(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	pb := mustBucket(t, p, "pages", 4096)
	nb := mustBucket(t, p, "named", 0)
	wantErr(t, pb.Put("x", nil), ErrInvalid)
	_, err := pb.Get("x")
	wantErr(t, err, ErrInvalid)
	_, err = nb.ReadPage(0, 0, make([]byte, 1), nil)
	wantErr(t, err, ErrInvalid)
	_, err = nb.WritePage(0, 0, make([]byte, 1), nil)
	wantErr(t, err, ErrInvalid)
	wantErr(t, nb.Truncate(0), ErrInvalid)
	wantErr(t, nb.PutPage(0, nil, false), ErrInvalid)
	wantErr(t, pb.Delete("x"), ErrInvalid)
	_, err = p.Bucket("", BucketOptions{})
	wantErr(t, err, ErrInvalid)
	_, err = p.Bucket("neg", BucketOptions{PageSize: -1})
	wantErr(t, err, ErrInvalid)
}
