package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/iowarp/iowarp/bufferpool/files"
)

var _ files.Remote = (*Node)(nil)

// ErrOwnerLost wraps EIO: the owner of a file cannot serve its pages (it
// died and its lease has not expired yet, or the network is cut).
var ErrOwnerLost = fmt.Errorf("owner unreachable: %w", unix.EIO)

// rpcTimeout bounds one call to another node; revokeTimeout a writing
// open that revokes another owner, which writes the file back first (as
// fast as the backing store takes it).
const (
	rpcTimeout    = 10 * time.Second
	revokeTimeout = 10 * time.Minute
)

// claimTries bounds the revoke-and-claim rounds of one writing open.
const claimTries = 5

// Open implements files.Remote.
func (n *Node) Open(p string, write bool) (*files.RemoteView, error) {
	n.mu.Lock()
	_, mine := n.owned[p]
	n.mu.Unlock()
	if mine {
		if write {
			n.dropHandle(p) // the name may be a new file now: kept again at its close
		}
		return nil, nil
	}
	if write {
		ctx, cancel := context.WithTimeout(n.ctx, revokeTimeout)
		defer cancel()
		return nil, n.claim(ctx, p)
	}
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	rec, ok, err := n.getOwner(ctx, p)
	if err != nil || !ok || rec.Node == n.cfg.Node || rec.Size < 0 {
		return nil, err
	}
	return &files.RemoteView{Owner: rec.Node, Size: rec.Size, Version: rec.rev}, nil
}

// getOwner reads p's owner key (linearizable).
func (n *Node) getOwner(ctx context.Context, p string) (ownerRecord, bool, error) {
	resp, err := n.cli.Get(ctx, n.cfg.ownerKey(p))
	if err != nil {
		return ownerRecord{}, false, fmt.Errorf("owner of %s: %w: %v", p, unix.EIO, err)
	}
	if len(resp.Kvs) == 0 {
		return ownerRecord{}, false, nil
	}
	var rec ownerRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return ownerRecord{}, false, fmt.Errorf("owner key of %s: %w", p, err)
	}
	rec.rev = resp.Kvs[0].ModRevision
	return rec, true, nil
}

// claim makes this node p's owner: the key is created on our lease if
// absent; a present owner is revoked first.
func (n *Node) claim(ctx context.Context, p string) error {
	key := n.cfg.ownerKey(p)
	val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node, Size: -1})
	for range claimTries {
		resp, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(n.leaseID()))).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("claim %s: %w: %v", p, unix.EIO, err)
		}
		if resp.Succeeded {
			n.mu.Lock()
			n.owned[p] = -1
			n.mu.Unlock()
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // gone meanwhile
		}
		var rec ownerRecord
		if err := json.Unmarshal(kvs[0].Value, &rec); err != nil {
			return fmt.Errorf("owner key of %s: %w", p, err)
		}
		if rec.Node == n.cfg.Node {
			// Ours from before a restart of the map (should not be):
			// take it over on this lease.
			if _, err := n.cli.Delete(ctx, key); err != nil {
				return fmt.Errorf("claim %s: %w: %v", p, unix.EIO, err)
			}
			continue
		}
		if err := n.revokeAt(ctx, rec.Node, p); err != nil {
			return err
		}
	}
	return fmt.Errorf("claim %s: other nodes kept taking it: %w", p, unix.EBUSY)
}

// revokeAt asks node owner to write p back and let it go.
func (n *Node) revokeAt(ctx context.Context, owner, p string) error {
	c, err := n.conn(ctx, owner)
	if err != nil {
		return fmt.Errorf("revoke %s from %s: %w (%v)", p, owner, ErrOwnerLost, err)
	}
	if _, err := call(ctx, c, "Revoke", revokeRequest{Path: p}); err != nil {
		n.dropConn(owner)
		return fmt.Errorf("revoke %s from %s: %w (%v)", p, owner, ErrOwnerLost, err)
	}
	return nil
}

