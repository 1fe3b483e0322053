package cluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
)

const testPage = 64 << 10

// freeAddr returns a 127.0.0.1 port nobody listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testNode is one daemon's worth: a pool, a file layer over the shared
// backing dir, and its cluster node.
type testNode struct {
	fs   *files.FS
	pool *bufferpool.Pool
	node *Node
}

// startNodes starts n nodes over backing; the first embeds a one-member
// etcd, the others use it.
func startNodes(t testing.TB, backing string, n int, bandwidth int64) []*testNode {
	return startNodesWith(t, backing, n, nodeOpts{bandwidth: bandwidth, page: testPage, ram: 64 * testPage})
}

type nodeOpts struct {
	bandwidth, page, ram int64
	remote               *bool // nil: shared namespace on
	// etcdMembers: the first this many nodes embed an etcd member each,
	// peers of one another (0: one).
	etcdMembers int
	organizer   Organizer
	ttl         time.Duration // 0: 2s
}

// startNodesWith starts n nodes; the embedded etcd members start
// together (each waits for a quorum of its peers), then the others.
func startNodesWith(t testing.TB, backing string, n int, o nodeOpts) []*testNode {
	t.Helper()
	members := min(n, max(1, o.etcdMembers))
	var peers, clients []string
	for i := range members {
		peers = append(peers, fmt.Sprintf("n%d=http://%s", i+1, freeAddr(t)))
		clients = append(clients, "http://"+freeAddr(t))
	}
	out := make([]*testNode, n)
	t.Cleanup(func() { closeAll(out) })
	errs := make([]error, n)
	start := func(i int) {
		cfg := Config{Cluster: "t", Node: fmt.Sprintf("n%d", i+1), Listen: freeAddr(t), Endpoints: clients,
			TTL: cmp.Or(o.ttl, 2*time.Second), SharedNamespace: true, Organizer: o.organizer}
		if i < members {
			cfg.Embed = &Embed{Name: cfg.Node, Peers: peers, Client: clients[i], Dir: filepath.Join(t.TempDir(), "etcd")}
		}
		out[i], errs[i] = startNode(backing, cfg, o)
	}
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { start(i) })
	}
	wg.Wait()
	for i := members; i < n; i++ {
		start(i)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	return out
}

// startNode starts one node: a pool, a file layer and the cluster node.
func startNode(backing string, cfg Config, o nodeOpts) (*testNode, error) {
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{{Name: "ram", Kind: bufferpool.KindRAM, Capacity: o.ram}}, OrganizerInterval: -1})
	if err != nil {
		return nil, err
	}
	fsys, err := files.New(pool, files.Options{Backing: backing, PageSize: o.page, BackingBandwidth: o.bandwidth, DrainTimeout: -1})
	if err != nil {
		pool.Close()
		return nil, err
	}
	node, err := Start(cfg, Local{FS: fsys, Pool: pool.Stats, Blobs: pool})
	if err != nil {
		fsys.Close()
		pool.Close()
		return nil, err
	}
	if o.remote == nil || *o.remote {
		fsys.SetRemote(node)
	}
	return &testNode{fs: fsys, pool: pool, node: node}, nil
}

// closeAll closes the daemons, last first, and then their etcd members,
// so that etcd keeps its quorum while the daemons leave.
func closeAll(ns []*testNode) {
	var members []*embed.Etcd
	for i := len(ns) - 1; i >= 0; i-- {
		if tn := ns[i]; tn != nil && tn.node != nil {
			if tn.node.etcd != nil {
				members = append(members, tn.node.etcd)
				tn.node.etcd = nil
			}
			tn.close()
		}
	}
	for _, e := range members {
		e.Close()
	}
}

func (tn *testNode) close() {
	if tn.node == nil {
		return
	}
	tn.fs.Close()
	tn.node.Close()
	tn.pool.Close()
	tn.node = nil
}

