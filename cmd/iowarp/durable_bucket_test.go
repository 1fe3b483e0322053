package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// ctrPages and ctrPage shape the blob the partial puts of
// TestDurableBucketSurvivesKill write: round r writes page r%ctrPages,
// every byte of it r's low byte, its first 8 bytes r.
const ctrPages, ctrPage = 64, 4096

// ctrAfter is that blob after rounds 0..last (nil before round 0).
func ctrAfter(last int) []byte {
	if last < 0 {
		return nil
	}
	n := min(last+1, ctrPages) * ctrPage
	b := make([]byte, n)
	for r := max(0, last-ctrPages+1); r <= last; r++ {
		p := b[(r%ctrPages)*ctrPage:][:ctrPage]
		for i := range p {
			p[i] = byte(r)
		}
		binary.LittleEndian.PutUint64(p, uint64(r))
	}
	return b
}

// TestDurableBucketSurvivesKill: a bucket `iowarp put --durable` created
// is durable, and so is one `put --durable-bucket` made durable: the plain writes of a client to it (PartialPut into a blob
// and past its end, Put, PutVersion, tags, Delete) and to a bucket it
// made durable with client.Durable() survive kill -9 of the daemon and
// a restart, bit for bit; a client's partial puts in a loop when the
// daemon is killed leave the blob as the last one that returned made it,
// or the one in flight, never torn.
func TestDurableBucketSurvivesKill(t *testing.T) {
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	big := make([]byte, 2<<20)
	rand.Read(big)
	runCLI(t, big, "put", "--control-dir", ctl, "--durable", "dur/b", "big", "-")
	c, err := client.Connect(client.Options{Socket: sock})
	must(err)
	b, err := c.Bucket("dur/b")
	must(err)
	for _, off := range []int{0, 12345, 1 << 20} {
		patch := []byte(strings.Repeat("patch!", 100))
		must(b.PartialPut("big", int64(off), patch))
		copy(big[off:], patch)
	}
	must(b.PartialPut("big", int64(len(big)), []byte("grown past the end")))
	big = append(big, "grown past the end"...)
	must(b.Put("small", []byte("plain put")))
	must(b.SetTag("small", "kind", "field"))
	_, err = b.PutVersion("hist", []byte("version one"), client.PutOptions{})
	must(err)
	_, err = b.PutVersion("hist", []byte("version two"), client.PutOptions{})
	must(err)
	must(b.Put("gone", []byte("deleted before the kill")))
	must(b.Delete("gone"))

	later, err := c.Bucket("dur/later")
	must(err)
	must(later.Put("x", []byte("put while plain")))
	lb, err := c.Bucket("dur/later", client.Durable())
	must(err)
	must(lb.PartialPut("x", 4, []byte("+durable")))

	runCLI(t, []byte("plain first"), "put", "--control-dir", ctl, "dur/cli", "a", "-")
	runCLI(t, []byte("made durable"), "put", "--control-dir", ctl, "--durable-bucket", "dur/cli", "b", "-")

	// Partial puts in a loop, killed midway.
	var mu sync.Mutex
	done := -1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		page := make([]byte, ctrPage)
		for r := 0; ; r++ {
			copy(page, ctrAfter(r)[(r%ctrPages)*ctrPage:][:ctrPage])
			if err := b.PartialPut("ctr", int64(r%ctrPages)*ctrPage, page); err != nil {
				return // the daemon is gone
			}
			mu.Lock()
			done = r
			mu.Unlock()
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	kill()
	close(stop)
	wg.Wait()
	c.Close()
	os.Remove(sock)
	startCTE(t, cfg, sock)

	if got := runCLI(t, nil, "get", "--control-dir", ctl, "dur/b", "big", "-"); got != string(big) {
		t.Fatalf("big after kill -9: %d bytes, want %d (equal: false)", len(got), len(big))
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "dur/b", "small", "-"); got != "plain put" {
		t.Fatalf("small: %q", got)
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "--version", "1", "dur/b", "hist", "-"); got != "version one" {
		t.Fatalf("hist version 1: %q", got)
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "dur/b", "hist", "-"); got != "version two" {
		t.Fatalf("hist current: %q", got)
	}
	if msg, err := cliErr("get", "--control-dir", ctl, "dur/b", "gone", "-"); err == nil || !strings.Contains(msg, "not found") {
		t.Fatalf("deleted blob after kill -9: err %v, %s", err, msg)
	}
	if ls := runCLI(t, nil, "ls", "--control-dir", ctl, "--tag", "kind=field", "dur"); !strings.Contains(ls, "small") || !strings.Contains(ls, "kind=field") {
		t.Fatalf("ls --tag after restart:\n%s", ls)
	}
	if got := runCLI(t, nil, "get", "--control-dir", ctl, "dur/later", "x", "-"); got != "put +durableain" {
		t.Fatalf("bucket made durable: %q", got)
	}
	for n, want := range map[string]string{"a": "plain first", "b": "made durable"} {
		if got := runCLI(t, nil, "get", "--control-dir", ctl, "dur/cli", n, "-"); got != want {
			t.Fatalf("dur/cli %s (put --durable-bucket): %q", n, got)
		}
	}
	if ls := runCLI(t, nil, "ls", "--control-dir", ctl, "-l", "--buckets", "dur/b"); !strings.Contains(ls, "bucket") {
		t.Fatalf("ls -l does not say durable bucket:\n%s", ls)
	}
	got := []byte(runCLI(t, nil, "get", "--control-dir", ctl, "dur/b", "ctr", "-"))
	if !bytes.Equal(got, ctrAfter(done)) && !bytes.Equal(got, ctrAfter(done+1)) {
		t.Fatalf("ctr after kill -9 with round %d returned: %d bytes, neither round %d nor %d", done, len(got), done, done+1)
	}
	if done < 10 {
		t.Fatalf("only %d partial puts returned before the kill", done+1)
	}
	t.Logf("%d durable partial puts returned before kill -9; the blob is intact after the restart", done+1)
}
