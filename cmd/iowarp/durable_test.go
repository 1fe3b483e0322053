package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// startCTE starts `iowarp runtime start` with config yaml and waits for its
// ipc socket; the returned func kills it with SIGKILL and waits.
func startCTE(t *testing.T, cfg, sock string) (kill func()) {
	t.Helper()
	d := iowarp("runtime", "start", "--config", cfg)
	var log bytes.Buffer
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	kill = func() {
		d.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	t.Cleanup(kill)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return kill
		}
		select {
		case <-exited:
			t.Fatalf("daemon exited\n%s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ipc socket %s after 20s\n%s", sock, log.String())
		}
	}
}

// cliErr runs the CLI and returns its stderr and error.
func cliErr(args ...string) (string, error) {
	cmd := iowarp(args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	return errb.String(), err
}

// TestDurableBlobsSurviveKill: blobs put with `iowarp put --durable` come
// back bit for bit after kill -9 of the daemon and a restart on the same
// file tier, with their versions and tags; blobs put without it, and a
// durable one overwritten without it, do not.
func TestDurableBlobsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	nvme := filepath.Join(dir, "nvme")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n" +
		"  - name: nvme\n    kind: file\n    dir: " + nvme + "\n    capacity: 256MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := ipc.SocketPath(ctl, "")
	kill := startCTE(t, cfg, sock)

	// A plain put creates the bucket plain: the --durable puts below
	// are durable one by one, not the bucket (TestDurableBucketSurvivesKill).
	runCLI(t, []byte("volatile"), "put", "--control-dir", ctl, "sim/run1/temp", "plain", "-")
	blobs := map[string][]byte{}
	for _, n := range []string{"a", "b", "c"} {
		data := make([]byte, 3<<20+len(n)*1000)
		rand.Read(data)
		blobs[n] = data
		runCLI(t, data, "put", "--control-dir", ctl, "--durable", "--tag", "kind=field", "sim/run1/temp", n, "-")
	}
	v1, v2 := []byte("version one"), []byte("version two")
	runCLI(t, v1, "put", "--control-dir", ctl, "--durable", "--version", "sim/run1/temp", "hist", "-")
	runCLI(t, v2, "put", "--control-dir", ctl, "--durable", "--version", "sim/run1/temp", "hist", "-")
	runCLI(t, []byte("old"), "put", "--control-dir", ctl, "--durable", "sim/run1/temp", "over", "-")
	runCLI(t, []byte("new, not durable"), "put", "--control-dir", ctl, "sim/run1/temp", "over", "-")

	kill()
	os.Remove(sock) // a dead daemon's socket; the next one replaces it anyway
	startCTE(t, cfg, sock)

	for n, data := range blobs {
		got := runCLI(t, nil, "get", "--control-dir", ctl, "sim/run1/temp", n, "-")
		if got != string(data) {
			t.Fatalf("blob %s after kill -9: %d bytes, want %d (equal: %v)", n, len(got), len(data), got == string(data))
		}
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "--version", "1", "sim/run1/temp", "hist", "-"); got != string(v1) {
		t.Fatalf("hist version 1: %q", got)
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "sim/run1/temp", "hist", "-"); got != string(v2) {
		t.Fatalf("hist current: %q", got)
	}
	for _, n := range []string{"plain", "over"} {
		if msg, err := cliErr("get", "--control-dir", ctl, "sim/run1/temp", n, "-"); err == nil || !strings.Contains(msg, "not found") {
			t.Fatalf("%s after kill -9: err %v, %s", n, err, msg)
		}
	}
	ls := runCLI(t, nil, "ls", "--control-dir", ctl, "--tag", "kind=field", "sim")
	for _, n := range []string{"a", "b", "c"} {
		if !strings.Contains(ls, "sim/run1/temp  "+n) {
			t.Fatalf("ls --tag after restart lacks %s:\n%s", n, ls)
		}
	}
	if vs := runCLI(t, nil, "ls", "--control-dir", ctl, "--versions", "sim/run1/temp", "hist"); strings.Count(vs, "\n") != 3 {
		t.Fatalf("versions:\n%s", vs)
	}
}

// TestLsPrefixAndChmod: ls PREFIX lists the buckets below it; ls BUCKET
// its blobs; chmod shows in ls -l.
func TestLsPrefixAndChmod(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	startCTE(t, cfg, ipc.SocketPath(ctl, ""))
	for _, b := range []string{"sim/run1/temp", "sim/run1/pres", "sim/run10/temp", "other"} {
		runCLI(t, []byte("x"), "put", "--control-dir", ctl, "--tag", "step=5", b, "x", "-")
	}
	if got := runCLI(t, nil, "ls", "--control-dir", ctl, "sim/run1"); got != "sim/run1/pres\nsim/run1/temp\n" {
		t.Fatalf("ls sim/run1: %q", got)
	}
	if got := runCLI(t, nil, "ls", "--control-dir", ctl, "other"); !strings.Contains(got, "BLOB") || !strings.Contains(got, "step=5") {
		t.Fatalf("ls other: %q", got)
	}
	runCLI(t, nil, "chmod", "--control-dir", ctl, "640", "other")
	if got := runCLI(t, nil, "ls", "--control-dir", ctl, "-l", "--buckets", "other"); !strings.Contains(got, "0640") {
		t.Fatalf("ls -l: %q", got)
	}
	if got := runCLI(t, nil, "ls", "--control-dir", ctl, "--tag", "step=1..9", "--min-size", "1", "sim/run1"); strings.Count(got, "\n") != 3 {
		t.Fatalf("ls --tag range: %q", got)
	}
	if msg, err := cliErr("put", "--control-dir", ctl, "a//b", "x", "/dev/null"); err == nil || !strings.Contains(msg, "empty component") {
		t.Fatalf("bad name: %v %s", err, msg)
	}
}

