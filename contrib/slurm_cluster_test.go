package contrib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime/config"
)

// fakeNodes is a fake 4-node allocation: its SLURM_JOB_NODELIST, the
// names it expands to and a hosts(5) file with their addresses.
const fakeNodeList = "node[01-03,07]"

var fakeNodes = []string{"node01", "node02", "node03", "node07"}

func fakeHosts(t *testing.T, dir string, addr func(i int) string) string {
	t.Helper()
	var b strings.Builder
	for i, n := range fakeNodes {
		fmt.Fprintf(&b, "%s %s # node %d\n", addr(i), n, i+1)
	}
	p := filepath.Join(dir, "hosts")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// clusterScript runs the installed iowarp-slurm-cluster with env.
func clusterScript(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(inTree(t, prefix+"/libexec/iowarp/iowarp-slurm-cluster"), args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%v: %s", err, errb.String())
	}
	return out.String(), err
}

// TestSlurmNodeList: the allocation's node list is expanded by scontrol
// when it is on PATH (a fake one here, which records its call and
// answers in its own order), else by the script's own expander, which
// knows ranges, lists, zero padding and several range lists in a name,
// and refuses what it cannot read.
func TestSlurmNodeList(t *testing.T) {
	base := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_ID=7"}
	if _, err := exec.LookPath("scontrol"); err == nil {
		t.Log("scontrol is installed here: the expander cases run through it")
	}
	for _, tc := range []struct{ list, want string }{
		{fakeNodeList, "node01 node02 node03 node07"},
		{"a,b[1-2]-n[08-10],c9", "a b1-n08 b1-n09 b1-n10 b2-n08 b2-n09 b2-n10 c9"},
		{"gpu[7]", "gpu7"},
		{"x[1-3", ""},
		{"y[a-b]", ""},
		{"z[]", ""},
	} {
		out, err := clusterScript(t, append(base, "SLURM_JOB_NODELIST="+tc.list), "hosts")
		got := strings.Join(strings.Fields(out), " ")
		if tc.want == "" && err == nil || tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("hosts of %q: %q, %v; want %q (empty: an error)", tc.list, got, err, tc.want)
		}
	}

	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	fake := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\n[ \"$1 $2\" = \"show hostnames\" ] || exit 2\nprintf 'node07\\nnode01\\nnode03\\nnode02\\n'\n", calls)
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := clusterScript(t, []string{"PATH=" + bin + ":/usr/bin:/bin", "SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=" + fakeNodeList}, "hosts")
	if got := strings.Fields(out); err != nil || !slices.Equal(got, []string{"node07", "node01", "node03", "node02"}) {
		t.Errorf("hosts through scontrol: %v, %v", got, err)
	}
	if b, _ := os.ReadFile(calls); string(b) != "show hostnames "+fakeNodeList+"\n" {
		t.Errorf("scontrol called with %q", b)
	}
}

