package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Three simulated nodes on this machine: a network namespace each (made
// here, with a private 10.x.y.0/24 that exists inside the namespaces only:
// the host's network is not touched), joined by veth pairs on a bridge in
// a fourth namespace; one iowarp daemon per node (the real binary, run by
// ip netns exec, so its mount is in that command's own mount namespace:
// the test reaches it with nsenter), one shared backing directory, an
// embedded etcd member in each daemon.

// simNet is the namespaces of one test.
type simNet struct {
	t      *testing.T
	tag    string // unique per test: names of the namespaces
	subnet string // "10.a.b."
	nodes  []string
	bridge string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// newSimNet makes n node namespaces on a bridge; t.Cleanup deletes them.
func newSimNet(t *testing.T, n int) *simNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip (iproute2)")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux)")
	}
	r := rand.Uint32()
	s := &simNet{t: t, tag: fmt.Sprintf("iwc%06x", r&0xffffff), subnet: fmt.Sprintf("10.%d.%d.", 200+r%50, (r>>8)%250)}
	s.bridge = s.tag + "br"
	t.Cleanup(s.cleanup)
	must := func(args ...string) {
		t.Helper()
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("netns", "add", s.bridge)
	must("-n", s.bridge, "link", "add", "br0", "type", "bridge")
	must("-n", s.bridge, "link", "set", "br0", "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("%sn%d", s.tag, i)
		must("netns", "add", ns)
		s.nodes = append(s.nodes, ns)
		port := fmt.Sprintf("p%d", i)
		must("-n", s.bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		must("-n", s.bridge, "link", "set", port, "master", "br0", "up")
		must("-n", ns, "addr", "add", s.addr(i)+"/24", "dev", "eth0")
		must("-n", ns, "link", "set", "eth0", "up")
		must("-n", ns, "link", "set", "lo", "up")
	}
	return s
}

func (s *simNet) addr(i int) string { return s.subnet + fmt.Sprint(i) }

func (s *simNet) cleanup() {
	for _, ns := range append(s.nodes, s.bridge) {
		if err := ipCmd("netns", "del", ns); err != nil {
			s.t.Logf("cleanup: %v", err)
		}
	}
}

// simNode is one node's daemon.
type simNode struct {
	t       *testing.T
	i       int
	ns      string
	mnt     string
	cfg     string
	log     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// clusterYAML is node i's config.
func (s *simNet) clusterYAML(i, n int, base, backing, bandwidth string) string {
	var peers, eps []string
	for k := 1; k <= n; k++ {
		peers = append(peers, fmt.Sprintf("n%d=http://%s:2380", k, s.addr(k)))
		eps = append(eps, fmt.Sprintf("http://%s:2379", s.addr(k)))
	}
	return fmt.Sprintf(`backing: %s
mode: writeback
control_dir: %s
page_size: 16KiB
flushers: 2
backing_bandwidth: %s
oom_score_adj: 0
tiers:
  - {name: ram, kind: ram, capacity: 32MiB}
cluster:
  name: itest
  listen: %s:7070
  etcd: [%s]
  ttl: 5s
  shared_namespace: true
  embed:
    name: n%d
    peers: [%s]
    client: http://%s:2379
    dir: %s
`, backing, filepath.Join(base, "ctl"), bandwidth, s.addr(i), strings.Join(eps, ", "), i, strings.Join(peers, ", "), s.addr(i), filepath.Join(base, "etcd"))
}

// startNode starts node i's daemon (not waiting for its mount).
func (s *simNet) startNode(i int, bin, yaml string) *simNode {
	t := s.t
	base := t.TempDir()
	nd := &simNode{t: t, i: i, ns: s.nodes[i-1], mnt: filepath.Join(base, "mnt"), cfg: filepath.Join(base, "config.yaml"), log: filepath.Join(base, "iowarp.log")}
	// Socket paths are limited to 108 bytes: keep the control dir short.
	ctl, err := os.MkdirTemp("", "iwctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ctl) })
	yaml = strings.ReplaceAll(strings.ReplaceAll(yaml, "BASE/ctl", ctl), "BASE", base)
	if err := os.MkdirAll(nd.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nd.cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(nd.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// ip netns exec execs the command: its pid is the daemon's.
	nd.cmd = exec.Command("ip", "netns", "exec", nd.ns, bin, "mount", nd.mnt, "--config", nd.cfg)
	nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
	if err := nd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nd.exited = make(chan struct{})
	go func() { nd.waitErr = nd.cmd.Wait(); close(nd.exited) }()
	t.Cleanup(nd.stop)
	return nd
}

// waitMounted waits until the daemon's mount is in its mount namespace.
func (nd *simNode) waitMounted(d time.Duration) {
	t := nd.t
	t.Helper()
	deadline := time.Now().Add(d)
	for !nd.mounted() {
		select {
		case <-nd.exited:
			t.Fatalf("node %d exited before mounting (%v):\n%s", nd.i, nd.waitErr, nd.logText())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d not mounted after %v:\n%s", nd.i, d, nd.logText())
		}
	}
}

func (nd *simNode) mounted() bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", nd.cmd.Process.Pid))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fl := strings.Fields(sc.Text()); len(fl) > 4 && fl[4] == nd.mnt {
			return true
		}
	}
	return false
}

func (nd *simNode) logText() string { b, _ := os.ReadFile(nd.log); return string(b) }

// run runs a program in the node's mount namespace (where its mount is).
func (nd *simNode) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	a := append([]string{"-t", fmt.Sprint(nd.cmd.Process.Pid), "-m", "--", name}, args...)
	return exec.CommandContext(ctx, "nsenter", a...).CombinedOutput()
}

// inNet runs a program in the node's network namespace.
func (nd *simNode) inNet(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", nd.ns}, args...)...).CombinedOutput()
}

// kill9 kills the daemon.
func (nd *simNode) kill9() {
	nd.cmd.Process.Signal(syscall.SIGKILL)
	<-nd.exited
}

// stop ends the daemon: SIGTERM (it drains), SIGKILL after a minute.
func (nd *simNode) stop() {
	select {
	case <-nd.exited:
		return
	default:
	}
	nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.exited:
	case <-time.After(60 * time.Second):
		nd.t.Logf("node %d did not stop after SIGTERM within 60s: killed", nd.i)
		nd.kill9()
	}
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// sha256sums runs sha256sum on the node over paths: path → sum, or the
// error of the whole run.
func (nd *simNode) sha256sums(ctx context.Context, paths []string) (map[string]string, error) {
	out, err := nd.run(ctx, "sha256sum", paths...)
	if err != nil {
		return nil, fmt.Errorf("sha256sum on node %d: %v: %s", nd.i, err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[1]] = f[0]
		}
	}
	return m, nil
}

