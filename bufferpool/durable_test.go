package bufferpool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// durablePool opens a pool with a file tier in dir.
func durablePool(t *testing.T, dir string) *Pool {
	t.Helper()
	p, err := New(Config{OrganizerInterval: -1, Tiers: []TierConfig{
		{Name: "ram", Kind: KindRAM, Capacity: 8 << 20},
		{Name: "nvme", Kind: KindFile, Dir: dir, Capacity: 8 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDurableRecover: what a durable put wrote is back, bit for bit, in a
// pool opened on the same tier directory; a later plain put, a delete and
// a deleted bucket are not.
func TestDurableRecover(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	b, err := p.Bucket("sim/run1", BucketOptions{Owner: 1000, Group: 100, Mode: 0o640, KeepVersions: 2})
	if err != nil {
		t.Fatal(err)
	}
	big := fill(3<<20, 5)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.PutWith("big", big, PutOptions{Durable: true}))
	must(b.SetTag("big", "step", "7"))
	must(b.PutWith("gone", []byte("old"), PutOptions{Durable: true}))
	must(b.Put("gone", []byte("overwritten, not durable"))) // drops the stored copy
	must(b.PutWith("deleted", []byte("x"), PutOptions{Durable: true}))
	must(b.Delete("deleted"))
	must(b.Put("volatile", []byte("never durable")))
	must(b.PartialPutWith("pp", 10, []byte("partial"), PutOptions{Durable: true}))
	for i := 1; i <= 3; i++ {
		if _, err := b.PutVersion("v", fill(5000, byte(i)), PutOptions{Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	must(b.Chmod(0o604))
	other, _ := p.Bucket("other", BucketOptions{})
	must(other.PutWith("x", []byte("x"), PutOptions{Durable: true}))
	must(p.DeleteBucket("other"))
	if info, _ := b.Stat("big"); !info.Durable {
		t.Fatal("durable blob not marked durable")
	}
	must(p.Close())

	q := durablePool(t, dir)
	defer q.Close()
	rep := q.StoreReport()
	if rep.Buckets != 1 || rep.Blobs != 4 || rep.Skipped != 0 {
		t.Fatalf("report %+v, want 1 bucket, 4 blobs (big, pp, v and its kept version)", rep)
	}
	rb, err := q.LookupBucket("sim/run1")
	if err != nil {
		t.Fatal(err)
	}
	if m := rb.Meta(); m.Owner != 1000 || m.Group != 100 || m.Mode != 0o604 || m.KeepVersions != 2 {
		t.Fatalf("meta %+v", m)
	}
	got, err := rb.Get("big")
	must(err)
	wantBytes(t, got, big)
	got, err = rb.Get("pp")
	must(err)
	wantBytes(t, got, append(make([]byte, 10), "partial"...))
	for _, n := range []string{"gone", "deleted", "volatile"} {
		_, err := rb.Get(n)
		wantErr(t, err, ErrNotFound)
	}
	if _, err := q.LookupBucket("other"); err == nil {
		t.Fatal("deleted bucket recovered")
	}
	vs, err := rb.ListVersions("v")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 3 {
		t.Fatalf("versions %+v, %v", vs, err)
	}
	got, _ = rb.GetVersion("v", 2)
	wantBytes(t, got, fill(5000, 2))
	res, err := q.Query(Query{Tags: []TagFilter{{Key: "step", Value: "7"}}}, nil)
	if err != nil || len(res) != 1 || res[0].Name != "big" {
		t.Fatalf("tag index after recovery: %+v, %v", res, err)
	}
	checkAccounting(t, q)
}

// TestDurableCorrupt: a stored blob whose bytes no longer match their
// checksum is reported and skipped, the others recovered.
func TestDurableCorrupt(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	b, _ := p.Bucket("c", BucketOptions{})
	if err := b.PutWith("good", []byte("good bytes"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutWith("bad", []byte("bad bytes!"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	db, err := bolt.Open(filepath.Join(dir, StoreFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		data, _, err := blobsOf(tx, storedKeyOf(tx, "c"), false)
		if err != nil {
			return err
		}
		return data.Put([]byte("bad"), []byte("bad bytes?"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	q := durablePool(t, dir)
	defer q.Close()
	if rep := q.StoreReport(); rep.Blobs != 1 || rep.Skipped != 1 || len(rep.Errors) != 1 {
		t.Fatalf("report %+v", rep)
	}
	rb, _ := q.LookupBucket("c")
	if _, err := rb.Get("bad"); err == nil {
		t.Fatal("corrupt blob recovered")
	}
}

// TestDurableNeedsFileTier: without a file tier a durable put fails and
// leaves nothing behind; a plain pool creates no store file.
func TestDurableNeedsFileTier(t *testing.T) {
	p := testPool(t, 1<<20, 0)
	b := mustBucket(t, p, "x", 0)
	wantErr(t, b.PutWith("a", []byte("a"), PutOptions{Durable: true}), ErrNotSupported)
	dir := t.TempDir()
	q := durablePool(t, dir)
	defer q.Close()
	if _, err := os.Stat(filepath.Join(dir, StoreFile)); !os.IsNotExist(err) {
		t.Fatalf("store made without a durable put: %v", err)
	}
	// A second pool on the same directory gets no store while the first
	// holds it.
	qb, _ := q.Bucket("x", BucketOptions{})
	if err := qb.PutWith("a", []byte("a"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	r := durablePool(t, dir)
	defer r.Close()
	rb, _ := r.Bucket("x", BucketOptions{})
	wantErr(t, rb.PutWith("a", []byte("b"), PutOptions{Durable: true}), ErrBusy)
}

// TestDurableUnloaded: a stored blob recovery could not put back (here a
// corrupt one) stays in the store, but a plain put or a delete of its name
// drops it, so that a later restart does not bring it back.
func TestDurableUnloaded(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	b, _ := p.Bucket("u", BucketOptions{})
	for _, n := range []string{"x", "y", "z"} {
		if err := b.PutWith(n, []byte("stored "+n), PutOptions{Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	db, err := bolt.Open(filepath.Join(dir, StoreFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		data, _, _ := blobsOf(tx, storedKeyOf(tx, "u"), false)
		for _, n := range []string{"x", "y", "z"} {
			data.Put([]byte(n), []byte("corrupt!"))
		}
		return nil
	})
	db.Close()
	q := durablePool(t, dir)
	qb, _ := q.LookupBucket("u")
	if rep := q.StoreReport(); rep.Skipped != 3 {
		t.Fatalf("report %+v", rep)
	}
	if err := qb.Put("x", []byte("new, plain")); err != nil {
		t.Fatal(err)
	}
	if err := qb.Delete("y"); err != nil {
		t.Fatal(err)
	}
	q.Close()
	r := durablePool(t, dir)
	defer r.Close()
	if rep := r.StoreReport(); rep.Skipped != 1 || rep.Blobs != 0 {
		t.Fatalf("after overwrite and delete: %+v, want only z left (skipped)", rep)
	}
}

// TestDurableBadStore: a store file that is not a bbolt database leaves
// the pool working, says so in the report, and fails durable puts with
// an error instead of overwriting it.
func TestDurableBadStore(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFile)
	junk := []byte("not a database, but someone's file")
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	p := durablePool(t, dir)
	defer p.Close()
	if rep := p.StoreReport(); len(rep.Errors) != 1 {
		t.Fatalf("report %+v", rep)
	}
	b, _ := p.Bucket("x", BucketOptions{})
	if err := b.PutWith("a", []byte("a"), PutOptions{Durable: true}); err == nil {
		t.Fatal("durable put into a broken store succeeded")
	}
	if err := b.Put("a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(junk) {
		t.Fatal("the broken store file was changed")
	}
}

// storedKeyOf is the store key of bucket name as its record says.
func storedKeyOf(tx *bolt.Tx, name string) string {
	var m BucketMeta
	json.Unmarshal(tx.Bucket(keyBuckets).Get([]byte(name)), &m)
	return storeKey(name, m.Incarnation)
}

// TestDurableDeleteRace: a bucket deleted while a new bucket of its name
// stores blobs takes only its own blobs out of the store, and blobs no
// record names are dropped at recovery.
func TestDurableDeleteRace(t *testing.T) {
	dir := t.TempDir()
	p := durablePool(t, dir)
	old, _ := p.Bucket("r", BucketOptions{})
	if err := old.PutWith("a", []byte("old"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	// As DeleteBucket does it, in the worst order: the name is free, a
	// new bucket of that name stores a blob, then the old one's drop
	// takes it out of the store.
	p.mu.Lock()
	delete(p.buckets, "r")
	p.cat.removeName("r")
	p.mu.Unlock()
	nb, _ := p.Bucket("r", BucketOptions{})
	if nb == old || nb.Meta().Incarnation <= old.Meta().Incarnation {
		t.Fatalf("incarnations %d, %d", old.Meta().Incarnation, nb.Meta().Incarnation)
	}
	if err := nb.PutWith("b", []byte("new"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	// The old bucket, not yet dropped, stores once more (a put racing its
	// deletion): its record must not replace the new one's.
	if err := old.PutWith("c", []byte("late"), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if err := old.drop(); err != nil {
		t.Fatal(err)
	}
	p.Close()
	q := durablePool(t, dir)
	defer q.Close()
	rb, err := q.LookupBucket("r")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rb.Get("b"); err != nil || string(got) != "new" {
		t.Fatalf("new bucket's blob: %q, %v", got, err)
	}
	for _, n := range []string{"a", "c"} {
		if _, err := rb.Get(n); err == nil {
			t.Fatalf("deleted bucket's blob %s came back", n)
		}
	}
	if rep := q.StoreReport(); rep.Blobs != 1 || len(rep.Errors) != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// TestDurableCapacity: durable copies take the file tier's capacity (a
// put that does not fit fails with ErrNoSpace and leaves nothing stored),
// overwrites and deletes give it back, and a restart counts what the
// store holds.
func TestDurableCapacity(t *testing.T) {
	dir := t.TempDir()
	p, err := New(Config{OrganizerInterval: -1, Tiers: []TierConfig{
		{Name: "ram", Kind: KindRAM, Capacity: 8 << 20},
		{Name: "nvme", Kind: KindFile, Dir: dir, Capacity: 3 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := p.Bucket("cap", BucketOptions{})
	nvme := func(pp *Pool) TierStats { return pp.Stats().Tiers[1] }
	if err := b.PutWith("a", fill(1<<20, 1), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if s := nvme(p); s.Stored != 1<<20 || s.Used != 1<<20 {
		t.Fatalf("after 1 MiB durable: %+v", s)
	}
	if err := b.PutWith("a", fill(2<<20, 1), PutOptions{Durable: true}); err != nil { // grows in place
		t.Fatal(err)
	}
	wantErr(t, b.PutWith("b", fill(2<<20, 2), PutOptions{Durable: true}), ErrNoSpace)
	if info, _ := b.Stat("b"); info.Durable {
		t.Fatal("a durable put that did not fit is marked durable")
	}
	if err := b.PutWith("a", fill(1<<20, 3), PutOptions{Durable: true}); err != nil { // shrinks
		t.Fatal(err)
	}
	if s := nvme(p); s.Stored != 1<<20 {
		t.Fatalf("after the shrink: %+v", s)
	}
	if err := b.PutWith("c", fill(4096, 4), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutVersion("c", fill(8192, 5), PutOptions{Durable: true}); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, p)
	if err := b.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if s := nvme(p); s.Stored != 1<<20 {
		t.Fatalf("after deleting c and its version: %+v", s)
	}
	checkAccounting(t, p)
	p.Close()
	q := durablePool(t, dir)
	defer q.Close()
	if s := nvme(q); s.Stored != 1<<20 {
		t.Fatalf("after the restart: %+v", s)
	}
	checkAccounting(t, q)
	if err := q.DeleteBucket("cap"); err != nil {
		t.Fatal(err)
	}
	if s := nvme(q); s.Stored != 0 || s.Used != 0 {
		t.Fatalf("after deleting the bucket: %+v", s)
	}
}
