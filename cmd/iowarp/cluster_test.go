package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/cluster"
	"github.com/iowarp/iowarp/runtime/config"
)

func TestPrintClusterStatus(t *testing.T) {
	st := cluster.Status{Cluster: "job", Owners: 2,
		Members: []cluster.MemberStatus{
			{Member: cluster.Member{Name: "n1", Addr: "10.0.0.1:7070", Tiers: []cluster.TierInfo{{Name: "ram", Capacity: 1 << 30, Used: 1 << 20}}}, Healthy: true, OwnedFiles: 2},
			{Member: cluster.Member{Name: "n2", Addr: "10.0.0.2:7070"}, Error: "connection refused"},
		},
		Etcd: []cluster.EtcdStatus{{Endpoint: "http://10.0.0.1:2379", Healthy: true, Leader: true}, {Endpoint: "http://10.0.0.2:2379", Error: "context deadline exceeded"}},
	}
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	printClusterStatus(cmd, st)
	for _, want := range []string{"cluster job: 2 members, etcd 1 of 2 endpoints healthy, 2 owned files",
		"ram 1MiB/1GiB, 0B", "UNREACHABLE: connection refused", "http://10.0.0.1:2379: ok (leader)", "http://10.0.0.2:2379: DOWN"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestClusterNodeName: the member name is cluster.node, else the
// embedded member's name, else host name and gRPC port.
func TestClusterNodeName(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct{ node, embed, want string }{
		{"node07", "", "node07"},
		{"node01", "e1", "node01"},
		{"", "e1", "e1"},
		{"", "", host + ":7070"},
	} {
		cfg := config.Default()
		cfg.Cluster.Name, cfg.Cluster.Listen, cfg.Cluster.Node = "j", "10.0.0.1:7070", tc.node
		cfg.Cluster.Embed.Name = tc.embed
		if got := clusterConfig(cfg).Node; got != tc.want {
			t.Errorf("node %q, embed %q: member name %q, want %q", tc.node, tc.embed, got, tc.want)
		}
	}
}
