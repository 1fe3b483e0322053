package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitJournaled polls until the file tier's journal holds at least n
// dirty pages.
func (m *mount) waitJournaled(n int64, limit time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := m.stats()
		var got int64
		for _, ts := range st.Pool.Tiers {
			got += ts.Journaled
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("%d pages journaled after %v, want %d", got, limit, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// instanceDirs lists the daemon instance directories in the file tier.
func instanceDirs(t *testing.T, m *mount) []string {
	t.Helper()
	d, err := filepath.Glob(filepath.Join(filepath.Dir(m.cfgPath), "nvme", "iowarp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed ^ byte(i*31+i>>12)
	}
	return b
}

// TestKill9ReplaysFileTier: dirty pages that sit on the file tier when the
// daemon is killed -9 (write-back throttled to 1 KiB/s, so none reached
// the backing store) are on the backing store, with the right size, once
// the daemon restarted on the same config; `iowarp stat` reports the
// replay; after several kill cycles the tier directory holds only the live
// daemon's files.
func TestKill9ReplaysFileTier(t *testing.T) {
	m := startMount(t, config{ram: "1MiB", file: "64MiB", bandwidth: "1KiB/s"})
	a := pattern(8<<20+123, 1)
	b := pattern(3<<20, 2)
	if err := os.WriteFile(m.path("a"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path("b"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(m.path("b"), 1<<20+500); err != nil {
		t.Fatal(err)
	}
	b = b[:1<<20+500]
	m.waitJournaled(9+2, 30*time.Second)
	m.kill9()
	if got, _ := os.ReadFile(filepath.Join(m.backing, "a")); bytes.Equal(got, a) {
		t.Fatal("a was written back before the kill: the test proves nothing")
	}

	for cycle := range 3 {
		m.start()
		st := m.stats()
		if n := len(instanceDirs(t, m)); n != 1 {
			t.Fatalf("cycle %d: %d instance directories in the tier after restart: %v", cycle, n, instanceDirs(t, m))
		}
		if cycle == 0 {
			if r := st.Replay; r == nil || r.Files != 2 || r.Pages != 11 || r.Skipped != 0 || r.Bytes != int64(len(a)+len(b)) {
				t.Fatalf("replay report %+v", r)
			}
			for name, want := range map[string][]byte{"a": a, "b": b} {
				got, err := os.ReadFile(filepath.Join(m.backing, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("backing %s after the replay: %d bytes (%v), want %d", name, len(got), err, len(want))
				}
			}
			out, code := run(m.bin, "stat", m.dir, "--control-dir", m.ctl)
			if code != 0 || !bytes.Contains([]byte(out), []byte("replayed 11 pages")) {
				t.Fatalf("iowarp stat: exit %d\n%s", code, out)
			}
		}
		// Dirty data of a next daemon, killed too: reclaimed or replayed
		// by the next start, never piling up.
		if err := os.WriteFile(m.path(fmt.Sprintf("c%d", cycle)), pattern(2<<20, byte(cycle)), 0o644); err != nil {
			t.Fatal(err)
		}
		m.waitJournaled(2, 30*time.Second)
		m.kill9()
	}
	m.start()
	if n := len(instanceDirs(t, m)); n != 1 {
		t.Fatalf("%d instance directories after the last restart", n)
	}
	for cycle := range 3 {
		got, err := os.ReadFile(filepath.Join(m.backing, fmt.Sprintf("c%d", cycle)))
		if err != nil || !bytes.Equal(got, pattern(2<<20, byte(cycle))) {
			t.Errorf("c%d on the backing store: %d bytes, %v", cycle, len(got), err)
		}
	}
}
