package cluster

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdLeader is the index of the node whose embedded member leads, -1 if
// none of the running members says it does.
func etcdLeader(t testing.TB, ns []*testNode) int {
	t.Helper()
	for i, tn := range ns {
		if tn.node == nil || tn.node.etcd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := tn.node.Client().Status(ctx, tn.node.cfg.Embed.Client)
		cancel()
		if err == nil && st.Leader != 0 && st.Header.MemberId == st.Leader {
			return i
		}
	}
	return -1
}

// members lists the member names as tn's etcd client sees them.
func members(tn *testNode) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ms, err := Members(ctx, tn.node.Client(), "t")
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names, err
}

// crash stops tn's daemon as kill -9 would, as far as the others see:
// no more lease renewals (the lease is not revoked), no gRPC service.
// Its embedded member, if still there, keeps running.
func crash(tn *testNode) {
	tn.node.grpcS.Stop()
	tn.node.cancel()
}

// TestEtcdLeaderLost: three daemons, each embedding one etcd member. The
// member that leads stops hard (no leadership transfer), every daemon
// alive: the two members left elect a leader, no daemon loses its lease,
// and membership, the shared namespace (written on n1, read on n3) and
// the CTE blobs work on. Then the daemon whose member stopped dies too
// and leaves the members within the TTL. The TTL is 4 s: an etcd client
// gives a lease up when no keepalive was answered for the TTL, and with
// 2 s an election under the race detector (2.2 s) cost every daemon its
// lease (they rejoined).
func TestEtcdLeaderLost(t *testing.T) {
	begin := time.Now()
	ns := startNodesWith(t, t.TempDir(), 3, nodeOpts{page: testPage, ram: 64 * testPage, etcdMembers: 3, ttl: 4 * time.Second})
	ttl := ns[0].node.cfg.TTL
	lead := etcdLeader(t, ns)
	if lead < 0 {
		t.Fatal("no embedded member leads")
	}
	var leases []clientv3.LeaseID
	for _, tn := range ns {
		leases = append(leases, tn.node.leaseID())
	}
	e := ns[lead].node.etcd
	ns[lead].node.etcd = nil // stopped here, not by the cleanup
	lost := time.Now()
	e.Server.HardStop()
	e.Close()
	t.Logf("stopped etcd member %s (the leader) %v after the start", ns[lead].node.Name(), lost.Sub(begin).Round(time.Millisecond))
	other := ns[(lead+1)%3]
	for {
		if l := etcdLeader(t, ns); l >= 0 {
			t.Logf("%s leads %v after the loss", ns[l].node.Name(), time.Since(lost).Round(time.Millisecond))
			break
		}
		if time.Since(lost) > 10*time.Second {
			t.Fatal("the two members left elected no leader within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every member key stays through the election and a TTL after it,
	// on the lease it had: no daemon lost its lease.
	for time.Since(lost) < ttl+time.Second {
		if names, err := members(other); err != nil || len(names) != 3 {
			t.Fatalf("members %v after the loss of the leader member, %v: want all three", names, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, tn := range ns {
		if id := tn.node.leaseID(); id != leases[i] {
			t.Errorf("%s lost its lease %x during the election (rejoined on %x)", tn.node.Name(), leases[i], id)
		}
	}
	data := make([]byte, 3*testPage+5)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	write(t, ns[0].fs, "after-loss", data)
	if got, err := read(ns[2].fs, "after-loss"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("n3 read of n1's file: %d bytes, %v; want the %d n1 wrote", len(got), err, len(data))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ns[1].node.Put(ctx, "ckpt", "x", data); err != nil {
		t.Fatal(err)
	}
	for _, tn := range ns {
		if got, err := tn.node.Get(ctx, "ckpt", "x"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s get of the blob n2 put: %d bytes, %v", tn.node.Name(), len(got), err)
		}
	}
	st, err := GetStatus(ctx, ns[0].node.cfg.Endpoints, "t", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var up, leaders int
	for _, e := range st.Etcd {
		if e.Healthy {
			up++
		}
		if e.Leader {
			leaders++
		}
	}
	if up != 2 || leaders != 1 || len(st.Members) != 3 || !st.Members[0].Healthy || !st.Members[1].Healthy || !st.Members[2].Healthy {
		t.Fatalf("status %+v: want two etcd members up, one leading, three healthy daemons", st)
	}
	// The daemon whose member stopped (it used the other two meanwhile)
	// dies: gone from the members within the TTL.
	crash(ns[lead])
	died := time.Now()
	for {
		names, err := members(other)
		if err == nil && len(names) == 2 && !slices.Contains(names, ns[lead].node.Name()) {
			t.Logf("%s gone from the members %v after it died (ttl %v); the test took %v", ns[lead].node.Name(),
				time.Since(died).Round(time.Millisecond), ttl, time.Since(begin).Round(time.Millisecond))
			break
		}
		if time.Since(died) > ttl+3*time.Second {
			t.Fatalf("members %v, %v %v after %s died: want it gone within ttl %v", names, err, time.Since(died), ns[lead].node.Name(), ttl)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
