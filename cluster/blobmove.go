package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iowarp/iowarp/bufferpool"
)

// The blob organizer: a node whose tiers are full moves its coldest
// cluster blobs to the members with the most room.
//
// A pass (OrganizeBlobs; every Organizer.Interval in the background)
// starts when the node's tiers together are more than High of their
// capacity in use, and moves blobs of the "cluster:" buckets of its pool,
// least recently used first (the pool's BlobInfo.LastUsed: the last
// Put or Get, a Get from another node included since the holder serves
// it from its pool), until use is below Low. Each move, under this
// node's lock of the placement key:
//
//  1. reads the key: it must name this node (a copy the map does not
//     name, left by a put of the same name elsewhere, is deleted here,
//     which frees its room too);
//  2. sends the bytes to the target (BlobPut with MoveRev, the key's mod
//     revision), which takes its own lock of the key, checks the
//     revision, puts the blob in its pool and switches the key to itself
//     in one etcd transaction compared on that revision (on its own
//     lease); a failed comparison deletes its copy and answers Aborted;
//  3. deletes the local copy once the target answered.
//
// A copy is deleted only when the map surely does not name it, so a
// failure anywhere leaves at worst an unnamed copy (deleted by a later
// pass), never a key naming a node without the blob. A Get racing a
// move reads the old holder (which still has it until step 3), or, if
// it read the key before the switch and asks after the delete, gets
// NotFound and reads the map once more (getBlob).
//
// Reading a blob to send it counts as a use, so a blob whose move failed
// is tried again only after colder ones.
//
// The target is the member with the most room below the High watermark
// (from the member records, less what this pass sent it); a blob no
// member has room for stays. Blobs larger than a gRPC frame (maxPage)
// are not moved.

// Organizer configures the blob organizer.
type Organizer struct {
	// Interval between background passes; <= 0: none (OrganizeBlobs
	// still runs one).
	Interval time.Duration
	// High and Low are fractions of the node's tier capacity: a pass
	// starts above High and moves blobs until use is below Low; a target
	// is filled up to High at most. High 0: DefaultHigh and DefaultLow.
	High, Low float64
}

// The watermarks of an Organizer without High.
const (
	DefaultHigh = 0.9
	DefaultLow  = 0.7
)

func (o Organizer) high() float64 { return cmp.Or(o.High, DefaultHigh) }

func (o Organizer) low() float64 {
	if o.High == 0 {
		return DefaultLow
	}
	return o.Low
}

// passTimeout bounds one background pass; maxMoves the blobs it moves.
const (
	passTimeout = time.Minute
	maxMoves    = 4096
)

// BlobMoves reports one organizer pass.
type BlobMoves struct {
	Moved      int   // blobs moved to other members
	MovedBytes int64 // their bytes
	Dropped    int   // copies the placement map did not name, deleted
	Failed     int   // moves that failed (the blob stays here)
	NoRoom     int   // blobs no member had room for
	// The node's tiers: capacity, use before and after the pass.
	Capacity, UsedBefore, UsedAfter int64
	Took                            time.Duration
}

// errMoveRaced: the placement key changed between the mover's read and
// the target's transaction (a put of the same name meanwhile).
var errMoveRaced = errors.New("placement key changed during the move")

// organize runs a pass every Interval until Close.
func (n *Node) organize() {
	n.every(n.cfg.Organizer.Interval, func() {
		ctx, cancel := context.WithTimeout(n.ctx, passTimeout)
		r, err := n.OrganizeBlobs(ctx)
		cancel()
		n.logPass(r, err)
	})
}

func (n *Node) logPass(r BlobMoves, err error) {
	if err != nil && n.ctx.Err() == nil {
		logrus.Warnf("cluster %s: blob organizer: %v", n.cfg.Cluster, err)
	}
	if r.Moved+r.Dropped+r.Failed > 0 { // not NoRoom alone: a full cluster would log it every pass
		logrus.Infof("cluster %s: blob organizer moved %d blobs (%d bytes) in %v, dropped %d unnamed copies, %d failed, %d found no room; use %d -> %d of %d",
			n.cfg.Cluster, r.Moved, r.MovedBytes, r.Took.Round(time.Millisecond), r.Dropped, r.Failed, r.NoRoom, r.UsedBefore, r.UsedAfter, r.Capacity)
	}
}