func TestMembership(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0)
	ctx := context.Background()
	ms, err := Members(ctx, ns[0].node.Client(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Name != "n1" || ms[1].Name != "n2" || len(ms[0].Tiers) != 1 || ms[0].Tiers[0].Capacity != 64*testPage {
		t.Fatalf("members %+v: want n1 and n2 with one 4 MiB tier each", ms)
	}
	st, err := GetStatus(ctx, ns[0].node.cfg.Endpoints, "t", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 2 || !st.Members[0].Healthy || !st.Members[1].Healthy || len(st.Etcd) != 1 || !st.Etcd[0].Healthy {
		t.Fatalf("status %+v: want two healthy members, one healthy etcd", st)
	}
	// n2's lease lost (etcd without a quorum for longer than the TTL
	// does this): it is gone, then rejoins on a new lease.
	old := ns[1].node.leaseID()
	if _, err := ns[0].node.Client().Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ms, err = Members(ctx, ns[0].node.Client(), "t")
		if err == nil && len(ms) == 2 && ns[1].node.leaseID() != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 did not rejoin after losing its lease: %+v, %v", ms, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ns[1].close() // a clean leave revokes the lease: gone at once
	ms, err = Members(ctx, ns[0].node.Client(), "t")
	if err != nil || len(ms) != 1 || ms[0].Name != "n1" {
		t.Fatalf("after n2 left: %+v, %v", ms, err)
	}
}

// write writes data to p on fsys and closes it.
func write(t testing.TB, fsys *files.FS, p string, data []byte) {
	t.Helper()
	h, _, err := fsys.Open(p, unix.O_CREAT|unix.O_RDWR|unix.O_TRUNC, 0o644, files.Cred{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	h.Release()
}

// read reads all of p on fsys.
func read(fsys *files.FS, p string) ([]byte, error) {
	h, st, err := fsys.Open(p, unix.O_RDONLY, 0, files.Cred{})
	if err != nil {
		return nil, err
	}
	defer h.Release()
	buf := make([]byte, st.Size)
	n, err := h.ReadAt(buf, 0)
	return buf[:n], err
}

// TestSharedNamespace: a file written on n1 and closed is read whole on
// n2 while the backing store still lacks it (write-back throttled to a
// trickle); a write on n2 revokes n1's ownership (n1 writes the file
// back first) and n1 then reads n2's version from n2.
func TestSharedNamespace(t *testing.T) {
	backing := t.TempDir()
	ns := startNodes(t, backing, 2, 128<<10) // 128 KiB/s: 10 pages take 5 s
	data := make([]byte, 10*testPage+123)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	write(t, ns[0].fs, "ckpt.0", data)
	if st, err := ns[1].fs.Lstat("ckpt.0"); err != nil || st.Size != int64(len(data)) {
		// The watch may lag the close by a moment.
		deadline := time.Now().Add(5 * time.Second)
		for (err != nil || st.Size != int64(len(data))) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			st, err = ns[1].fs.Lstat("ckpt.0")
		}
		if err != nil || st.Size != int64(len(data)) {
			t.Fatalf("n2 stat: size %d, %v; want %d (the owner's)", st.Size, err, len(data))
		}
	}
	got, err := read(ns[1].fs, "ckpt.0")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n2 read %d bytes (%v), want the %d n1 wrote", len(got), err, len(data))
	}
	onDisk, _ := os.ReadFile(filepath.Join(backing, "ckpt.0"))
	if bytes.Equal(onDisk, data) {
		t.Fatal("the backing file is complete already: the read did not need n1 (throttle too weak?)")
	}
	t.Logf("n2 read %d bytes from n1 while the backing file held %d", len(got), len(onDisk))
	if s := ns[1].fs.Stats(); s.ReadMisses == 0 {
		t.Errorf("n2 stats %+v: want misses served by n1", s)
	}
	// Read again: the pages are cached clean on n2 now.
	before := ns[1].fs.Stats().ReadHits
	if got, err := read(ns[1].fs, "ckpt.0"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n2 second read: %v", err)
	}
	if ns[1].fs.Stats().ReadHits == before {
		t.Error("n2's second read had no hits: the fetched pages were not cached")
	}

	// n2 writes: n1 must write the file back and let go first.
	start := time.Now()
	v2 := bytes.Repeat([]byte("n2"), testPage)
	errc := make(chan error, 1)
	go func() {
		h, _, err := ns[1].fs.Open("ckpt.0", unix.O_RDWR, 0, files.Cred{})
		if err == nil {
			_, err = h.WriteAt(v2, 0)
			h.Flush()
			h.Release()
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("n2's writing open did not return")
	}
	onDisk, _ = os.ReadFile(filepath.Join(backing, "ckpt.0"))
	if len(onDisk) < len(data) || !bytes.Equal(onDisk[len(v2):len(data)], data[len(v2):]) {
		t.Fatalf("after the revocation (%v) the backing file holds %d bytes, not n1's data", time.Since(start), len(onDisk))
	}
	want := append(append([]byte(nil), v2...), data[len(v2):]...)
	got, err = read(ns[0].fs, "ckpt.0")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("n1 read after n2's write: %d bytes, %v; want n2's version", len(got), err)
	}
}

// TestReadAgainDuringWriteBack: a file n1 owns is read on n2, then read
// again on n2 while n1's write-back has changed the backing file (part
// of it written): the second read is whole. The backing store is not the
// truth while n1 owns the file; n2 dropped its pages and took the
// backing file's partial size at the reopen, and cat on a real mount
// read a short file (TestClusterSharedNamespace's rank.5 in CI).
func TestReadAgainDuringWriteBack(t *testing.T) {
	backing := t.TempDir()
	ns := startNodes(t, backing, 2, 64<<10) // 64 KiB/s: a page a second
	data := make([]byte, 6*testPage+99)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	write(t, ns[0].fs, "ckpt", data)
	got, err := read(ns[1].fs, "ckpt")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n2's first read: %d bytes, %v; want the %d n1 wrote", len(got), err, len(data))
	}
	first, _ := os.Stat(filepath.Join(backing, "ckpt"))
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := os.Stat(filepath.Join(backing, "ckpt"))
		if err == nil && st.Size() != first.Size() && st.Size() < int64(len(data)) {
			t.Logf("backing file %d bytes at the first read, %d now", first.Size(), st.Size())
			break
		}
		if err == nil && st.Size() >= int64(len(data)) || time.Now().After(deadline) {
			t.Fatalf("the backing file went from %d to %v bytes (%v) without a partial state to read against", first.Size(), st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, err = read(ns[1].fs, "ckpt")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n2's read during n1's write-back: %d bytes, %v; want the %d n1 wrote", len(got), err, len(data))
	}
	if st, err := ns[1].fs.Lstat("ckpt"); err != nil || st.Size != int64(len(data)) {
		t.Fatalf("n2's stat during n1's write-back: size %d, %v; want %d", st.Size, err, len(data))
	}
}

// TestOwnerGone: reads of a file whose owner is gone without writing it
// back fail with EIO; once its lease is gone the backing file is read.
func TestOwnerGone(t *testing.T) {
	backing := t.TempDir()
	ns := startNodes(t, backing, 3, 32<<10) // 32 KiB/s: n2 takes 6 s to write back
	data := bytes.Repeat([]byte{7}, 3*testPage)
	write(t, ns[1].fs, "lost", data)
	// n2 stops serving but keeps its lease: a node that hangs or whose
	// network is cut.
	ns[1].node.grpcS.Stop()
	_, err := read(ns[2].fs, "lost")
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("read of a hung owner's file: %v, want EIO", err)
	}
	// Its lease goes (as after kill -9, within the TTL): the file reverts
	// to the backing store, which lacks what n2 never wrote back.
	ctx := context.Background()
	if _, err := ns[0].node.Client().Revoke(ctx, ns[1].node.leaseID()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := read(ns[2].fs, "lost")
		if err == nil {
			if bytes.Equal(got, data) {
				t.Fatal("read n2's unflushed data after it was gone")
			}
			t.Logf("after n2's lease: %d bytes from the backing store (n2 held %d unflushed)", len(got), len(data))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after the lease went: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBlobsSpill: a blob put on n1 stays there while n1 has room, the
// next one spills to n2 (the member with the most room); both are read
// from either node through the placement map.
func TestBlobsSpill(t *testing.T) {
	ns := startNodes(t, t.TempDir(), 2, 0) // 4 MiB of RAM each
	ctx := context.Background()
	a := bytes.Repeat([]byte("a"), 3<<20)
	b := bytes.Repeat([]byte("b"), 3<<20)
	if where, err := ns[0].node.Put(ctx, "ckpt", "a", a); err != nil || where != "n1" {
		t.Fatalf("put a: on %q, %v; want n1 (room there)", where, err)
	}
	if where, err := ns[0].node.Put(ctx, "ckpt", "b", b); err != nil || where != "n2" {
		t.Fatalf("put b: on %q, %v; want n2 (n1 is full)", where, err)
	}
	for _, tn := range ns {
		for name, want := range map[string][]byte{"a": a, "b": b} {
			got, err := tn.node.Get(ctx, "ckpt", name)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s get %s: %d bytes, %v", tn.node.Name(), name, len(got), err)
			}
		}
	}
	if _, err := ns[1].node.Get(ctx, "ckpt", "none"); !errors.Is(err, bufferpool.ErrNotFound) {
		t.Errorf("get of a blob never put: %v, want ErrNotFound", err)
	}
	if _, err := ns[1].node.Put(ctx, "ckpt", "c", make([]byte, 8<<20)); !errors.Is(err, ErrNoRoom) {
		t.Errorf("put of 8 MiB into two 4 MiB nodes: %v, want ErrNoRoom", err)
	}
}

// TestRenameUnlink: the write-to-a-temporary-then-rename pattern of
// checkpoints: the owner's rename moves its ownership, so another node
// reads the new name from it before the write-back; an unlink on the
// owner releases the file.
func TestRenameUnlink(t *testing.T) {
	backing := t.TempDir()
	ns := startNodes(t, backing, 2, 16<<10) // 16 KiB/s: 4 pages take 16 s
	data := bytes.Repeat([]byte("ckpt"), testPage)
	write(t, ns[0].fs, "step.tmp", data)
	if err := ns[0].fs.Rename("step.tmp", "step", 0); err != nil {
		t.Fatal(err)
	}
	got, err := read(ns[1].fs, "step")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n2 read of the renamed file: %d bytes, %v; want n1's %d", len(got), err, len(data))
	}
	if b, _ := os.ReadFile(filepath.Join(backing, "step")); bytes.Equal(b, data) {
		t.Fatal("written back already: the read did not show the rename was followed")
	}
	ctx := context.Background()
	if _, ok, _ := ns[1].node.getOwner(ctx, "step.tmp"); ok {
		t.Error("the old name is still owned after the rename")
	}
	if err := ns[0].fs.Unlink("step"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ns[1].node.getOwner(ctx, "step"); ok || err != nil {
		t.Errorf("owned after the owner's unlink (%v)", err)
	}
}
