package client

import (
	"testing"

	"github.com/iowarp/iowarp/bufferpool"
)

// TestBucketCompress: the Compress option (and SetCompress) reaches the
// daemon's bucket; an unknown codec is refused and leaves it as it was.
func TestBucketCompress(t *testing.T) {
	d := startDaemon(t)
	c := connect(t, d)
	b, err := c.Bucket("z", Compress(bufferpool.CompressZstd))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := d.pool.LookupBucket("z")
	if err != nil || pb.Compress() != bufferpool.CompressZstd {
		t.Fatalf("daemon's bucket: %v, compress %q", err, pb.Compress())
	}
	if err := b.SetCompress("gzip"); err == nil {
		t.Fatal("gzip accepted")
	}
	if _, err := c.Bucket("z", Compress("gzip")); err == nil {
		t.Fatal("open with gzip accepted")
	}
	if pb.Compress() != bufferpool.CompressZstd {
		t.Fatalf("refused codec changed the bucket: %q", pb.Compress())
	}
	if err := b.SetCompress(bufferpool.CompressNone); err != nil || pb.Compress() != bufferpool.CompressNone {
		t.Fatalf("none: %v %q", err, pb.Compress())
	}
}
