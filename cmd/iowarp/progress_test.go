package main

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProgressLines: off a terminal, progress is plain lines at most
// every interval, with done, total, rate, what is left and the ETA.
func TestProgressLines(t *testing.T) {
	t.Setenv("IOWARP_PROGRESS_INTERVAL", "1h")
	var buf bytes.Buffer
	p := newProgress(&buf, "stage-in", 4<<20)
	p.Update(1<<20, 4<<20)
	if buf.Len() != 0 {
		t.Fatalf("a line before the interval: %q", buf.String())
	}
	p.start = time.Now().Add(-2 * time.Second)
	p.last = time.Now().Add(-2 * time.Hour)
	p.Update(2<<20, 8<<20) // the total grew
	p.Finish()
	line := regexp.MustCompile(`^stage-in: 2MiB of 8MiB \(25%\), \d+(\.\d+)?[KM]iB/s, 6MiB left, ETA [67]s\n$`)
	if !line.MatchString(buf.String()) {
		t.Errorf("progress line %q", buf.String())
	}
	if strings.Contains(buf.String(), "\r") {
		t.Errorf("a bar off a terminal: %q", buf.String())
	}
}

func TestReadList(t *testing.T) {
	p := t.TempDir() + "/list"
	if err := os.WriteFile(p, []byte("# inputs\n/iowarp/a\n\n  /iowarp/b c  \nrel/d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readList(p)
	if err != nil || !slices.Equal(got, []string{"/iowarp/a", "/iowarp/b c", "rel/d"}) {
		t.Errorf("readList = %q, %v", got, err)
	}
	if _, err := readList(p + ".missing"); err == nil {
		t.Errorf("a missing list read without an error")
	}
}
