package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
)

// Config is one daemon's view of its cluster (runtime/config's cluster
// block, converted by cmd/iowarp).
type Config struct {
	Cluster   string   // the cluster's name: etcd keys are under /iowarp/<Cluster>/
	Node      string   // this daemon's name, unique in the cluster
	Listen    string   // HOST:PORT of the gRPC service
	Endpoints []string // etcd client URLs
	// Embed, if not nil, is an etcd member run inside this daemon.
	Embed *Embed
	TTL   time.Duration
	// SharedNamespace: serve files.Remote (see the package doc).
	SharedNamespace bool
	Mount           string // shown by Members
	// Organizer moves cold CTE blobs off this node when its tiers are
	// full (blobmove.go).
	Organizer Organizer
}

// Embed configures the embedded etcd member.
type Embed struct {
	Name   string
	Peers  []string // "name=http://host:2380", the initial cluster
	Client string   // this member's client URL
	Dir    string   // data directory
}

// Local is what the daemon lends the node.
type Local struct {
	FS   *files.FS               // serves pages to other nodes (nil: no mount)
	Pool func() bufferpool.Stats // the tiers' capacity and use, for Members
	// Blobs holds the cluster's CTE blobs put here (blobs.go); nil: none.
	Blobs *bufferpool.Pool
}

// TierInfo is one tier of a member as Members shows it.
type TierInfo struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Capacity int64  `json:"capacity"`
	Used     int64  `json:"used"`
	Dirty    int64  `json:"dirty_bytes"`
}

// Member is a member key's value.
type Member struct {
	Name            string     `json:"name"`
	Addr            string     `json:"addr"`
	Mount           string     `json:"mount"`
	PID             int        `json:"pid"`
	Started         time.Time  `json:"started"`
	Updated         time.Time  `json:"updated"`
	SharedNamespace bool       `json:"shared_namespace"`
	Tiers           []TierInfo `json:"tiers"`
	EtcdMember      string     `json:"etcd_member,omitempty"`
}

// Node is this daemon's membership of the cluster. Safe for concurrent
// use.
type Node struct {
	cfg    Config
	local  Local
	etcd   *embed.Etcd // nil: none embedded
	cli    *clientv3.Client
	lease  atomic.Int64 // clientv3.LeaseID of the member and owner keys; replaced by rejoin
	grpcS  *grpc.Server
	lis    net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time

	// mu guards the maps below; a leaf.
	mu    sync.Mutex
	owned map[string]int64 // paths this node owns → the size last published (-1: none yet)
	// handles holds a read handle on owned files (at most maxHandles),
	// taken at the owner's close: a page request then needs no open of
	// its own. (An open no longer waits for a write-back pass in
	// progress: files.revalidate returns before the backing lock for a
	// file with unwritten data.)
	handles map[string]*files.Handle
	conns   map[string]*grpc.ClientConn // to other members, by name

	// blobLocks serializes, per placement key, the changes this node
	// makes to a blob and its key (blobmove.go).
	blobLocks keyLocks
}

// ownerRecord is an owner key's value (and its revision).
type ownerRecord struct {
	Node string `json:"node"`
	Size int64  `json:"size"` // published at the owner's last close; -1: not closed yet
	rev  int64
}

func (c Config) prefix() string           { return "/iowarp/" + c.Cluster + "/" }
func (c Config) memberKey() string        { return c.prefix() + "members/" + c.Node }
func (c Config) ownerKey(p string) string { return c.prefix() + "owners/" + p }

// startTimeout bounds the wait for the embedded member to join its
// cluster (the other members start at about the same time).
const startTimeout = 90 * time.Second

// Start joins the cluster: it starts the embedded etcd member (if any),
// takes a lease, serves gRPC and registers the member.
func Start(cfg Config, local Local) (*Node, error) {
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("cluster: ttl %v is too short", cfg.TTL)
	}
	n := &Node{cfg: cfg, local: local, start: time.Now(), owned: map[string]int64{},
		handles: map[string]*files.Handle{}, conns: map[string]*grpc.ClientConn{}}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.open(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) open() error {
	if n.cfg.Embed != nil {
		e, err := startEmbedded(n.cfg.Embed)
		if err != nil {
			return err
		}
		n.etcd = e
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: n.cfg.Endpoints, DialTimeout: 5 * time.Second,
		Logger: quietLogger(), Context: n.ctx})
	if err != nil {
		return fmt.Errorf("cluster: etcd client %v: %w", n.cfg.Endpoints, err)
	}
	n.cli = cli
	if err := n.grant(); err != nil {
		return err
	}
	if err := n.serve(); err != nil {
		return err
	}
	if err := n.register(); err != nil {
		return err
	}
	n.wg.Add(1)
	go n.refresh()
	if n.cfg.Organizer.Interval > 0 && n.local.Blobs != nil {
		n.wg.Add(1)
		go n.organize()
	}
	logrus.Infof("cluster %s: node %s serves on %s (etcd %v, ttl %v)", n.cfg.Cluster, n.cfg.Node, n.cfg.Listen, n.cfg.Endpoints, n.cfg.TTL)
	return nil
}