// poolUse is the node's tiers' use and capacity together.
func (n *Node) poolUse() (used, capacity int64) {
	st := n.local.Blobs.Stats
	if n.local.Pool != nil {
		st = n.local.Pool
	}
	for _, t := range st().Tiers {
		used += t.Used
		capacity += t.Capacity
	}
	return used, capacity
}

// coldBlob is a cluster blob of this node's pool.
type coldBlob struct {
	bucket string // the cluster's name, without "cluster:"
	bk     *bufferpool.Bucket
	info   bufferpool.BlobInfo
}

// coldBlobs lists the cluster blobs here, least recently used first.
func (n *Node) coldBlobs() []coldBlob {
	var out []coldBlob
	for _, name := range n.local.Blobs.Buckets() {
		bucket, ok := strings.CutPrefix(name, "cluster:")
		if !ok {
			continue
		}
		bk, err := n.local.Blobs.LookupBucket(name)
		if err != nil {
			continue // dropped meanwhile
		}
		for _, bi := range bk.List() {
			out = append(out, coldBlob{bucket: bucket, bk: bk, info: bi})
		}
	}
	slices.SortStableFunc(out, func(a, b coldBlob) int {
		return cmp.Or(a.info.LastUsed.Compare(b.info.LastUsed), cmp.Compare(a.info.Score, b.info.Score))
	})
	return out
}

// OrganizeBlobs runs one pass of the blob organizer (see above).
func (n *Node) OrganizeBlobs(ctx context.Context) (BlobMoves, error) {
	start := time.Now()
	var r BlobMoves
	if n.local.Blobs == nil {
		return r, nil
	}
	r.UsedBefore, r.Capacity = n.poolUse()
	r.UsedAfter = r.UsedBefore
	o := n.cfg.Organizer
	if r.Capacity == 0 || float64(r.UsedBefore) <= o.high()*float64(r.Capacity) {
		return r, nil
	}
	need := r.UsedBefore - int64(o.low()*float64(r.Capacity)) + 1 // to below Low
	cold := n.coldBlobs()
	if len(cold) == 0 {
		return r, nil // full of file pages: the pool's own organizer's business
	}
	rooms, err := n.rooms(ctx)
	if err != nil {
		return r, err
	}
	for _, c := range cold {
		if need <= 0 || ctx.Err() != nil || r.Moved+r.Failed >= maxMoves {
			break
		}
		need -= n.moveOne(ctx, c, rooms, &r)
	}
	r.UsedAfter, _ = n.poolUse()
	r.Took = time.Since(start)
	return r, ctx.Err()
}

// rooms is what each other member may take: up to High of its capacity.
func (n *Node) rooms(ctx context.Context) (map[string]int64, error) {
	ms, err := Members(ctx, n.cli, n.cfg.Cluster)
	if err != nil {
		return nil, err
	}
	rooms := map[string]int64{}
	for _, m := range ms {
		var used, capacity int64
		for _, t := range m.Tiers {
			used, capacity = used+t.Used, capacity+t.Capacity
		}
		if m.Name != n.cfg.Node {
			rooms[m.Name] = int64(n.cfg.Organizer.high()*float64(capacity)) - used
		}
	}
	return rooms, nil
}

// target is the member with the most room, if it has size bytes.
func target(rooms map[string]int64, size int64) string {
	best := ""
	for name, room := range rooms {
		if room >= size && (best == "" || room > rooms[best] || room == rooms[best] && name < best) {
			best = name
		}
	}
	return best
}

// moveOne moves c to the member with the most room (or drops it if the
// map does not name it) and returns the bytes freed here.
func (n *Node) moveOne(ctx context.Context, c coldBlob, rooms map[string]int64, r *BlobMoves) int64 {
	size := c.info.Size
	to := target(rooms, allocOf(size))
	if to == "" || size > maxPage {
		r.NoRoom++
		return 0
	}
	moved, err := n.moveBlob(ctx, c, to)
	switch {
	case err != nil:
		r.Failed++
		if status.Code(err) == codes.ResourceExhausted {
			rooms[to] = 0 // fuller than its record said
		}
		logrus.Warnf("cluster %s: move %s/%s to %s: %v", n.cfg.Cluster, c.bucket, c.info.Name, to, err)
		return 0
	case moved:
		r.Moved++
		r.MovedBytes += size
		rooms[to] -= allocOf(size)
	default:
		r.Dropped++
	}
	return allocOf(size)
}

