package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iowarp/iowarp/bufferpool"
)

// Distributed CTE buckets. A blob put through the cluster (Node.Put, or
// `iowarp cluster put`, which asks the daemon of its node) lands in the
// putting node's pool when its tiers have room for it, else in the pool
// of the member with the most room (from the member records, refreshed
// every TTL/3). The placement map in etcd, /iowarp/<cluster>/blobs/<bucket>/<blob>,
// names the node holding each blob, on that node's lease: a blob goes
// with its node. Get from any node reads the map and asks the holder.
// In the pools the buckets are named "cluster:<bucket>". Not done: the
// organizer moving cold blobs off a full node, replicas.

// ErrNoRoom: no member has room for the blob.
var ErrNoRoom = errors.New("cluster: no member has room")

func (c Config) blobKey(bucket, blob string) string {
	return c.prefix() + "blobs/" + bucket + "/" + blob
}

// blobHeader heads a BlobPut or BlobGet frame (a 4-byte length, the JSON
// header, then for a put the data).
type blobHeader struct {
	Bucket string `json:"bucket"`
	Blob   string `json:"blob"`
	Place  bool   `json:"place"` // put: this node decides where (local first), else here
}

func encodeBlob(h blobHeader, data []byte) []byte {
	j, _ := json.Marshal(h)
	b := make([]byte, 4, 4+len(j)+len(data))
	binary.BigEndian.PutUint32(b, uint32(len(j)))
	return append(append(b, j...), data...)
}

func decodeBlob(b []byte) (blobHeader, []byte, error) {
	var h blobHeader
	if len(b) < 4 {
		return h, nil, status.Error(codes.InvalidArgument, "short blob frame")
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return h, nil, status.Errorf(codes.InvalidArgument, "blob header of %d bytes in a frame of %d", n, len(b))
	}
	if err := decodeRequest(b[4:4+n], &h); err != nil {
		return h, nil, err
	}
	if h.Bucket == "" || h.Blob == "" {
		return h, nil, status.Error(codes.InvalidArgument, "blob frame without bucket or blob name")
	}
	return h, b[4+n:], nil
}

// Put stores a blob in the cluster: here if this node's tiers have room,
// else on the member with the most.
func (n *Node) Put(ctx context.Context, bucket, blob string, data []byte) (node string, err error) {
	if n.local.Blobs == nil {
		return "", fmt.Errorf("cluster: node %s has no pool", n.cfg.Node)
	}
	if free(n.local.Blobs.Stats()) >= int64(len(data)) {
		return n.cfg.Node, n.putLocal(ctx, bucket, blob, data)
	}
	ms, err := Members(ctx, n.cli, n.cfg.Cluster)
	if err != nil {
		return "", err
	}
	var best Member
	var room int64 = -1
	for _, m := range ms {
		if r := memberFree(m); m.Name != n.cfg.Node && r > room {
			best, room = m, r
		}
	}
	if room < int64(len(data)) {
		return "", fmt.Errorf("put %s/%s (%d bytes): %w", bucket, blob, len(data), ErrNoRoom)
	}
	c, err := n.conn(ctx, best.Name)
	if err != nil {
		return "", err
	}
	if _, err := call(ctx, c, "BlobPut", rawFrame(encodeBlob(blobHeader{Bucket: bucket, Blob: blob}, data))); err != nil {
		return "", fmt.Errorf("put %s/%s on %s: %w", bucket, blob, best.Name, err)
	}
	return best.Name, nil
}

func free(st bufferpool.Stats) (room int64) {
	for _, t := range st.Tiers {
		room += max(0, t.Capacity-t.Used)
	}
	return room
}

func memberFree(m Member) (room int64) {
	for _, t := range m.Tiers {
		room += max(0, t.Capacity-t.Used)
	}
	return room
}

// putLocal puts the blob in this node's pool and records it in the map.
func (n *Node) putLocal(ctx context.Context, bucket, blob string, data []byte) error {
	b, err := n.local.Blobs.Bucket("cluster:"+bucket, bufferpool.BucketOptions{})
	if err != nil {
		return err
	}
	if err := b.Put(blob, data); err != nil {
		return err
	}
	_, err = n.cli.Put(ctx, n.cfg.blobKey(bucket, blob), n.cfg.Node, clientv3.WithLease(n.leaseID()))
	return err
}

// Get reads a blob from whichever node holds it.
func (n *Node) Get(ctx context.Context, bucket, blob string) ([]byte, error) {
	return GetBlob(ctx, n.cli, n.cfg.Cluster, bucket, blob)
}

// GetBlob looks blob up in the placement map and asks its holder.
func GetBlob(ctx context.Context, cli *clientv3.Client, cluster, bucket, blob string) ([]byte, error) {
	cfg := Config{Cluster: cluster}
	resp, err := cli.Get(ctx, cfg.blobKey(bucket, blob))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("blob %s/%s: %w", bucket, blob, bufferpool.ErrNotFound)
	}
	holder := string(resp.Kvs[0].Value)
	mr, err := cli.Get(ctx, cfg.prefix()+"members/"+holder)
	if err != nil || len(mr.Kvs) == 0 {
		return nil, fmt.Errorf("blob %s/%s: holder %s is gone (%v)", bucket, blob, holder, err)
	}
	var m Member
	if err := json.Unmarshal(mr.Kvs[0].Value, &m); err != nil {
		return nil, err
	}
	conn, err := dial(m.Addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return call(ctx, conn, "BlobGet", rawFrame(encodeBlob(blobHeader{Bucket: bucket, Blob: blob}, nil)))
}

// PutBlob asks the daemon at addr to place a blob (local first, spill).
func PutBlob(ctx context.Context, addr, bucket, blob string, data []byte) (node string, err error) {
	conn, err := dial(addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	out, err := call(ctx, conn, "BlobPut", rawFrame(encodeBlob(blobHeader{Bucket: bucket, Blob: blob, Place: true}, data)))
	return string(out), err
}

func (n *Node) serveBlobPut(ctx context.Context, b []byte) ([]byte, error) {
	h, data, err := decodeBlob(b)
	if err != nil {
		return nil, err
	}
	if n.local.Blobs == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node has no pool")
	}
	if h.Place {
		node, err := n.Put(ctx, h.Bucket, h.Blob, data)
		if err != nil {
			return nil, status.Errorf(codes.ResourceExhausted, "%v", err)
		}
		return []byte(node), nil
	}
	if err := n.putLocal(ctx, h.Bucket, h.Blob, data); err != nil {
		return nil, status.Errorf(codes.ResourceExhausted, "%v", err)
	}
	return []byte(n.cfg.Node), nil
}

func (n *Node) serveBlobGet(ctx context.Context, b []byte) ([]byte, error) {
	h, _, err := decodeBlob(b)
	if err != nil {
		return nil, err
	}
	if n.local.Blobs == nil {
		return nil, status.Error(codes.FailedPrecondition, "this node has no pool")
	}
	bk, err := n.local.Blobs.LookupBucket("cluster:" + h.Bucket)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	data, err := bk.Get(h.Blob)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	return data, nil
}