// TestRootDaemonServesUsers: a root daemon started with IOWARP_IPC_USERS
// gives each listed uid a socket of its own; `iowarp put/get/ls` run as
// those uids find it by themselves, and each user's buckets are the
// user's: the other can neither read, list nor delete them.
func TestRootDaemonServesUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon serves other uids")
	}
	const alice, bob = 65533, 65534
	dir := t.TempDir()
	for p := dir; p != "/"; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o001 == 0 && os.Chmod(p, st.Mode().Perm()|0o011) != nil {
			t.Skipf("%s is not searchable by other users: %v", p, err)
		}
	}
	exe := filepath.Join(dir, "iowarp")
	if err := copyFile(os.Args[0], exe, 0o755); err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envIPCUsers, "65533, 65534")
	startCTE(t, cfg, ipc.UserSocketPath(ctl, "", bob))
	as := func(uid uint32, stdin string, args ...string) (string, error) {
		cmd := exec.Command(exe, append(args, "--control-dir", ctl)...)
		cmd.Env = append(os.Environ(), cliEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			return out.String() + errb.String(), err
		}
		return out.String(), nil
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return out
	}
	denied := func(out string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(out, "permission denied") {
			t.Fatalf("want permission denied, got %v: %s", err, out)
		}
	}
	must(as(alice, "alice's data", "put", "alice/run1", "x", "-"))
	must(as(bob, "bob's data", "put", "bob/run1", "y", "-"))
	if got := must(as(alice, "", "get", "alice/run1", "x", "-")); got != "alice's data" {
		t.Fatalf("alice reads %q", got)
	}
	denied(as(bob, "", "get", "alice/run1", "x", "-"))
	denied(as(bob, "", "rm", "--bucket", "alice/run1"))
	denied(as(alice, "", "get", "bob/run1", "y", "-"))
	if got := must(as(bob, "", "ls")); got != "bob/run1\n" {
		t.Fatalf("bob lists %q", got)
	}
	if got := must(as(alice, "", "ls", "-l")); !strings.Contains(got, "alice/run1  65533") || strings.Contains(got, "bob") {
		t.Fatalf("alice lists %q", got)
	}
	// Root, on the daemon's own socket, sees both and may delete.
	if got := runCLI(t, nil, "ls", "--control-dir", ctl); got != "alice/run1\nbob/run1\n" {
		t.Fatalf("root lists %q", got)
	}
	runCLI(t, nil, "rm", "--control-dir", ctl, "--bucket", "bob/run1")
	if got := must(as(bob, "", "ls")); got != "" {
		t.Fatalf("bob lists %q after root deleted his bucket", got)
	}
}

// copyFile copies src to a new file dst with mode perm.
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestDurableKilledMidway: four clients put durable blobs in a loop while
// the daemon is killed with -9. After a restart every blob is, bit for
// bit, what the last put that returned wrote, or what the put in flight
// at the kill wrote: never torn, never older.
func TestDurableKilledMidway(t *testing.T) {
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := "mount: \"\"\ncontrol_dir: " + ctl + "\ntiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n" +
		"  - name: nvme\n    kind: file\n    dir: " + filepath.Join(dir, "nvme") + "\n    capacity: 256MiB\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := ipc.SocketPath(ctl, "")
	kill := startCTE(t, cfg, sock)
	// content of blob w/i at round r: its first 8 bytes say w, i and r.
	content := func(w, i, r int) []byte {
		b := make([]byte, 64<<10+w*4096)
		for j := range b {
			b[j] = byte(w*31 + i*7 + r + j/4096)
		}
		copy(b, fmt.Sprintf("%02d%02d%04d", w, i, r))
		return b
	}
	type state struct{ done, inflight int } // rounds: last returned, in flight (-1 none)
	states := make([][]state, 4)
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		states[w] = make([]state, 3)
		for i := range states[w] {
			states[w][i] = state{done: -1, inflight: -1}
		}
		c, err := client.Connect(client.Options{Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, err := c.Bucket(fmt.Sprintf("crash/w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; ; r++ {
				i := r % 3
				mu.Lock()
				states[w][i].inflight = r
				mu.Unlock()
				err := b.PutWith(fmt.Sprint(i), content(w, i, r), client.PutOptions{Durable: true})
				if err != nil {
					return // the daemon is gone
				}
				mu.Lock()
				states[w][i] = state{done: r, inflight: -1}
				mu.Unlock()
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	kill()
	close(stop)
	wg.Wait()
	os.Remove(sock)
	startCTE(t, cfg, sock)
	c, err := client.Connect(client.Options{Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	puts := 0
	for w := range 4 {
		b, err := c.Bucket(fmt.Sprintf("crash/w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range states[w] {
			puts += st.done + 1
			got, err := b.Get(fmt.Sprint(i))
			if st.done < 0 {
				if err == nil && st.inflight >= 0 && bytes.Equal(got, content(w, i, st.inflight)) {
					continue // the first put, in flight, made it
				}
				if err != nil {
					continue // never returned: may be absent
				}
			}
			if err != nil {
				t.Fatalf("w%d/%d (last put returned round %d): %v", w, i, st.done, err)
			}
			ok := bytes.Equal(got, content(w, i, st.done)) || (st.inflight >= 0 && bytes.Equal(got, content(w, i, st.inflight)))
			if !ok {
				t.Fatalf("w%d/%d: %d bytes starting %q; want round %d (or %d in flight)", w, i, len(got), got[:min(8, len(got))],
					st.done, st.inflight)
			}
		}
	}
	if puts < 8 {
		t.Fatalf("only %d durable puts returned before the kill", puts)
	}
	t.Logf("%d durable puts returned before kill -9; every blob intact after the restart", puts)
}