// TestSlurmClusterConfig: for each node of a fake 4-node allocation
// (SLURMD_NODENAME, as slurmd sets it) the cluster block the prolog
// lays over the site config: the first three nodes embed an etcd member
// with the three as peers, the fourth does not (and drops the site's
// member), all list the same three endpoints and the cluster name of
// the job, each listens on its own address; `iowarp config merge` and
// `iowarp config check` accept each result. A 2-node job gets one
// member, a site etcd none, ports move with the job's slot.
func TestSlurmClusterConfig(t *testing.T) {
	dir := t.TempDir()
	hosts := fakeHosts(t, dir, func(i int) string { return fmt.Sprintf("10.9.0.%d", i+1) })
	site := testConfig(t, dir, "/iowarp", "/lustre", "cluster:\n  ttl: 4s\n  embed:\n    name: old\n    peers: [old=http://10.1.1.1:2380]\n    dir: /var/etcd\n")
	bin := iowarpBin(t)
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_JOB_ID=4711", "SLURM_CLUSTER_NAME=test",
		"SLURM_JOB_NODELIST=" + fakeNodeList, "IOWARP_CLUSTER_HOSTS=" + hosts, "IOWARP_JOB_STATE=/var/lib/iowarp/jobs"}
	nodeConfig := func(t *testing.T, env []string, node string) *config.Config {
		t.Helper()
		block, err := clusterScript(t, append(env, "SLURMD_NODENAME="+node), "config")
		if err != nil {
			t.Fatalf("config of %s: %v", node, err)
		}
		p := filepath.Join(dir, node+".yaml")
		os.WriteFile(p, []byte(block), 0o644)
		merged, err := exec.Command(bin, "config", "merge", site, p).Output()
		if err != nil {
			t.Fatalf("config merge for %s: %v\n%s", node, err, block)
		}
		job := filepath.Join(dir, node+"-job.yaml")
		os.WriteFile(job, merged, 0o644)
		if out, err := exec.Command(bin, "config", "check", job).CombinedOutput(); err != nil {
			t.Fatalf("config check of %s's config: %v: %s\n%s", node, err, out, merged)
		}
		c, err := config.Load(job)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	wantEtcd := []string{"http://10.9.0.1:7071", "http://10.9.0.2:7071", "http://10.9.0.3:7071"}
	wantPeers := []string{"node01=http://10.9.0.1:7072", "node02=http://10.9.0.2:7072", "node03=http://10.9.0.3:7072"}
	for i, node := range fakeNodes {
		k := nodeConfig(t, env, node).Cluster
		if k.Name != "test-job4711" || k.Node != node || !k.SharedNamespace || k.TTL != 4*time.Second || !slices.Equal(k.Etcd, wantEtcd) ||
			k.Listen != fmt.Sprintf("10.9.0.%d:7070", i+1) {
			t.Errorf("%s: cluster %+v", node, k)
		}
		if i < 3 {
			e := k.Embed
			if e.Name != node || !slices.Equal(e.Peers, wantPeers) || e.ClientURL() != wantEtcd[i] || e.Dir != "/var/lib/iowarp/jobs/4711/etcd" {
				t.Errorf("%s: embedded member %+v, want %s of %v", node, e, node, wantPeers)
			}
		} else if k.Embed.Name != "" || len(k.Embed.Peers) != 0 {
			t.Errorf("%s, the fourth node, embeds %+v", node, k.Embed)
		}
	}

	two := append(slices.Clone(env), "SLURM_JOB_NODELIST=node[01-02]", "IOWARP_CLUSTER_SLOTS=100", "SLURM_JOB_ID=4712")
	if k := nodeConfig(t, two, "node02").Cluster; k.Embed.Name != "" || !slices.Equal(k.Etcd, []string{"http://10.9.0.1:7107"}) ||
		k.Listen != "10.9.0.2:7106" {
		t.Errorf("node02 of a 2-node job in slot 12: %+v, want no member, node01's etcd on port 7107, gRPC on 7106", k)
	}
	siteEtcd := append(slices.Clone(env), "IOWARP_CLUSTER_ETCD=http://etcd1:2379,http://etcd2:2379")
	if k := nodeConfig(t, siteEtcd, "node01").Cluster; k.Embed.Name != "" || !slices.Equal(k.Etcd, []string{"http://etcd1:2379", "http://etcd2:2379"}) {
		t.Errorf("node01 with a site etcd: %+v", k)
	}
	if _, err := clusterScript(t, append(env, "SLURMD_NODENAME=node04"), "config"); err == nil || !strings.Contains(err.Error(), "not in the job's node list") {
		t.Errorf("a node outside the allocation: %v", err)
	}
}