// allocOf is what a blob of size bytes takes in a tier (4 KiB units).
func allocOf(size int64) int64 { return (size + 4095) &^ 4095 }

// moveBlob moves one blob to member to; moved is false when the map did
// not name this node and the local copy was dropped instead.
func (n *Node) moveBlob(ctx context.Context, c coldBlob, to string) (moved bool, err error) {
	key := n.cfg.blobKey(c.bucket, c.info.Name)
	unlock, err := n.blobLocks.lock(ctx, key)
	if err != nil {
		return false, err
	}
	defer unlock()
	resp, err := n.cli.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("placement map: %w", err)
	}
	if len(resp.Kvs) == 0 {
		// Not named at all: this node's lease was lost (the key went
		// with it). Left alone: nothing else holds the blob either.
		return false, fmt.Errorf("%s is not in the placement map", key)
	}
	if string(resp.Kvs[0].Value) != n.cfg.Node {
		return false, c.bk.Delete(c.info.Name)
	}
	data, err := c.bk.Get(c.info.Name)
	if err != nil {
		return false, err
	}
	conn, err := n.conn(ctx, to)
	if err != nil {
		return false, err
	}
	h := blobHeader{Bucket: c.bucket, Blob: c.info.Name, MoveRev: resp.Kvs[0].ModRevision}
	cctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	if _, err := call(cctx, conn, "BlobPut", rawFrame(encodeBlob(h, data))); err != nil {
		return false, err
	}
	return true, c.bk.Delete(c.info.Name)
}

// acceptMove is the target's side of a move: the blob lands here and the
// key names this node, or neither (Aborted), unless etcd's answer was
// lost, when the copy stays (unnamed at worst) and the error is
// Unavailable.
func (n *Node) acceptMove(ctx context.Context, h blobHeader, data []byte) error {
	key := n.cfg.blobKey(h.Bucket, h.Blob)
	unlock, err := n.blobLocks.lock(ctx, key)
	if err != nil {
		return status.FromContextError(err).Err()
	}
	defer unlock()
	resp, err := n.cli.Get(ctx, key)
	if err != nil {
		return status.Errorf(codes.Unavailable, "placement map: %v", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != h.MoveRev {
		return status.Errorf(codes.Aborted, "%s: %v", key, errMoveRaced)
	}
	b, err := n.local.Blobs.Bucket("cluster:"+h.Bucket, bufferpool.BucketOptions{})
	if err == nil {
		err = b.Put(h.Blob, data)
	}
	if err != nil {
		return status.Errorf(codes.ResourceExhausted, "%v", err)
	}
	tr, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", h.MoveRev)).
		Then(clientv3.OpPut(key, n.cfg.Node, clientv3.WithLease(n.leaseID()))).Commit()
	if err != nil {
		return status.Errorf(codes.Unavailable, "switch %s: %v", key, err)
	}
	if !tr.Succeeded {
		b.Delete(h.Blob)
		return status.Errorf(codes.Aborted, "%s: %v", key, errMoveRaced)
	}
	return nil
}

// keyLocks is a lock per key, taken by whoever changes a blob of this
// node's pool together with its placement key (putLocal, moveBlob,
// acceptMove). A mover holds its key while the target takes the same
// key on its node; only the node the map names moves a blob, so two
// nodes never wait on each other's key. The zero value is ready.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed at unlock
}

// lock takes key's lock, waiting for its holder or ctx.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		k.mu.Lock()
		if k.held == nil {
			k.held = map[string]chan struct{}{}
		}
		ch, busy := k.held[key]
		if !busy {
			ch = make(chan struct{})
			k.held[key] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s: %w", key, ctx.Err())
		}
	}
}
