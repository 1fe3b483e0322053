package bufferpool

import "testing"

// TestDurableBucketRecover: every write to a durable bucket is in the
// store when it returns: Put, PartialPut (into a blob and past its end),
// PutVersion, tags, Delete and Chmod, with no PutOptions. A pool opened
// on the same directory has the bucket with exactly those blobs, bytes,
// versions and tags, and it is still durable; an empty durable bucket
// comes back too, a plain bucket does not.
func TestDurableBucketRecover(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := p.Bucket("sim/d", BucketOptions{Durable: true, KeepVersions: 2, Mode: 0o640})
	must(err)
	if !b.Durable() || !b.Stored() {
		t.Fatalf("durable %v, stored %v", b.Durable(), b.Stored())
	}
	_, err = p.Bucket("sim/empty", BucketOptions{Durable: true})
	must(err)
	plain, _ := p.Bucket("sim/plain", BucketOptions{})
	must(plain.Put("x", []byte("volatile")))

	big := fill(1<<20, 3)
	must(b.Put("big", big))
	must(b.PartialPut("big", 4096, []byte("patched")))
	copy(big[4096:], "patched")
	must(b.PartialPut("big", 1<<20, []byte("grown")))
	big = append(big, "grown"...)
	must(b.PartialPut("pp", 100, []byte("new by partial put")))
	must(b.SetTag("big", "step", "9"))
	must(b.SetTag("big", "gone", "x"))
	must(b.DeleteTag("big", "gone"))
	for i := 1; i <= 3; i++ {
		if _, err := b.PutVersion("v", fill(3000, byte(i)), PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	must(b.Put("del", []byte("deleted")))
	_, err = b.PutVersion("del", []byte("deleted too"), PutOptions{})
	must(err)
	must(b.Delete("del"))
	must(b.Chmod(0o600))
	for _, n := range []string{"big", "pp", "v"} {
		if info, _ := b.Stat(n); !info.Durable {
			t.Fatalf("%s not durable in a durable bucket", n)
		}
	}
	checkAccounting(t, p)
	must(p.Close())

	q := durablePool(t, dir)
	defer q.Close()
	if rep := q.StoreReport(); rep.Buckets != 2 || rep.Blobs != 4 || rep.Skipped != 0 {
		t.Fatalf("report %+v, want 2 buckets, 4 blobs (big, pp, v and one kept version)", rep)
	}
	rb, err := q.LookupBucket("sim/d")
	must(err)
	if m := rb.Meta(); !m.Durable || m.Mode != 0o600 || m.KeepVersions != 2 {
		t.Fatalf("meta %+v", m)
	}
	got, err := rb.Get("big")
	must(err)
	wantBytes(t, got, big)
	got, err = rb.Get("pp")
	must(err)
	wantBytes(t, got, append(make([]byte, 100), "new by partial put"...))
	if tags := statTags(t, rb, "big"); len(tags) != 1 || tags["step"] != "9" {
		t.Fatalf("tags %v", tags)
	}
	vs, err := rb.ListVersions("v")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 3 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
	got, _ = rb.GetVersion("v", 2)
	wantBytes(t, got, fill(3000, 2))
	if _, err := rb.ListVersions("del"); err == nil {
		t.Fatal("deleted blob's versions came back")
	}
	if eb, err := q.LookupBucket("sim/empty"); err != nil || !eb.Durable() {
		t.Fatalf("empty durable bucket: %v", err)
	}
	if _, err := q.LookupBucket("sim/plain"); err == nil {
		t.Fatal("plain bucket recovered")
	}
	// Still durable after the restart: a plain Put is stored.
	must(rb.Put("after", []byte("after the restart")))
	checkAccounting(t, q)
}

func statTags(t *testing.T, b *Bucket, name string) map[string]string {
	t.Helper()
	info, err := b.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.Tags
}

// TestSetDurable: SetDurable(true) stores what a plain bucket holds (kept
// versions too) and makes its later writes durable; SetDurable(false)
// makes them plain again.
func TestSetDurable(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	b, _ := p.Bucket("s", BucketOptions{})
	if err := b.Put("a", []byte("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutVersion("a", []byte("a2"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Put("b", []byte("b1")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetDurable(true); err != nil {
		t.Fatal(err)
	}
	if err := b.PartialPut("b", 2, []byte("+")); err != nil {
		t.Fatal(err)
	}
	if err := b.SetDurable(false); err != nil {
		t.Fatal(err)
	}
	if err := b.Put("c", []byte("plain again")); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, p)
	p.Close()
	q := durablePool(t, dir)
	defer q.Close()
	rb, err := q.LookupBucket("s")
	if err != nil {
		t.Fatal(err)
	}
	if rb.Durable() {
		t.Fatal("still durable after SetDurable(false)")
	}
	for n, want := range map[string]string{"a": "a2", "b": "b1+"} {
		if got, err := rb.Get(n); err != nil || string(got) != want {
			t.Fatalf("%s: %q, %v", n, got, err)
		}
	}
	if got, err := rb.GetVersion("a", 1); err != nil || string(got) != "a1" {
		t.Fatalf("kept version: %q, %v", got, err)
	}
	if _, err := rb.Get("c"); err == nil {
		t.Fatal("a plain put after SetDurable(false) came back")
	}
}

// TestDurableBucketNeedsFileTier: a durable bucket without a file tier,
// or of pages, is refused and not created.
func TestDurableBucketNeedsFileTier(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	_, err := p.Bucket("d", BucketOptions{Durable: true})
	wantErr(t, err, ErrNotSupported)
	if _, err := p.LookupBucket("d"); err == nil {
		t.Fatal("a refused durable bucket exists")
	}
	q := durablePool(t, t.TempDir())
	defer q.Close()
	_, err = q.Bucket("pages", BucketOptions{Durable: true, PageSize: 4096})
	wantErr(t, err, ErrInvalid)
	b, _ := p.Bucket("plain", BucketOptions{})
	wantErr(t, b.SetDurable(true), ErrNotSupported)
	if b.Durable() {
		t.Fatal("durable after a failed SetDurable")
	}
}