// freePorts returns a base port with three free ports after it on each
// of addrs.
func freePorts(t *testing.T, addrs ...string) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := 20000 + 3*rand.IntN(10000)
		ok := true
		for _, a := range addrs {
			for p := base; p < base+3 && ok; p++ {
				l, err := net.Listen("tcp", net.JoinHostPort(a, fmt.Sprint(p)))
				if err != nil {
					ok = false
					break
				}
				l.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no three free ports")
	return 0
}

// slurmNode is one node of a fake allocation on this machine: its name
// (SLURMD_NODENAME), its own loopback address and its own node-local
// IOWARP_JOB_ROOT and IOWARP_JOB_STATE.
type slurmNode struct {
	name, mnt, state string
	env              []string
}

// TestSlurmClusterJob runs the installed prolog and epilog of a job in
// cluster mode on a fake 4-node allocation made on this machine: each
// "node" is a prolog run with its own SLURMD_NODENAME, node-local
// directories and loopback address (127.0.0.1-4; node addresses from
// IOWARP_CLUSTER_HOSTS), the four prologs at once as slurmd runs them.
// The job asks for the cluster with .iowarp-cluster in its working
// directory (IOWARP_CLUSTER=job). Then: `iowarp cluster status` lists
// the four members and three healthy etcd endpoints; a file written and
// closed on node 4 (no etcd member) is read on node 1 while it is not
// written back yet (a 64 KiB/s backing store); the four epilogs at once
// drain, leave (the etcd nodes after the others) and remove the jobs'
// state, and the file is on the backing store.
func TestSlurmClusterJob(t *testing.T) {
	u := newTestUser(t)
	u.grantFuse(t)
	id := fmt.Sprint(7000 + os.Getpid()%1000)
	j := newSlurmJob(t, u, id, "backing_bandwidth: 256KiB\ncluster:\n  ttl: 4s\n")
	addr := func(i int) string { return fmt.Sprintf("127.0.0.%d", i+1) }
	hosts := fakeHosts(t, j.dir, addr)
	port := freePorts(t, addr(0), addr(1), addr(2), addr(3))
	os.WriteFile(filepath.Join(j.work, ".iowarp-cluster"), nil, 0o644)
	var nodes []slurmNode
	for i, name := range fakeNodes {
		root, state := filepath.Join(j.dir, name, "iowarp"), filepath.Join(j.dir, name, "state")
		n := slurmNode{name: name, mnt: filepath.Join(root, id), state: filepath.Join(state, id),
			env: []string{"SLURMD_NODENAME=" + name, "SLURM_JOB_NODELIST=" + fakeNodeList, "IOWARP_JOB_ROOT=" + root,
				"IOWARP_JOB_STATE=" + state, "IOWARP_CLUSTER=job", "IOWARP_CLUSTER_HOSTS=" + hosts,
				fmt.Sprintf("IOWARP_CLUSTER_PORT=%d", port),
				"IOWARP_SLURM_CLUSTER=" + inTree(t, prefix+"/libexec/iowarp/iowarp-slurm-cluster")}}
		if i == 3 {
			n.env = append(n.env, "IOWARP_CLUSTER_WAIT=120")
		}
		os.MkdirAll(filepath.Join(j.dir, name), 0o755)
		t.Cleanup(func() { detach(n.mnt) })
		nodes = append(nodes, n)
	}
	start := time.Now()
	codes, outs := j.onNodes(nodes, j.prolog)
	t.Logf("4 prologs in %v", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		t.Logf("prolog on %s:\n%s", n.name, outs[i])
		if codes[i] != 0 {
			t.Fatalf("prolog on %s: exit %d:\n%s", n.name, codes[i], outs[i])
		}
		role := "role member"
		if i < 3 {
			role = "role etcd"
		}
		if !strings.Contains(outs[i], fmt.Sprintf("node %s (%d of 4), %s", n.name, i+1, role)) {
			t.Errorf("prolog on %s does not report its place in the cluster:\n%s", n.name, outs[i])
		}
	}

	cfg := filepath.Join(nodes[0].state, "iowarp.yaml")
	st := j.clusterStatus(t, cfg)
	if len(st.Members) != 4 || len(st.Etcd) != 3 {
		t.Fatalf("cluster status: %d members, %d etcd endpoints, want 4 and 3: %+v", len(st.Members), len(st.Etcd), st)
	}
	var names []string
	for _, m := range st.Members {
		names = append(names, m.Name)
		if !m.Healthy {
			t.Errorf("member %s unhealthy: %s", m.Name, m.Error)
		}
	}
	if !slices.Equal(names, fakeNodes) {
		t.Errorf("members %v, want the node names %v", names, fakeNodes)
	}
	for _, e := range st.Etcd {
		if !e.Healthy {
			t.Errorf("etcd %s unhealthy: %s", e.Endpoint, e.Error)
		}
	}

	data := bytes.Repeat([]byte("rank 3 checkpoint\n"), 1<<16) // 1.1 MiB: seconds to write back
	src := filepath.Join(j.dir, "src.dat")
	os.WriteFile(src, data, 0o644)
	j.asUser(t, fmt.Sprintf("cp %s %s/ckpt.dat", src, nodes[3].mnt))
	if b, err := os.ReadFile(filepath.Join(j.work, "ckpt.dat")); err == nil && len(b) == len(data) {
		t.Logf("ckpt.dat already written back before the read on node01 (a slow machine): the read is not a cluster read")
	}
	if got := j.asUser(t, "sha256sum < "+nodes[0].mnt+"/ckpt.dat"); got != sha256sumOf(t, src) {
		t.Errorf("ckpt.dat read on node01: %s", got)
	}

	start = time.Now()
	codes, outs = j.onNodes(nodes, j.epilog, "SLURM_SCRIPT_CONTEXT=epilog_slurmd", "IOWARP_DRAIN_WAIT=120")
	t.Logf("4 epilogs in %v", time.Since(start).Round(time.Millisecond))
	for i, n := range nodes {
		t.Logf("epilog on %s:\n%s", n.name, outs[i])
		if codes[i] != 0 || !strings.Contains(outs[i], "drained in") {
			t.Errorf("epilog on %s: exit %d:\n%s", n.name, codes[i], outs[i])
		}
		if strings.Contains(outs[i], "still up after") {
			t.Errorf("epilog on %s: the members without etcd did not leave first:\n%s", n.name, outs[i])
		}
		if mountEntry(t, n.mnt) != "" {
			t.Errorf("%s still mounted after the epilog", n.mnt)
		}
		if _, err := os.Stat(n.state); err == nil {
			t.Errorf("%s left after the epilog", n.state)
		}
	}
	if b, err := os.ReadFile(filepath.Join(j.work, "ckpt.dat")); err != nil || !bytes.Equal(b, data) {
		t.Errorf("ckpt.dat on the backing store after the epilogs: %d bytes, %v", len(b), err)
	}
}

// onNodes runs script on every node at once, as slurmd does on each
// node of an allocation; it returns the exit codes and outputs.
func (j *slurmJob) onNodes(nodes []slurmNode, script string, env ...string) ([]int, []string) {
	codes, outs := make([]int, len(nodes)), make([]string, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(script)
			cmd.Env = append(append(append([]string(nil), j.env...), n.env...), env...)
			cmd.Dir = "/"
			out, err := cmd.CombinedOutput()
			outs[i] = string(out)
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i], outs[i] = -1, err.Error()
			}
		}()
	}
	wg.Wait()
	return codes, outs
}