// startEmbedded runs the etcd member and waits until it serves.
func startEmbedded(e *Embed) (*embed.Etcd, error) {
	c := embed.NewConfig()
	c.Name, c.Dir = e.Name, e.Dir
	c.InitialClusterToken = "iowarp"
	c.InitialCluster = "" // NewConfig names a member "default"
	c.Logger, c.LogLevel = "zap", embedLogLevel
	var peer string
	for _, p := range e.Peers {
		if c.InitialCluster != "" {
			c.InitialCluster += ","
		}
		c.InitialCluster += p
		if name, u, ok := cutPeer(p); ok && name == e.Name {
			peer = u
		}
	}
	pu, err := url.Parse(peer)
	if err != nil || peer == "" {
		return nil, fmt.Errorf("cluster: embedded member %s has no peer URL in %v", e.Name, e.Peers)
	}
	cu, err := url.Parse(e.Client)
	if err != nil || e.Client == "" {
		return nil, fmt.Errorf("cluster: embedded member %s: bad client URL %q", e.Name, e.Client)
	}
	c.ListenPeerUrls, c.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	c.ListenClientUrls, c.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	if err := os.MkdirAll(e.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: etcd data dir: %w", err)
	}
	if _, err := os.Stat(e.Dir + "/member"); err == nil {
		c.ClusterState = embed.ClusterStateFlagExisting
	}
	etcd, err := embed.StartEtcd(c)
	if err != nil {
		return nil, fmt.Errorf("cluster: start embedded etcd member %s: %w", e.Name, err)
	}
	select {
	case <-etcd.Server.ReadyNotify():
		return etcd, nil
	case err := <-etcd.Err():
		etcd.Close()
		return nil, fmt.Errorf("cluster: embedded etcd member %s: %w", e.Name, err)
	case <-time.After(startTimeout):
		etcd.Close()
		return nil, fmt.Errorf("cluster: embedded etcd member %s did not join %s within %v (are the other members up?)",
			e.Name, c.InitialCluster, startTimeout)
	}
}

func cutPeer(p string) (name, u string, ok bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == '=' {
			return p[:i], p[i+1:], true
		}
	}
	return "", "", false
}

// leaseID is the lease of the member and owner keys now.
func (n *Node) leaseID() clientv3.LeaseID { return clientv3.LeaseID(n.lease.Load()) }

// grant takes the lease of the member and owner keys and keeps it alive;
// when it is lost (etcd without a quorum for longer than the TTL), the
// node rejoins.
func (n *Node) grant() error {
	ch, err := n.newLease()
	if err != nil {
		return err
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for ch != nil {
			for range ch {
			}
			if n.ctx.Err() != nil {
				return
			}
			logrus.Errorf("cluster %s: node %s lost its etcd lease: the other nodes saw it gone and read its files from the backing store; rejoining",
				n.cfg.Cluster, n.cfg.Node)
			ch = n.rejoin()
		}
	}()
	return nil
}

func (n *Node) newLease() (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	l, err := n.cli.Grant(ctx, int64((n.cfg.TTL+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("cluster: lease from etcd %v: %w", n.cfg.Endpoints, err)
	}
	ch, err := n.cli.KeepAlive(n.ctx, l.ID)
	if err != nil {
		return nil, fmt.Errorf("cluster: keep lease alive: %w", err)
	}
	n.lease.Store(int64(l.ID))
	return ch, nil
}

// rejoin takes a new lease, registers again and claims again the files
// it owned that nobody took meanwhile, with the sizes it last published;
// it retries every second until
// it works or the node closes (nil).
func (n *Node) rejoin() <-chan *clientv3.LeaseKeepAliveResponse {
	for {
		ch, err := n.newLease()
		if err == nil {
			if err = n.register(); err == nil {
				n.reclaim()
				logrus.Infof("cluster %s: node %s rejoined", n.cfg.Cluster, n.cfg.Node)
				return ch
			}
		}
		logrus.Warnf("cluster %s: rejoin: %v", n.cfg.Cluster, err)
		select {
		case <-n.ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// reclaim claims again each owned file whose key is gone; a file
// another node claimed meanwhile is no longer ours.
func (n *Node) reclaim() {
	n.mu.Lock()
	sizes := maps.Clone(n.owned)
	n.mu.Unlock()
	for p, size := range sizes {
		val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node, Size: size})
		key := n.cfg.ownerKey(p)
		ctx, cancel := context.WithTimeout(n.ctx, rpcTimeout)
		resp, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(n.leaseID()))).Commit()
		cancel()
		if err == nil && resp.Succeeded {
			continue
		}
		logrus.Warnf("cluster %s: %s is no longer owned by %s (taken by another node while its lease was lost, or %v)", n.cfg.Cluster, p, n.cfg.Node, err)
		n.mu.Lock()
		delete(n.owned, p)
		n.mu.Unlock()
		n.dropHandle(p)
	}
}

// serve starts the gRPC service.
func (n *Node) serve() error {
	lis, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return fmt.Errorf("cluster: listen %s: %w", n.cfg.Listen, err)
	}
	n.lis = lis
	n.grpcS = grpc.NewServer(grpc.MaxRecvMsgSize(maxPage+4096), grpc.MaxSendMsgSize(maxPage+4096),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(4*window))
	n.grpcS.RegisterService(&serviceDesc, n)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.grpcS.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logrus.Errorf("cluster: gRPC on %s: %v", n.cfg.Listen, err)
		}
	}()
	return nil
}

