package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
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
// In the pools the buckets are named "cluster:<bucket>". A node whose
// tiers are full moves its coldest blobs to other members (blobmove.go).
// Not done: replicas.

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
	// MoveRev > 0: a move (blobmove.go): put here only while the
	// placement key is still at this mod revision, and switch it here.
	MoveRev int64 `json:"move_rev,omitempty"`
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
	if h.MoveRev < 0 || h.MoveRev > 0 && h.Place {
		return h, nil, status.Errorf(codes.InvalidArgument, "blob frame with move_rev %d (place %v)", h.MoveRev, h.Place)
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
	key := n.cfg.blobKey(bucket, blob)
	unlock, err := n.blobLocks.lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.Put(blob, data); err != nil {
		return err
	}
	_, err = n.cli.Put(ctx, key, n.cfg.Node, clientv3.WithLease(n.leaseID()))
	return err
}

// Get reads a blob from whichever node holds it.
func (n *Node) Get(ctx context.Context, bucket, blob string) ([]byte, error) {
	return getBlob(ctx, n.cli, n.cfg, bucket, blob, n.conn)
}

// GetBlob looks blob up in the placement map and asks its holder.
func GetBlob(ctx context.Context, cli *clientv3.Client, cluster, bucket, blob string) ([]byte, error) {
	cfg := Config{Cluster: cluster}
	var conns []*grpc.ClientConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	return getBlob(ctx, cli, cfg, bucket, blob, func(ctx context.Context, name string) (*grpc.ClientConn, error) {
		m, err := lookupMember(ctx, cli, cfg, name)
		if err != nil {
			return nil, err
		}
		c, err := dial(m.Addr)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	})
}

// getBlob asks the holder the map names. A holder that answers NotFound
// may have moved the blob (blobmove.go: the map names the new holder
// before the old one deletes its copy), so the map is read once more
// and, if the key changed, the new holder asked.
func getBlob(ctx context.Context, cli *clientv3.Client, cfg Config, bucket, blob string,
	conn func(context.Context, string) (*grpc.ClientConn, error)) ([]byte, error) {
	var seen int64
	for {
		holder, rev, err := lookupBlob(ctx, cli, cfg, bucket, blob)
		if err != nil {
			return nil, err
		}
		if rev == seen {
			return nil, fmt.Errorf("blob %s/%s: its holder %s lacks it: %w", bucket, blob, holder, bufferpool.ErrNotFound)
		}
		c, err := conn(ctx, holder)
		if err != nil {
			return nil, fmt.Errorf("blob %s/%s: holder %s: %w", bucket, blob, holder, err)
		}
		data, err := call(ctx, c, "BlobGet", rawFrame(encodeBlob(blobHeader{Bucket: bucket, Blob: blob}, nil)))
		if status.Code(err) != codes.NotFound || seen != 0 {
			if err != nil {
				return nil, fmt.Errorf("blob %s/%s from %s: %w", bucket, blob, holder, err)
			}
			return data, nil
		}
		seen = rev
	}
}

// lookupBlob reads the placement key: the holder and the key's mod
// revision.
func lookupBlob(ctx context.Context, cli *clientv3.Client, cfg Config, bucket, blob string) (holder string, rev int64, err error) {
	resp, err := cli.Get(ctx, cfg.blobKey(bucket, blob))
	if err != nil {
		return "", 0, fmt.Errorf("blob %s/%s: placement map: %w", bucket, blob, err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, fmt.Errorf("blob %s/%s: %w", bucket, blob, bufferpool.ErrNotFound)
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, nil
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
	if h.MoveRev > 0 {
		return []byte(n.cfg.Node), n.acceptMove(ctx, h, data)
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