// clusterStatus is `iowarp cluster status --json` with the job's config,
// asked as the user (a job step).
func (j *slurmJob) clusterStatus(t *testing.T, cfg string) (st struct {
	Members []struct {
		Name       string `json:"name"`
		Healthy    bool   `json:"healthy"`
		Error      string `json:"error"`
		EtcdMember string `json:"etcd_member"`
	} `json:"members"`
	Etcd []struct {
		Endpoint string `json:"endpoint"`
		Healthy  bool   `json:"healthy"`
		Error    string `json:"error"`
	} `json:"etcd"`
}) {
	t.Helper()
	out := j.asUser(t, fmt.Sprintf("%s cluster status --json --config %s", j.bin, cfg))
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status --json: %v: %s", err, out)
	}
	return st
}

func sha256sumOf(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", "sha256sum < "+p).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestSlurmClusterPrologErrors: a bad IOWARP_CLUSTER, and a cluster job
// on a node that is not in its node list, fail the prolog (exit 1,
// saying why) before a daemon starts; the mount point is not left.
func TestSlurmClusterPrologErrors(t *testing.T) {
	u := newTestUser(t)
	j := newSlurmJob(t, u, fmt.Sprint(8000+os.Getpid()%1000), "")
	cl := "IOWARP_SLURM_CLUSTER=" + inTree(t, prefix+"/libexec/iowarp/iowarp-slurm-cluster")
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"bad switch", []string{"IOWARP_CLUSTER=yes"}, "IOWARP_CLUSTER='yes' is not 0, 1 or job"},
		{"node not in the list", []string{"IOWARP_CLUSTER=1", cl, "SLURM_JOB_NODELIST=node[01-03,07]", "SLURMD_NODENAME=node05"},
			"this node (node05) is not in the job's node list"},
		{"bad node list", []string{"IOWARP_CLUSTER=1", cl, "SLURM_JOB_NODELIST=node[01-", "SLURMD_NODENAME=node01"},
			"node[01-"}, // the expander's error, or scontrol's where it is installed
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := j.script(t, j.prolog, tc.env...)
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Errorf("prolog: exit %d, want 1 with %q:\n%s", code, tc.want, out)
			}
			if mountEntry(t, j.mnt) != "" {
				t.Errorf("%s mounted", j.mnt)
			}
			if _, err := os.Stat(j.mnt); err == nil {
				t.Errorf("%s left", j.mnt)
			}
		})
	}
}
