package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Cluster is the `cluster:` block: the daemons of a job that meet in etcd
// (membership, per-file owners) and serve each other pages over gRPC
// (package cluster). Off while Name is "".
type Cluster struct {
	Name   string   // cluster (job) name: the etcd key prefix; "" = no cluster
	Node   string   // this daemon's member name ("" = Embed.Name, else host name:port)
	Listen string   // HOST:PORT of this daemon's gRPC service, reachable by the others
	Etcd   []string // client URLs of an existing etcd ("" = the embedded member's)
	Embed  EmbedEtcd
	// TTL is the lease of this daemon's member and owner keys: a daemon
	// that dies is gone from the cluster within it.
	TTL time.Duration
	// SharedNamespace: a file written on one node is readable on the
	// others before its write-back (pages fetched from the owner).
	SharedNamespace bool
	// Organizer moves cold CTE blobs off this node when its tiers are
	// full (cluster.Organizer).
	Organizer ClusterOrganizer
}

// ClusterOrganizer is `cluster.organizer`.
type ClusterOrganizer struct {
	Interval time.Duration // between passes; negative: off
	// A pass starts above HighWatermark of the tiers' capacity in use and
	// moves blobs until use is below LowWatermark.
	HighWatermark, LowWatermark float64
}

// EmbedEtcd runs an etcd member inside the daemon (Name != "").
type EmbedEtcd struct {
	Name   string   // this member's name, one of Peers
	Peers  []string // the initial cluster: "name=http://host:2380"
	Client string   // this member's client URL ("" = its peer host, port 2379)
	Dir    string   // data directory
}

// Enabled reports whether the daemon joins a cluster.
func (c Cluster) Enabled() bool { return c.Name != "" }

// Endpoints are the etcd client URLs the daemon and `iowarp cluster`
// talk to: Etcd, or the embedded member's client URL.
func (c Cluster) Endpoints() []string {
	if len(c.Etcd) > 0 {
		return c.Etcd
	}
	if c.Embed.Name != "" {
		return []string{c.Embed.ClientURL()}
	}
	return nil
}

// PeerURL is the embedded member's own peer URL (from Peers), "" if absent.
func (e EmbedEtcd) PeerURL() string {
	for _, p := range e.Peers {
		if n, u, ok := strings.Cut(p, "="); ok && n == e.Name {
			return u
		}
	}
	return ""
}

// ClientURL is Client, or the peer URL's host on port 2379.
func (e EmbedEtcd) ClientURL() string {
	if e.Client != "" {
		return e.Client
	}
	u, err := url.Parse(e.PeerURL())
	if err != nil || u.Hostname() == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(u.Hostname(), "2379")
}

func (d *decoder) cluster(n *yaml.Node, key string) error {
	c := &d.c.Cluster
	return d.mapping(n, key, map[string]field{
		"name":             d.str(&c.Name),
		"node":             d.str(&c.Node),
		"listen":           d.str(&c.Listen),
		"etcd":             d.strList(&c.Etcd),
		"embed":            d.embed,
		"ttl":              d.duration(&c.TTL, false),
		"shared_namespace": d.boolean(&c.SharedNamespace),
		"organizer":        d.clusterOrganizer,
	})
}

func (d *decoder) clusterOrganizer(n *yaml.Node, key string) error {
	o := &d.c.Cluster.Organizer
	return d.mapping(n, key, map[string]field{
		"interval":       d.duration(&o.Interval, true),
		"high_watermark": d.float(&o.HighWatermark, 0.01, 1),
		"low_watermark":  d.float(&o.LowWatermark, 0, 1),
	})
}

func (d *decoder) embed(n *yaml.Node, key string) error {
	e := &d.c.Cluster.Embed
	return d.mapping(n, key, map[string]field{
		"name":   d.str(&e.Name),
		"peers":  d.strList(&e.Peers),
		"client": d.str(&e.Client),
		"dir":    d.str(&e.Dir),
	})
}