func (n *Node) dropConn(name string) {
	n.mu.Lock()
	c := n.conns[name]
	delete(n.conns, name)
	n.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Stat implements files.Remote: a linearizable read of the owner key, so
// that a lookup after another node's close sees its size (the kernel
// caches the answer for the attribute timeout, which bounds the cost).
// When etcd does not answer within rpcTimeout (an election takes a few
// seconds) the stat fails with EIO: the backing store's size could be
// short of the owner's.
func (n *Node) Stat(p string) (int64, bool, error) {
	n.mu.Lock()
	_, mine := n.owned[p]
	n.mu.Unlock()
	if mine {
		return 0, false, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	rec, ok, err := n.getOwner(ctx, p)
	if err != nil || !ok || rec.Node == n.cfg.Node || rec.Size < 0 {
		return 0, false, err
	}
	return rec.Size, true, nil
}

// ReadPage implements files.Remote.
func (n *Node) ReadPage(v *files.RemoteView, p string, i int64, page []byte) (int, error) {
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	c, err := n.conn(ctx, v.Owner)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrOwnerLost, err)
	}
	out, err := callInto(ctx, c, "ReadPage", pageRequest{Path: p, Page: i, PageSize: int64(len(page))}, page)
	if err != nil {
		if status.Code(err) == codes.Unavailable {
			n.dropConn(v.Owner)
		}
		return 0, fmt.Errorf("%w: %v", ErrOwnerLost, err)
	}
	if len(out) > len(page) {
		return 0, fmt.Errorf("page %d of %s from %s: %d bytes for a page of %d: %w", i, p, v.Owner, len(out), len(page), unix.EIO)
	}
	if len(out) > 0 && &out[0] != &page[0] {
		copy(page, out)
	}
	return len(out), nil
}

// Closed implements files.Remote: publish the size for the next opens.
func (n *Node) Closed(p string, size int64) {
	n.mu.Lock()
	_, mine := n.owned[p]
	n.mu.Unlock()
	if !mine {
		return
	}
	val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node, Size: size})
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	key := n.cfg.ownerKey(p)
	// Only while it is still ours (a revocation may have taken it).
	resp, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", n.leaseID())).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(n.leaseID()))).Commit()
	if err != nil {
		logSlow("publish size of %s: %v", p, err)
	} else if resp.Succeeded {
		n.mu.Lock()
		if _, still := n.owned[p]; still {
			n.owned[p] = size // what a rejoin publishes again
		}
		n.mu.Unlock()
	}
	n.keepHandle(p)
}

// maxHandles bounds the read handles an owner keeps (keepHandle).
const maxHandles = 4096

// keepHandle takes a read handle on owned file p, if there is room. It is
// called from the file layer's Flush of a writing handle, which is still
// open: this open finds the file attached and waits for nothing.
func (n *Node) keepHandle(p string) {
	n.mu.Lock()
	_, have := n.handles[p]
	full := len(n.handles) >= maxHandles
	n.mu.Unlock()
	if have || full || n.local.FS == nil {
		return
	}
	h, _, err := n.local.FS.Open(p, unix.O_RDONLY, 0, files.Cred{})
	if err != nil {
		return
	}
	n.mu.Lock()
	if _, owned := n.owned[p]; !owned || n.handles[p] != nil {
		n.mu.Unlock()
		h.Release()
		return
	}
	n.handles[p] = h
	n.mu.Unlock()
}

// readHandle returns a read handle on owned file p and its release.
func (n *Node) readHandle(p string) (*files.Handle, func(), error) {
	n.mu.Lock()
	h := n.handles[p]
	n.mu.Unlock()
	if h != nil {
		return h, func() {}, nil
	}
	h, _, err := n.local.FS.Open(p, unix.O_RDONLY, 0, files.Cred{})
	if err != nil {
		return nil, nil, err
	}
	return h, func() { h.Release() }, nil
}

// dropHandle releases the kept handle of p.
func (n *Node) dropHandle(p string) {
	n.mu.Lock()
	h := n.handles[p]
	delete(n.handles, p)
	n.mu.Unlock()
	if h != nil {
		h.Release()
	}
}

// CloseFiles releases the handles kept on owned files; the daemon calls
// it before its file layer drains.
func (n *Node) CloseFiles() {
	n.mu.Lock()
	hs := n.handles
	n.handles = map[string]*files.Handle{}
	n.mu.Unlock()
	for _, h := range hs {
		h.Release()
	}
}

// serveReadPage reads a page of a file this node owns through its file
// layer (dirty, resident, or staged in from the backing store).
func (n *Node) serveReadPage(ctx context.Context, b []byte) ([]byte, error) {
	var r pageRequest
	if err := decodeRequest(b, &r); err != nil {
		return nil, err
	}
	if r.Page < 0 || r.PageSize <= 0 || r.PageSize > maxPage || r.Page > (1<<62)/r.PageSize {
		return nil, status.Errorf(codes.InvalidArgument, "page %d of %d bytes", r.Page, r.PageSize)
	}
	if err := n.ownedHere(r.Path); err != nil {
		return nil, err
	}
	h, release, err := n.readHandle(r.Path)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "open %s: %v", r.Path, err)
	}
	defer release()
	buf := make([]byte, r.PageSize)
	m, err := h.ReadAt(buf, r.Page*r.PageSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, status.Errorf(codes.Internal, "read %s page %d: %v", r.Path, r.Page, err)
	}
	return buf[:m], nil
}

