package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime/control"
)

// TestPutCompress: `iowarp put --compress zstd` into a daemon whose RAM
// tier overflows: the organizer moves the coldest blobs to the file
// tier, compressed (the metrics show the bytes held and saved), and
// `iowarp get` returns every blob as it was put. A codec the pool does
// not know is refused before anything is sent.
func TestPutCompress(t *testing.T) {
	if _, errs, code := cliResult(t, "put", "--compress", "gzip", "b", "x", "/etc/hostname"); code == 0 || !strings.Contains(errs, `--compress "gzip": not one of none, zstd, s2, lz4`) {
		t.Fatalf("put --compress gzip: exit %d\n%s", code, errs)
	}
	dir := t.TempDir()
	ctl := filepath.Join(dir, "ctl")
	cfg := filepath.Join(dir, "cte.yaml")
	yaml := fmt.Sprintf("mount: \"\"\ncontrol_dir: %s\nmetrics_listen: 127.0.0.1:0\ntiers:\n"+
		"  - {name: ram, kind: ram, capacity: 8MiB}\n  - {name: nvme, kind: file, dir: %s, capacity: 64MiB}\n",
		ctl, filepath.Join(dir, "nvme"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	d := iowarp("runtime", "start", "--config", cfg)
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { d.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.Process.Signal(os.Interrupt)
		<-exited
	})
	var info Info
	for deadline := time.Now().Add(20 * time.Second); control.Call(control.SocketPath(ctl, ""), "info", &info) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no runtime after 20s")
		}
	}
	blobs := map[string][]byte{}
	for i := range 4 {
		var b bytes.Buffer
		for b.Len() < 2<<20 {
			fmt.Fprintf(&b, "rank %d step %d energy %.4f\n", i, b.Len(), float64(b.Len()%1000)/7)
		}
		name := fmt.Sprintf("ckpt-%d", i)
		blobs[name] = b.Bytes()[:2<<20]
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, blobs[name], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, errs, code := cliResult(t, "put", "--control-dir", ctl, "--compress", "zstd", "run1", name, p); code != 0 {
			t.Fatalf("put %s: exit %d\n%s", name, code, errs)
		}
	}
	var m map[string]float64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m = scrape(t, info.Metrics)
		if m[`iowarp_tier_compression_saved_bytes{kind="file",tier="nvme"}`] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing compressed on the file tier after 20s: %v", m)
		}
	}
	if logical := m[`iowarp_tier_compressed_logical_bytes{kind="file",tier="nvme"}`]; logical < 2<<20 ||
		m[`iowarp_tier_compression_saved_bytes{kind="file",tier="nvme"}`] < logical/2 {
		t.Fatalf("compressed %v bytes, saved %v", logical, m[`iowarp_tier_compression_saved_bytes{kind="file",tier="nvme"}`])
	}
	for name, want := range blobs {
		out := filepath.Join(dir, name+".out")
		if _, errs, code := cliResult(t, "get", "--control-dir", ctl, "run1", name, out); code != 0 {
			t.Fatalf("get %s: exit %d\n%s", name, code, errs)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Fatalf("%s: got %d bytes back, differing", name, len(got))
		}
	}
}
