package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MemberStatus is one member as `iowarp cluster status` shows it.
type MemberStatus struct {
	Member
	Healthy    bool   `json:"healthy"`
	Error      string `json:"error,omitempty"`
	OwnedFiles int    `json:"owned_files"`
	PingMillis int64  `json:"ping_ms"`
}

// EtcdStatus is one etcd endpoint's health.
type EtcdStatus struct {
	Endpoint string `json:"endpoint"`
	Healthy  bool   `json:"healthy"`
	Leader   bool   `json:"leader"`
	Error    string `json:"error,omitempty"`
}

// Status is the cluster as its etcd and its members answer.
type Status struct {
	Cluster string         `json:"cluster"`
	Members []MemberStatus `json:"members"`
	Etcd    []EtcdStatus   `json:"etcd"`
	Owners  int            `json:"owned_files"`
}

// Members lists the member keys of cluster (live leases only).
func Members(ctx context.Context, cli *clientv3.Client, cluster string) ([]Member, error) {
	pfx := Config{Cluster: cluster}.prefix() + "members/"
	resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list members of %s: %w", cluster, err)
	}
	var ms []Member
	for _, kv := range resp.Kvs {
		var m Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			return nil, fmt.Errorf("member key %s: %w", kv.Key, err)
		}
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	return ms, nil
}

// GetStatus asks etcd at endpoints for the members of cluster, pings
// each member's gRPC service and each etcd endpoint (timeout each).
func GetStatus(ctx context.Context, endpoints []string, cluster string, timeout time.Duration) (Status, error) {
	st := Status{Cluster: cluster}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: timeout, Logger: quietLogger()})
	if err != nil {
		return st, fmt.Errorf("etcd %v: %w", endpoints, err)
	}
	defer cli.Close()
	for _, ep := range endpoints {
		st.Etcd = append(st.Etcd, etcdHealth(ctx, cli, ep, timeout))
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ms, err := Members(c, cli, cluster)
	if err != nil {
		return st, err
	}
	resp, err := cli.Get(c, Config{Cluster: cluster}.prefix()+"owners/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil {
		st.Owners = int(resp.Count)
	}
	for _, m := range ms {
		st.Members = append(st.Members, ping(ctx, m, timeout))
	}
	return st, nil
}

func etcdHealth(ctx context.Context, cli *clientv3.Client, ep string, timeout time.Duration) EtcdStatus {
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := cli.Status(c, ep)
	if err != nil {
		return EtcdStatus{Endpoint: ep, Error: err.Error()}
	}
	return EtcdStatus{Endpoint: ep, Healthy: len(s.Errors) == 0, Leader: s.Leader == s.Header.MemberId,
		Error: strings.Join(s.Errors, "; ")}
}

// ping asks a member's gRPC service.
func ping(ctx context.Context, m Member, timeout time.Duration) MemberStatus {
	ms := MemberStatus{Member: m}
	conn, err := dial(m.Addr)
	if err != nil {
		ms.Error = err.Error()
		return ms
	}
	defer conn.Close()
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	out, err := call(c, conn, "Ping", struct{}{})
	if err != nil {
		ms.Error = err.Error()
		return ms
	}
	ms.PingMillis = time.Since(start).Milliseconds()
	var r PingReply
	if err := json.Unmarshal(out, &r); err != nil || r.Name != m.Name {
		ms.Error = fmt.Sprintf("answered as %q (%v)", r.Name, err)
		return ms
	}
	ms.Healthy, ms.OwnedFiles = true, r.OwnedFiles
	return ms
}