// clusterMembers is `iowarp cluster status --json` on node nd.
func (nd *simNode) clusterMembers(ctx context.Context, bin string) (names []string, healthy int, etcdUp int, err error) {
	out, err := nd.inNet(ctx, bin, "cluster", "status", "--config", nd.cfg, "--json", "--timeout", "2s")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cluster status: %v: %s", err, out)
	}
	var st struct {
		Members []struct {
			Name    string
			Healthy bool
		}
		Etcd []struct{ Healthy bool }
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, 0, 0, fmt.Errorf("cluster status: %v: %s", err, out)
	}
	for _, m := range st.Members {
		names = append(names, m.Name)
		if m.Healthy {
			healthy++
		}
	}
	for _, e := range st.Etcd {
		if e.Healthy {
			etcdUp++
		}
	}
	return names, healthy, etcdUp, nil
}

// TestClusterSharedNamespace: node 1 writes a file per rank, nodes 2 and
// 3 read them back (checksums) before the write-back (throttled) is done;
// a CTE blob put on node 1 is read on node 3;
// node 2 writes files of its own and is killed -9 before any of it is
// written back: node 3's reads of them fail with EIO until node 2's
// lease expires and then show the backing store (what was lost is
// reported); nodes 1 and 3 keep working on 2 of 3 etcd members.
func TestClusterSharedNamespace(t *testing.T) {
	bin := iowarpBin(t)
	s := newSimNet(t, 3)
	backing := t.TempDir()
	const n, ranks, rankSize = 3, 6, 64 << 10
	var nodes []*simNode
	for i := 1; i <= n; i++ {
		bw := "48KiB" // 6 ranks of 64 KiB take 8 s to write back
		if i == 2 {
			bw = "1KiB" // node 2 writes back nothing before it is killed
		}
		nodes = append(nodes, s.startNode(i, bin, s.clusterYAML(i, n, "BASE", backing, bw)))
	}
	for _, nd := range nodes {
		nd.waitMounted(120 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	names, healthy, etcdUp, err := nodes[0].clusterMembers(ctx, bin)
	if err != nil || len(names) != 3 || healthy != 3 || etcdUp != 3 {
		t.Fatalf("cluster status: members %v (%d healthy), %d etcd up, %v; want 3, 3, 3", names, healthy, etcdUp, err)
	}

	// The checkpoint: node 1 writes one file per rank (cp of files made here).
	src := t.TempDir()
	want := map[string]string{}
	var paths []string
	for r := range ranks {
		data := make([]byte, rankSize)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		p := filepath.Join(src, fmt.Sprintf("rank.%d", r))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("rank.%d", r)] = sum(data)
	}
	n1 := nodes[0]
	if out, err := n1.run(ctx, "mkdir", filepath.Join(n1.mnt, "ckpt")); err != nil {
		t.Fatalf("mkdir on node 1: %v: %s", err, out)
	}
	started := time.Now()
	for r := range ranks {
		name := fmt.Sprintf("rank.%d", r)
		if out, err := n1.run(ctx, "cp", filepath.Join(src, name), filepath.Join(n1.mnt, "ckpt", name)); err != nil {
			t.Fatalf("cp on node 1: %v: %s", err, out)
		}
	}
	wrote := time.Now()
	t.Logf("node 1 wrote %d ranks in %v", ranks, wrote.Sub(started).Round(time.Millisecond))
	// Read back on nodes 2 and 3.
	for _, nd := range nodes[1:] {
		paths = paths[:0]
		for r := range ranks {
			paths = append(paths, filepath.Join(nd.mnt, "ckpt", fmt.Sprintf("rank.%d", r)))
		}
		sums, err := nd.sha256sums(ctx, paths)
		if err != nil {
			t.Fatal(err)
		}
		for r := range ranks {
			name := fmt.Sprintf("rank.%d", r)
			if got := sums[filepath.Join(nd.mnt, "ckpt", name)]; got != want[name] {
				t.Errorf("node %d read %s with sum %s, node 1 wrote %s", nd.i, name, got, want[name])
			}
		}
	}
	// What the backing store had when the reads were done.
	var onStore, incomplete int64
	for r := range ranks {
		b, _ := os.ReadFile(filepath.Join(backing, "ckpt", fmt.Sprintf("rank.%d", r)))
		onStore += int64(len(b))
		if sum(b) != want[fmt.Sprintf("rank.%d", r)] {
			incomplete++
		}
	}
	t.Logf("nodes 2 and 3 read %d ranks (%d KiB) back from node 1 in %v; the backing store then held %d KiB of them, %d ranks incomplete",
		ranks, ranks*rankSize>>10, time.Since(wrote).Round(time.Millisecond), onStore>>10, incomplete)
	if incomplete == 0 {
		t.Errorf("every rank was on the backing store before the reads ended (%v after the writes): nothing shows the reads came from node 1\nnode 1:\n%s\nnode 2:\n%s",
			time.Since(wrote), n1.logText(), nodes[1].logText())
	}

	// A CTE blob put on node 1 is read on node 3 (the placement map).
	blob := filepath.Join(src, "rank.0")
	if out, err := n1.inNet(ctx, bin, "cluster", "put", "--config", n1.cfg, "ckpt", "meta", blob); err != nil || !strings.Contains(string(out), "on n1") {
		t.Fatalf("cluster put on node 1: %v: %s", err, out)
	}
	got := filepath.Join(t.TempDir(), "meta")
	if out, err := nodes[2].inNet(ctx, bin, "cluster", "get", "--config", nodes[2].cfg, "ckpt", "meta", got); err != nil {
		t.Fatalf("cluster get on node 3: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(got); sum(b) != want["rank.0"] {
		t.Errorf("node 3 got the blob node 1 put with sum %s, want %s", sum(b), want["rank.0"])
	}

	// Node 2 writes its own ranks and is killed -9 with all of it unflushed.
	n2, n3 := nodes[1], nodes[2]
	lostWant := map[string]int{}
	for r := range 2 {
		name := fmt.Sprintf("n2rank.%d", r)
		if out, err := n2.run(ctx, "dd", "if="+filepath.Join(src, fmt.Sprintf("rank.%d", r)), "of="+filepath.Join(n2.mnt, "ckpt", name), "bs=64k", "status=none"); err != nil {
			t.Fatalf("dd on node 2: %v: %s", err, out)
		}
		lostWant[name] = rankSize
	}
	killed := time.Now()
	n2.kill9()
	t.Logf("node 2 killed -9 (it held %d files, %d KiB, unflushed)", len(lostWant), len(lostWant)*rankSize>>10)
	out, err := n3.run(ctx, "cat", filepath.Join(n3.mnt, "ckpt", "n2rank.0"))
	if since := time.Since(killed); since < 5*time.Second { // within the TTL
		if err == nil || !strings.Contains(string(out), "Input/output error") {
			t.Errorf("node 3 read node 2's unflushed file %v after the kill, before its lease expired: %v, %.200q; want EIO", since, err, out)
		} else {
			t.Logf("node 3's read of node 2's file %v after the kill: %s", since.Round(time.Millisecond), bytes.TrimSpace(out))
		}
	} else {
		t.Logf("node 3's read of node 2's file came %v after the kill, past its TTL: EIO not checked (%v)", since.Round(time.Millisecond), err)
	}
	// Node 2 leaves the members within its TTL (5 s) and its files are
	// read from the backing store again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		names, healthy, etcdUp, err = n3.clusterMembers(ctx, bin)
		if err == nil && len(names) == 2 && healthy == 2 && etcdUp == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after node 2's kill: members %v (%d healthy), etcd %d up, %v; want 2, 2, 2", names, healthy, etcdUp, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("node 2 gone from the members %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	var lost int64
	for name, size := range lostWant {
		out, err := n3.run(ctx, "cat", filepath.Join(n3.mnt, "ckpt", name))
		for err != nil && time.Now().Before(deadline) { // the owner key may outlive the member key by a moment
			time.Sleep(200 * time.Millisecond)
			out, err = n3.run(ctx, "cat", filepath.Join(n3.mnt, "ckpt", name))
		}
		if err != nil {
			t.Fatalf("node 3 reading %s after node 2's lease expired: %v: %s", name, err, out)
		}
		src, _ := os.ReadFile(filepath.Join(src, strings.TrimPrefix(name, "n2")))
		if bytes.Equal(out, src) {
			t.Errorf("%s is whole after node 2's kill: it was expected unflushed", name)
		}
		lost += int64(size - len(out))
	}
	t.Logf("lost with node 2: %d KiB of %d KiB it wrote (what it held unflushed: its write-back ran at 1 KiB/s)", lost>>10, len(lostWant)*rankSize>>10)
	if lost != int64(len(lostWant)*rankSize) {
		t.Errorf("lost %d bytes, node 2 held %d unflushed", lost, len(lostWant)*rankSize)
	}

	// Nodes 1 and 3 keep working, on 2 of 3 etcd members: a new file
	// written on node 1 is read on node 3, and node 3 still reads the
	// checkpoint.
	after := filepath.Join(src, "rank.1")
	if out, err := n1.run(ctx, "cp", after, filepath.Join(n1.mnt, "ckpt", "after")); err != nil {
		t.Fatalf("cp on node 1 after node 2's kill: %v: %s", err, out)
	}
	sums, err := n3.sha256sums(ctx, []string{filepath.Join(n3.mnt, "ckpt", "after"), filepath.Join(n3.mnt, "ckpt", "rank.5")})
	if err != nil {
		t.Fatal(err)
	}
	if sums[filepath.Join(n3.mnt, "ckpt", "after")] != want["rank.1"] || sums[filepath.Join(n3.mnt, "ckpt", "rank.5")] != want["rank.5"] {
		t.Errorf("node 3 after node 2's kill read %v; want after=%s, rank.5=%s\nnode 3:\n%s", sums, want["rank.1"], want["rank.5"], n3.logText())
	}
}
