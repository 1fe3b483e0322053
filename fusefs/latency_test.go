package fusefs

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	gofuseposix "github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/hist"
)

// TestRequestMetrics: a mount with Options.Metrics passes go-fuse's
// conformance suite as a plain one does (the timing layer changes no
// reply), and counts the requests of each opcode it served.
func TestRequestMetrics(t *testing.T) {
	m := &RequestMetrics{}
	tm := newTestMountOpts(t, files.Writeback, Options{Metrics: m})
	for _, name := range sortedKeys(gofuseposix.All) {
		t.Run(name, func(t *testing.T) {
			if why, ok := goFuseSkips[name]; ok {
				t.Skip(why)
			}
			dir := filepath.Join(tm.dir, "gofuse-"+name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatalf("mkdir: %v", err)
			}
			gofuseposix.All[name](t, dir)
		})
	}
	p := filepath.Join(tm.dir, "f")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	seen := map[string]hist.Snapshot{}
	m.Each(func(op string, lat hist.Snapshot, eio uint64) {
		seen[op] = lat
		if eio != 0 {
			t.Errorf("%s: %d EIO replies", op, eio)
		}
	})
	for _, op := range []string{"LOOKUP", "GETATTR", "CREATE", "WRITE", "READ", "MKDIR", "UNLINK", "RENAME", "FSYNC", "RELEASE", "READDIRPLUS"} {
		s, ok := seen[op]
		if !ok || s.Count == 0 || s.Sum <= 0 {
			t.Errorf("%s: %+v", op, s)
		}
	}
	if t.Failed() {
		var ops []string
		for op := range seen {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		t.Logf("opcodes seen: %v", ops)
	}
}
