package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceCommand: iowarp trace -- dd prints the table, writes every
// event as a JSON line and the Darshan counters of the output file.
func TestTraceCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("tracing needs root")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("no BPF-capable kernel here")
	}
	dir := t.TempDir()
	out, events, darshan := filepath.Join(dir, "o"), filepath.Join(dir, "ev.jsonl"), filepath.Join(dir, "d.txt")
	var stdout, stderr bytes.Buffer
	err := runTrace(&traceFlags{output: events, darshan: darshan, top: 5},
		[]string{"dd", "if=/dev/zero", "of=" + out, "bs=64k", "count=32"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	row := ""
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasSuffix(l, "  "+out) {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 5 || f[1] != "2MiB" || f[3] != "32" || f[4] != "1" {
		t.Errorf("summary row of %s: %q in\n%s", out, row, stderr.String())
	}
	f, err := os.Open(events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writes := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e traceEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		if e.Call == "write" && e.Ret == 65536 {
			writes++
		}
	}
	if writes != 32 {
		t.Errorf("%d writes of 64 KiB in the events, want 32", writes)
	}
	d, _ := os.ReadFile(darshan)
	for _, want := range []string{"POSIX_WRITES\t32\t" + out, "POSIX_BYTES_WRITTEN\t2097152\t" + out, "POSIX_SIZE_WRITE_10K_100K\t32\t" + out} {
		if !bytes.Contains(d, []byte(want)) {
			t.Errorf("darshan output lacks %q", want)
		}
	}
}
