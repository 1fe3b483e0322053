package config

import (
	"strings"
	"testing"
	"time"
)

// siteYAML is a site config with its own cluster settings (a ttl) and
// comments, as the Slurm prolog finds it.
const siteYAML = `# site config
mount: /iowarp
backing: /lustre
tiers:
  - {name: ram, kind: ram, capacity: 64MiB}
  - {name: nvme, kind: file, dir: /local/nvme, capacity: 1GiB}
cluster:
  name: ""
  ttl: 4s   # the site's lease
  embed:
    name: old
    peers: [old=http://10.9.9.9:2380]
    dir: /var/etcd
`

// TestMerge: an overlay's cluster block merges key by key into the
// site's (its ttl and comments kept), its lists replace the site's, an
// overlay that clears embed.name drops the site's member, and the result
// is one config that Parse accepts with the overlay's values.
func TestMerge(t *testing.T) {
	overlay := `cluster:
  name: test-job7
  listen: 10.0.0.4:7070
  etcd: [http://10.0.0.1:7071, http://10.0.0.2:7071]
  shared_namespace: true
  embed: {name: "", peers: [], client: "", dir: ""}
tiers:
  - {name: ram, kind: ram, capacity: 32MiB}
`
	out, err := Merge(Source{"site.yaml", []byte(siteYAML)}, Source{"job.yaml", []byte(overlay)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("merged", out)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	k := c.Cluster
	if k.Name != "test-job7" || k.Listen != "10.0.0.4:7070" || k.TTL != 4*time.Second || !k.SharedNamespace ||
		k.Embed.Name != "" || len(k.Etcd) != 2 || k.Etcd[1] != "http://10.0.0.2:7071" {
		t.Errorf("merged cluster block %+v", k)
	}
	if c.Backing != "/lustre" || len(c.Tiers) != 1 || c.Tiers[0].Capacity != 32<<20 {
		t.Errorf("merged backing %q, tiers %+v: want the site's backing, the overlay's one tier", c.Backing, c.Tiers)
	}
	for _, want := range []string{"# site config", "# the site's lease"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the merge lost the comment %q:\n%s", want, out)
		}
	}
	if same, err := Merge(Source{"site.yaml", []byte(siteYAML)}, Source{"empty.yaml", nil}); err != nil || !strings.Contains(string(same), "name: old") {
		t.Errorf("an empty overlay: %v:\n%s", err, same)
	}
}

// TestMergeErrors: a bad key in an overlay is reported at the overlay's
// line; a result that is not a valid config is refused as a whole.
func TestMergeErrors(t *testing.T) {
	for _, tc := range []struct{ name, overlay, want string }{
		{"unknown key", "cluster:\n  name: j\n  lisen: h:1\n", "job.yaml:3: cluster.lisen: unknown key"},
		{"bad value", "cluster:\n  ttl: soon\n", "job.yaml:2: cluster.ttl:"},
		{"not a mapping", "- a\n", "job.yaml:1:"},
		{"invalid whole", "cluster:\n  name: j\n  listen: h:1\n  embed: {name: n2}\n", "site.yaml+job.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Merge(Source{"site.yaml", []byte(siteYAML)}, Source{"job.yaml", []byte(tc.overlay)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || out != nil {
				t.Errorf("got %q, %v; want no output and an error with %q", out, err, tc.want)
			}
		})
	}
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte(siteYAML), []byte("cluster:\n  name: j\n  listen: h:1\n  etcd: [http://h:2379]\n"))
	f.Add([]byte("mount: /m\nbacking: /b\n"), []byte("tiers: [\n"))
	f.Add([]byte(""), []byte("cluster: {name: j}\n"))
	f.Fuzz(func(t *testing.T, base, overlay []byte) {
		out, err := Merge(Source{"a", base}, Source{"b", overlay})
		if err != nil {
			if out != nil {
				t.Fatalf("Merge returned output with the error %v", err)
			}
			return
		}
		if _, err := Parse("out", out); err != nil {
			t.Fatalf("Merge output does not parse: %v:\n%s", err, out)
		}
	})
}
