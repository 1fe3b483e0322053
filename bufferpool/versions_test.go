package bufferpool

import (
	"fmt"
	"slices"
	"testing"
)

func TestVersions(t *testing.T) {
	p := testPool(t, 4<<20, 0)
	b, err := p.Bucket("v", BucketOptions{KeepVersions: 3})
	if err != nil {
		t.Fatal(err)
	}
	data := func(i int) []byte { return fill(1000+i*100, byte(i)) }
	// A plain Put first: version 1.
	if err := b.Put("x", data(1)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTag("x", "k", "v"); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 5; i++ {
		v, err := b.PutVersion("x", data(i), PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v != uint64(i) {
			t.Fatalf("PutVersion %d returned version %d", i, v)
		}
	}
	vs, err := b.ListVersions("x")
	if err != nil {
		t.Fatal(err)
	}
	var nums []uint64
	for _, v := range vs {
		nums = append(nums, v.Version)
	}
	if want := []uint64{3, 4, 5}; !slices.Equal(nums, want) {
		t.Fatalf("versions %v, want %v (keep 3)", nums, want)
	}
	if !vs[2].Current || vs[0].Current || vs[1].Size != int64(len(data(4))) {
		t.Fatalf("version info %+v", vs)
	}
	for v := 3; v <= 5; v++ {
		got, err := b.GetVersion("x", uint64(v))
		if err != nil {
			t.Fatal(err)
		}
		wantBytes(t, got, data(v))
	}
	got, err := b.GetVersion("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes(t, got, data(5))
	cur, _ := b.Get("x")
	wantBytes(t, cur, data(5))
	_, err = b.GetVersion("x", 2)
	wantErr(t, err, ErrNotFound)
	// Kept versions are hidden from List and Stat; tags follow the
	// current blob.
	if l := b.List(); len(l) != 1 || l[0].Name != "x" || l[0].Generation != 5 || l[0].Tags["k"] != "v" {
		t.Fatalf("List %+v", l)
	}
	_, err = b.Stat("x\x003")
	wantErr(t, err, ErrNotFound)
	_, err = b.GetVersion("x\x003", 0)
	wantErr(t, err, ErrInvalid)
	// A plain Put changes the current version in place.
	if err := b.Put("x", data(9)); err != nil {
		t.Fatal(err)
	}
	if vs, _ := b.ListVersions("x"); len(vs) != 3 || vs[2].Version != 5 {
		t.Fatalf("after put: %+v", vs)
	}
	// Delete removes every version and gives the space back.
	if err := b.Delete("x"); err != nil {
		t.Fatal(err)
	}
	_, err = b.ListVersions("x")
	wantErr(t, err, ErrNotFound)
	if st := p.Stats(); st.Tiers[0].Used != 0 || st.Tiers[0].Blobs != 0 {
		t.Fatalf("after delete: %+v", st.Tiers[0])
	}
	checkAccounting(t, p)
}

// TestVersionsKeepDefault: without KeepVersions a bucket keeps
// DefaultKeepVersions, and versions of one blob leave others alone.
func TestVersionsKeepDefault(t *testing.T) {
	p := testPool(t, 4<<20, 0)
	b := mustBucket(t, p, "d", 0)
	for i := range 10 {
		for _, n := range []string{"a", "b"} {
			if _, err := b.PutVersion(n, []byte(fmt.Sprint(n, i)), PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range []string{"a", "b"} {
		vs, err := b.ListVersions(n)
		if err != nil || len(vs) != DefaultKeepVersions || vs[len(vs)-1].Version != 10 {
			t.Fatalf("%s: %+v, %v", n, vs, err)
		}
		got, _ := b.GetVersion(n, 7)
		wantBytes(t, got, []byte(fmt.Sprint(n, 6)))
	}
	checkAccounting(t, p)
}
