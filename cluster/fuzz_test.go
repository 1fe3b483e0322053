package cluster

import (
	"context"
	"testing"
)

// FuzzServe feeds request frames from the network to the service's
// handlers: a bad frame is an error, never a panic, and nothing is read
// for a file this node does not own.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"path":"a","page":0,"page_size":65536}`))
	f.Add([]byte(`{"path":"../x","page":-1,"page_size":99999999999}`))
	f.Add([]byte(`{"path":"a"`))
	f.Add([]byte{})
	f.Add(encodeBlob(blobHeader{Bucket: "b", Blob: "x", Place: true}, []byte("data")))
	f.Add(encodeBlob(blobHeader{Bucket: "b", Blob: "x", MoveRev: 7}, []byte("data")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, '{'})
	n := &Node{cfg: Config{Node: "n1"}, owned: map[string]int64{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := n.serveReadPage(context.Background(), b); err == nil {
			t.Fatalf("ReadPage of %q served %d bytes of a file not owned", b, len(out))
		}
		if out, err := n.serveRevoke(context.Background(), b); err == nil && string(out) != "{}" {
			t.Fatalf("Revoke of %q: %q", b, out)
		}
		if out, err := n.serveBlobPut(context.Background(), b); err == nil {
			t.Fatalf("BlobPut of %q on a node without a pool: %q", b, out)
		}
		if out, err := n.serveBlobGet(context.Background(), b); err == nil {
			t.Fatalf("BlobGet of %q on a node without a pool: %q", b, out)
		}
		if _, err := n.servePing(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	})
}