// strList reads a list of strings.
func (d *decoder) strList(p *[]string) field {
	return func(n *yaml.Node, key string) error {
		*p = nil
		if n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return d.errorf(n, key, "expected a list, got %s", kindName(n))
		}
		for i, e := range n.Content {
			var s string
			ikey := key + "[" + strconv.Itoa(i) + "]"
			if err := d.str(&s)(e, ikey); err != nil {
				return err
			}
			d.c.lines[ikey] = e.Line
			*p = append(*p, s)
		}
		return nil
	}
}

// minClusterTTL is the shortest lease etcd grants (1.5 election timeouts
// of its default 1 s, rounded up).
const minClusterTTL = 2 * time.Second

// validateCluster checks the cluster block once it is on (name set).
func (c *Config) validateCluster() error {
	k := c.Cluster
	if !k.Enabled() {
		if k.SharedNamespace {
			return c.errorf("cluster.shared_namespace", "needs cluster.name (the cluster is off)")
		}
		return nil
	}
	if c.NoMount() {
		return c.errorf("cluster.name", "a daemon without a mount (mount: \"\") does not join a cluster yet")
	}
	if strings.ContainsAny(k.Name, "/ \t\n") {
		return c.errorf("cluster.name", "%q: no slashes or spaces (it is an etcd key prefix)", k.Name)
	}
	if strings.ContainsAny(k.Node, "/ \t\n") {
		return c.errorf("cluster.node", "%q: no slashes or spaces (it is an etcd key)", k.Node)
	}
	if _, _, err := net.SplitHostPort(k.Listen); err != nil || k.Listen == "" {
		return c.errorf("cluster.listen", "%q is not HOST:PORT (the address the other daemons reach this one's gRPC service at)", k.Listen)
	}
	if k.TTL < minClusterTTL {
		return c.errorf("cluster.ttl", "%v is shorter than %v, the shortest lease etcd grants", k.TTL, minClusterTTL)
	}
	if o := k.Organizer; o.LowWatermark >= o.HighWatermark {
		return c.errorf("cluster.organizer.low_watermark", "%g must be below high_watermark %g", o.LowWatermark, o.HighWatermark)
	}
	if len(k.Etcd) == 0 && k.Embed.Name == "" {
		return c.errorf("cluster.etcd", "a cluster needs etcd endpoints or an embedded member (cluster.embed.name)")
	}
	for i, e := range k.Etcd {
		if err := checkURL(e); err != nil {
			return c.errorf(fmt.Sprintf("cluster.etcd[%d]", i), "%q: %v", e, err)
		}
	}
	if k.Embed.Name != "" {
		return c.validateEmbed()
	}
	return nil
}

func (c *Config) validateEmbed() error {
	e := c.Cluster.Embed
	for i, p := range e.Peers {
		n, u, ok := strings.Cut(p, "=")
		if !ok || n == "" {
			return c.errorf(fmt.Sprintf("cluster.embed.peers[%d]", i), "%q is not NAME=URL (n1=http://10.0.0.1:2380)", p)
		}
		if err := checkURL(u); err != nil {
			return c.errorf(fmt.Sprintf("cluster.embed.peers[%d]", i), "%q: %v", p, err)
		}
	}
	if e.PeerURL() == "" {
		return c.errorf("cluster.embed.name", "%q is not one of cluster.embed.peers", e.Name)
	}
	if e.Client != "" {
		if err := checkURL(e.Client); err != nil {
			return c.errorf("cluster.embed.client", "%q: %v", e.Client, err)
		}
	}
	if e.Dir == "" || !filepath.IsAbs(e.Dir) {
		return c.errorf("cluster.embed.dir", "%q is not an absolute path (the embedded member's data directory)", e.Dir)
	}
	return nil
}

// checkURL accepts http(s)://HOST:PORT.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
		return fmt.Errorf("not an http://HOST:PORT URL")
	}
	return nil
}