// ownedHere refuses requests for files this node does not own: the
// service reads nothing else (it is no door around the kernel's checks).
func (n *Node) ownedHere(p string) error {
	if n.local.FS == nil {
		return status.Error(codes.FailedPrecondition, "this node has no mount")
	}
	n.mu.Lock()
	_, mine := n.owned[p]
	n.mu.Unlock()
	if !mine {
		return status.Errorf(codes.PermissionDenied, "%s is not owned by %s", p, n.cfg.Node)
	}
	return nil
}

// serveRevoke writes p back, fsyncs it, and gives up its ownership.
func (n *Node) serveRevoke(ctx context.Context, b []byte) ([]byte, error) {
	var r revokeRequest
	if err := decodeRequest(b, &r); err != nil {
		return nil, err
	}
	if err := n.ownedHere(r.Path); err != nil {
		if status.Code(err) == codes.PermissionDenied {
			return []byte("{}"), nil // not ours (any more): nothing to give up
		}
		return nil, err
	}
	h, release, err := n.readHandle(r.Path)
	if err == nil {
		err = h.Fsync(false)
		release()
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.Internal, "write back %s: %v", r.Path, err)
	}
	key := n.cfg.ownerKey(r.Path)
	if _, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", n.leaseID())).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return nil, status.Errorf(codes.Unavailable, "release %s: %v", r.Path, err)
	}
	n.mu.Lock()
	delete(n.owned, r.Path)
	n.mu.Unlock()
	n.dropHandle(r.Path)
	return []byte("{}"), nil
}

func (n *Node) servePing(ctx context.Context, b []byte) ([]byte, error) {
	n.mu.Lock()
	owned := len(n.owned)
	n.mu.Unlock()
	return json.Marshal(PingReply{Name: n.cfg.Node, OwnedFiles: owned})
}

// Renamed implements files.Remote: the owner keys of what this node owns
// at or under oldPath move to newPath (one transaction each, compared on
// our lease). A swap (RENAME_EXCHANGE) gives up both names instead: their
// readers read the backing store until the next writing open.
func (n *Node) Renamed(oldPath, newPath string, exchange bool) {
	if exchange {
		for _, p := range n.ownedUnder(oldPath) {
			n.Unlinked(p)
		}
		for _, p := range n.ownedUnder(newPath) {
			n.Unlinked(p)
		}
		return
	}
	n.Unlinked(newPath) // a file of ours that the rename replaced
	for _, p := range n.ownedUnder(oldPath) {
		n.move(p, newPath+p[len(oldPath):])
	}
}

// ownedUnder lists the owned paths at or below p.
func (n *Node) ownedUnder(p string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for q := range n.owned {
		if q == p || strings.HasPrefix(q, p+"/") {
			out = append(out, q)
		}
	}
	return out
}

// move moves the ownership of from to to.
func (n *Node) move(from, to string) {
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	rec, ok, err := n.getOwner(ctx, from)
	if err != nil || !ok {
		rec = ownerRecord{Node: n.cfg.Node, Size: -1}
	}
	val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node, Size: rec.Size})
	oldKey := n.cfg.ownerKey(from)
	_, err = n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(oldKey), "=", n.leaseID())).
		Then(clientv3.OpDelete(oldKey), clientv3.OpPut(n.cfg.ownerKey(to), string(val), clientv3.WithLease(n.leaseID()))).Commit()
	if err != nil {
		logSlow("move owner of %s to %s: %v", from, to, err)
	}
	n.mu.Lock()
	delete(n.owned, from)
	if err == nil {
		n.owned[to] = rec.Size
	}
	if h := n.handles[from]; h != nil {
		delete(n.handles, from)
		if err == nil {
			n.handles[to] = h
			h = nil
		}
		defer func() {
			if h != nil {
				h.Release()
			}
		}()
	}
	n.mu.Unlock()
}

// Unlinked implements files.Remote: the owner key of p goes.
func (n *Node) Unlinked(p string) {
	n.mu.Lock()
	_, mine := n.owned[p]
	delete(n.owned, p)
	n.mu.Unlock()
	if !mine {
		return
	}
	n.dropHandle(p)
	ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
	defer cancel()
	key := n.cfg.ownerKey(p)
	if _, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", n.leaseID())).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		logSlow("release owner of %s: %v", p, err)
	}
}