// member is this node's member record now.
func (n *Node) member() Member {
	m := Member{Name: n.cfg.Node, Addr: n.cfg.Listen, Mount: n.cfg.Mount, PID: os.Getpid(),
		Started: n.start, Updated: time.Now(), SharedNamespace: n.cfg.SharedNamespace}
	if n.cfg.Embed != nil {
		m.EtcdMember = n.cfg.Embed.Name
	}
	if n.local.Pool != nil {
		for _, t := range n.local.Pool().Tiers {
			m.Tiers = append(m.Tiers, TierInfo{Name: t.Name, Kind: t.Kind, Capacity: t.Capacity, Used: t.Used, Dirty: t.Dirty})
		}
	}
	return m
}

// register puts the member key with the lease.
func (n *Node) register() error {
	b, err := json.Marshal(n.member())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	if _, err := n.cli.Put(ctx, n.cfg.memberKey(), string(b), clientv3.WithLease(n.leaseID())); err != nil {
		return fmt.Errorf("cluster: register %s: %w", n.cfg.memberKey(), err)
	}
	return nil
}

// refresh updates the member record every TTL/3.
func (n *Node) refresh() {
	n.every(n.cfg.TTL/3, func() {
		if err := n.register(); err != nil && n.ctx.Err() == nil {
			logrus.Warnf("%v", err)
		}
	})
}

// every calls fn every d until the node closes; it is a goroutine of
// n.wg.
func (n *Node) every(d time.Duration, fn func()) {
	defer n.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// Name is this node's name.
func (n *Node) Name() string { return n.cfg.Node }

// Client is the node's etcd client.
func (n *Node) Client() *clientv3.Client { return n.cli }

// Close leaves the cluster: the lease is revoked (the member key and the
// owner keys go at once, not after the TTL), gRPC stops, the embedded
// member stops. Call it after the file layer has written everything back.
func (n *Node) Close() error {
	if n.cli != nil && n.leaseID() != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		n.cli.Revoke(ctx, n.leaseID())
		cancel()
	}
	n.cancel()
	n.CloseFiles()
	if n.grpcS != nil {
		n.grpcS.Stop()
	}
	n.mu.Lock()
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = map[string]*grpc.ClientConn{}
	n.mu.Unlock()
	if n.cli != nil {
		n.cli.Close()
	}
	n.wg.Wait()
	if n.etcd != nil {
		n.etcd.Close()
	}
	return nil
}

// conn returns a client connection to member name (its address from
// its member key).
func (n *Node) conn(ctx context.Context, name string) (*grpc.ClientConn, error) {
	n.mu.Lock()
	c := n.conns[name]
	n.mu.Unlock()
	if c != nil {
		return c, nil
	}
	m, err := lookupMember(ctx, n.cli, n.cfg, name)
	if err != nil {
		return nil, err
	}
	c, err = dial(m.Addr)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if old := n.conns[name]; old != nil {
		c.Close()
		c = old
	} else {
		n.conns[name] = c
	}
	n.mu.Unlock()
	return c, nil
}

// lookupMember reads member name's key.
func lookupMember(ctx context.Context, cli *clientv3.Client, cfg Config, name string) (Member, error) {
	var m Member
	resp, err := cli.Get(ctx, cfg.prefix()+"members/"+name)
	if err != nil {
		return m, fmt.Errorf("member %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return m, fmt.Errorf("node %s is not a member (gone: its lease expired)", name)
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		return m, fmt.Errorf("member %s: %w", name, err)
	}
	return m, nil
}

// window is the HTTP/2 flow-control window of a stream: a few pages, so
// that a page is not sent in 64 KiB steps each waiting for a window
// update.
const window = 4 << 20

func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(4*window),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPage+4096), grpc.MaxCallSendMsgSize(maxPage+4096)))
}
