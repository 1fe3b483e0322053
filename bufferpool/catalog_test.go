package bufferpool

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestValidBucketName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"results", true},
		{"simulation/run1/temperature", true},
		{"a.b/c-d/e_f", true},
		{"run:1/x", false}, // reserved first component
		{"sim/run:1", true},
		{"file:3", false},
		{"omni:x.h5", false},
		{"", false},
		{"/abs", false},
		{"trailing/", false},
		{"a//b", false},
		{"a/../b", false},
		{"..", false},
		{"a/./b", false},
		{"a/\x00b", false},
	} {
		err := ValidBucketName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidBucketName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestPermits(t *testing.T) {
	m := BucketMeta{Owner: 1000, Group: 100, Mode: 0o640}
	for _, tc := range []struct {
		uid, gid, want uint32
		ok             bool
	}{
		{1000, 1000, AccessRead | AccessWrite, true},
		{1000, 100, AccessWrite, true},
		{1001, 100, AccessRead, true},
		{1001, 100, AccessWrite, false},
		{1002, 1002, AccessRead, false},
		{0, 0, AccessRead | AccessWrite, true}, // root
	} {
		if got := m.Permits(tc.uid, tc.gid, tc.want); got != tc.ok {
			t.Errorf("uid %d gid %d want %o: %v, want %v", tc.uid, tc.gid, tc.want, got, tc.ok)
		}
	}
	// The owner's bits apply to the owner even when the group's grant
	// more (as for files).
	m.Mode = 0o070
	if m.Permits(1000, 100, AccessRead) {
		t.Error("owner granted by the group bits")
	}
	if !m.OwnedBy(1000) || !m.OwnedBy(0) || m.OwnedBy(1001) {
		t.Error("OwnedBy")
	}
}

func TestBucketsUnder(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	names := []string{"sim", "sim/run1", "sim/run1/t", "sim/run10", "sim-x", "sim/run2/p", "other"}
	for _, n := range names {
		mustBucket(t, p, n, 0)
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"other", "sim", "sim-x", "sim/run1", "sim/run1/t", "sim/run10", "sim/run2/p"}},
		{"sim", []string{"sim", "sim/run1", "sim/run1/t", "sim/run10", "sim/run2/p"}},
		{"sim/", []string{"sim", "sim/run1", "sim/run1/t", "sim/run10", "sim/run2/p"}},
		{"sim/run1", []string{"sim/run1", "sim/run1/t"}},
		{"sim/run2", []string{"sim/run2/p"}},
		{"nothing", nil},
	} {
		if got := p.BucketsUnder(tc.prefix); !slices.Equal(got, tc.want) {
			t.Errorf("BucketsUnder(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
	if err := p.RenameBucket("sim/run1/t", "z/t"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteBucket("sim/run10"); err != nil {
		t.Fatal(err)
	}
	if got, want := p.BucketsUnder("sim/run1"), []string{"sim/run1"}; !slices.Equal(got, want) {
		t.Errorf("after rename: %q, want %q", got, want)
	}
	if got, want := p.BucketsUnder("z"), []string{"z/t"}; !slices.Equal(got, want) {
		t.Errorf("renamed: %q, want %q", got, want)
	}
}

func keys(rs []QueryResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Bucket+":"+r.Name)
	}
	return out
}

func TestQuery(t *testing.T) {
	p := testPool(t, 4<<20, 0)
	put := func(bucket, blob string, size int, tags ...string) {
		t.Helper()
		b := mustBucket(t, p, bucket, 0)
		if err := b.Put(blob, fill(size, 1)); err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(tags); i += 2 {
			if err := b.SetTag(blob, tags[i], tags[i+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("sim/run1/temp", "t0", 100, "step", "9", "var", "temp")
	put("sim/run1/temp", "t1", 5000, "step", "10", "var", "temp")
	put("sim/run1/pres", "p0", 300, "step", "10", "var", "pres")
	put("sim/run10/temp", "t0", 100, "step", "2", "var", "temp")
	put("other", "x", 10, "var", "temp")
	mid := time.Now()
	time.Sleep(2 * time.Millisecond)
	put("sim/run1/temp", "t2", 7000, "step", "100")

	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"prefix", Query{Prefix: "sim/run1"}, []string{"sim/run1/pres:p0", "sim/run1/temp:t0", "sim/run1/temp:t1", "sim/run1/temp:t2"}},
		{"tag equality", Query{Tags: []TagFilter{{Key: "var", Value: "temp"}}},
			[]string{"other:x", "sim/run1/temp:t0", "sim/run1/temp:t1", "sim/run10/temp:t0"}},
		{"numeric range", Query{Tags: []TagFilter{{Key: "step", Range: true, Min: "9", Max: "10"}}},
			[]string{"sim/run1/pres:p0", "sim/run1/temp:t0", "sim/run1/temp:t1"}},
		{"open range", Query{Tags: []TagFilter{{Key: "step", Range: true, Min: "10"}}},
			[]string{"sim/run1/pres:p0", "sim/run1/temp:t1", "sim/run1/temp:t2"}},
		{"tags and prefix", Query{Prefix: "sim/run1", Tags: []TagFilter{{Key: "var", Value: "temp"}, {Key: "step", Range: true, Max: "9"}}},
			[]string{"sim/run1/temp:t0"}},
		{"size", Query{Prefix: "sim", MinSize: 200, MaxSize: 6000}, []string{"sim/run1/pres:p0", "sim/run1/temp:t1"}},
		{"modified after", Query{ModifiedAfter: mid}, []string{"sim/run1/temp:t2"}},
		{"modified before", Query{Prefix: "other", ModifiedBefore: mid}, []string{"other:x"}},
		{"limit", Query{Prefix: "sim/run1", Limit: 2}, []string{"sim/run1/pres:p0", "sim/run1/temp:t0"}},
		{"no such tag", Query{Tags: []TagFilter{{Key: "nope", Value: "1"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Query(tc.q, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), tc.want) {
				t.Fatalf("got %q, want %q", keys(got), tc.want)
			}
		})
	}
	if _, err := p.Query(Query{MinSize: 10, MaxSize: 5}, nil); err == nil {
		t.Error("min size above max size accepted")
	}
	// allow filters buckets out.
	got, err := p.Query(Query{Tags: []TagFilter{{Key: "var", Value: "temp"}}}, func(b *Bucket) bool { return b.Name() == "other" })
	if err != nil || !slices.Equal(keys(got), []string{"other:x"}) {
		t.Fatalf("allow: %q, %v", keys(got), err)
	}
	// The index follows tag changes, deletes and bucket deletion.
	b := mustBucket(t, p, "sim/run1/temp", 0)
	if err := b.SetTag("t0", "var", "pressure"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete("t1"); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteBucket("other"); err != nil {
		t.Fatal(err)
	}
	got, _ = p.Query(Query{Tags: []TagFilter{{Key: "var", Value: "temp"}}}, nil)
	if want := []string{"sim/run10/temp:t0"}; !slices.Equal(keys(got), want) {
		t.Fatalf("after changes: %q, want %q", keys(got), want)
	}
	if err := b.DeleteTag("t0", "var"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, b.DeleteTag("t0", "var"), ErrNotFound)
	got, _ = p.Query(Query{Tags: []TagFilter{{Key: "var", Value: "pressure"}}}, nil)
	if len(got) != 0 {
		t.Fatalf("deleted tag still indexed: %q", keys(got))
	}
	p.cat.mu.Lock()
	ti := p.cat.tags["var"]
	p.cat.mu.Unlock()
	if ti == nil || slices.Contains(ti.vals, "pressure") {
		t.Fatalf("index holds a value no blob has: %+v", ti)
	}
}

// TestQueryIndexed: a tag query over many buckets looks only at the
// blobs the index names (a scan would visit every bucket).
func TestQueryIndexed(t *testing.T) {
	p := testPool(t, 64<<20, 0)
	for i := range 200 {
		b := mustBucket(t, p, fmt.Sprintf("many/b%03d", i), 0)
		if err := b.Put("x", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if i == 17 {
			b.SetTag("x", "pick", "me")
		}
	}
	visited := 0
	got, err := p.Query(Query{Tags: []TagFilter{{Key: "pick", Value: "me"}}}, func(*Bucket) bool { visited++; return true })
	if err != nil || len(got) != 1 || got[0].Bucket != "many/b017" {
		t.Fatalf("got %q, %v", keys(got), err)
	}
	if visited != 1 {
		t.Fatalf("query visited %d buckets, want 1", visited)
	}
}

func TestTagCompare(t *testing.T) {
	vals := []string{"b", "10", "9", "a", "-1", "1e3", "2.5"}
	slices.SortFunc(vals, tagCompare)
	if want := []string{"-1", "2.5", "9", "10", "1e3", "a", "b"}; !slices.Equal(vals, want) {
		t.Fatalf("sorted %q, want %q", vals, want)
	}
}
