package integration

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
)

// TestLearnedPrefetchRestart: python3 reads a file through the mount in
// a random order; after the daemon restarts, the same program's reads
// find the pages the learned prefetch staged in from the history the
// first run left on the file tier.
func TestLearnedPrefetchRestart(t *testing.T) {
	const pages = 24
	m := startMount(t, config{ram: "64MiB", extra: "learned_prefetch: {enabled: true}\n"})
	writeRandomFile(t, filepath.Join(m.backing, "input"), pages<<20, 5)
	order := rand.New(rand.NewSource(11)).Perm(pages)
	script := fmt.Sprintf(`
import os
fd = os.open("input", os.O_RDONLY)
for p in %s:
    assert len(os.pread(fd, 1 << 20, p << 20)) == 1 << 20
os.close(fd)
`, strings.ReplaceAll(fmt.Sprint(order), " ", ", "))
	sh(t, m.dir, "python3 -c '"+script+"'")
	if st := m.stats().Learned; st.HistoriesSaved != 1 {
		t.Fatalf("first run: %+v, want one history saved at the close", st)
	}
	if err := m.stop(); err != nil {
		t.Fatal(err)
	}
	m.start()
	sh(t, m.dir, "python3 -c '"+script+"'")
	st := m.stats()
	if st.Learned.HistoriesLoaded != 1 || st.Learned.Hits < pages/2 {
		t.Fatalf("after the restart: %+v (read hits %d, misses %d), want the history replayed and most reads hits",
			st.Learned, st.ReadHits, st.ReadMisses)
	}
	if out := m.cli("stat", m.dir); !strings.Contains(out, "learned prefetch: 1 histories replayed") {
		t.Errorf("iowarp stat shows no learned prefetch line:\n%s", out)
	}
}
