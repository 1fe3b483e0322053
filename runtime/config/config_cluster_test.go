package config

import (
	"strings"
	"testing"
	"time"
)

func TestClusterKeys(t *testing.T) {
	const base = "mount: /m\nbacking: /b\ntiers:\n  - {name: ram, kind: ram, capacity: 64MiB}\n"
	ok := base + "cluster:\n  name: job1\n  listen: 10.0.0.1:7070\n  ttl: 3s\n  shared_namespace: true\n" +
		"  embed:\n    name: n1\n    peers: [n1=http://10.0.0.1:2380, n2=http://10.0.0.2:2380]\n    dir: /var/iowarp/etcd\n"
	c, err := Parse("c.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	k := c.Cluster
	if !k.Enabled() || !k.SharedNamespace || k.TTL != 3*time.Second || k.Embed.PeerURL() != "http://10.0.0.1:2380" {
		t.Errorf("cluster block read as %+v", k)
	}
	if e := k.Endpoints(); len(e) != 1 || e[0] != "http://10.0.0.1:2379" {
		t.Errorf("endpoints %v, want the embedded member's client URL", e)
	}
	d := Default()
	if d.Cluster.Enabled() || d.Cluster.TTL != 10*time.Second {
		t.Errorf("default cluster block %+v: want off, ttl 10s", d.Cluster)
	}
	if o := d.Cluster.Organizer; o.Interval != 5*time.Second || o.HighWatermark != 0.9 || o.LowWatermark != 0.7 {
		t.Errorf("default cluster.organizer %+v: want every 5s, 0.9 to 0.7", o)
	}
	c, err = Parse("c.yaml", []byte(ok+"  organizer:\n    interval: off\n    high_watermark: 0.5\n    low_watermark: 0\n"))
	if err == nil {
		err = c.Validate()
	}
	if o := c.Cluster.Organizer; err != nil || o.Interval >= 0 || o.HighWatermark != 0.5 || o.LowWatermark != 0 {
		t.Errorf("cluster.organizer off, 0.5 to 0: %+v, %v", o, err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"no listen", "cluster:\n  name: j\n  etcd: [http://h:2379]\n", "cluster.listen:"},
		{"no etcd", "cluster:\n  name: j\n  listen: h:1\n", "cluster.etcd:"},
		{"bad endpoint", "cluster:\n  name: j\n  listen: h:1\n  etcd: [h:2379]\n", "cluster.etcd[0]:"},
		{"short ttl", "cluster:\n  name: j\n  listen: h:1\n  ttl: 1s\n  etcd: [http://h:2379]\n", "cluster.ttl:"},
		{"slash in node", "cluster:\n  name: j\n  node: a/b\n  listen: h:1\n  etcd: [http://h:2379]\n", "cluster.node:"},
		{"slash in name", "cluster:\n  name: a/b\n  listen: h:1\n  etcd: [http://h:2379]\n", "cluster.name:"},
		{"member not a peer", "cluster:\n  name: j\n  listen: h:1\n  embed:\n    name: n3\n    peers: [n1=http://h:2380]\n    dir: /d\n", "cluster.embed.name:"},
		{"bad peer", "cluster:\n  name: j\n  listen: h:1\n  embed:\n    name: n1\n    peers: [http://h:2380]\n    dir: /d\n", "cluster.embed.peers[0]:"},
		{"relative dir", "cluster:\n  name: j\n  listen: h:1\n  embed:\n    name: n1\n    peers: [n1=http://h:2380]\n    dir: d\n", "cluster.embed.dir:"},
		{"shared without cluster", "cluster:\n  shared_namespace: true\n", "cluster.shared_namespace:"},
		{"unknown key", "cluster:\n  nmae: j\n", "cluster.nmae: unknown key"},
		{"crossed organizer watermarks", "cluster:\n  name: j\n  listen: h:1\n  etcd: [http://h:2379]\n  organizer: {high_watermark: 0.5, low_watermark: 0.6}\n", "cluster.organizer.low_watermark:"},
		{"organizer interval", "cluster:\n  organizer: {interval: soon}\n", "cluster.organizer.interval:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(base+tc.yaml))
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	c, err = Parse("c.yaml", []byte("mount: \"\"\ncluster:\n  name: j\n  listen: h:1\n  etcd: [http://h:2379]\n"))
	if err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "cluster.name:") {
		t.Errorf("a cluster without a mount: %v, want an error", err)
	}
}
