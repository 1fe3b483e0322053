package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPressureWatcher drives the watcher with PSI and memory.events
// files written by the test: a stall share above the threshold or a
// memory.events counter that rose is pressure; quiet for ReliefAfter is
// relief.
func TestPressureWatcher(t *testing.T) {
	dir := t.TempDir()
	psi, events := filepath.Join(dir, "memory.pressure"), filepath.Join(dir, "memory.events")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setPSI := func(total int) {
		write(psi, "some avg10=0.00 avg60=0.00 avg300=0.00 total="+strconv.Itoa(total)+"\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	}
	setEvents := func(high, oom int) {
		write(events, "low 0\nhigh "+strconv.Itoa(high)+"\nmax 0\noom "+strconv.Itoa(oom)+"\noom_kill 0\n")
	}
	var reasons []string
	relieved := 0
	w := NewPressureWatcher(PressureOptions{PSI: psi, Events: events, ReliefAfter: 10 * time.Second,
		OnPressure: func(r string) { reasons = append(reasons, r) },
		OnRelief:   func() { relieved++ }})
	t0 := time.Unix(1000, 0)
	step := func(sec int) { w.Sample(t0.Add(time.Duration(sec) * time.Second)) }

	setPSI(5_000_000)
	setEvents(3, 0)
	step(0) // baseline: old totals are not pressure
	setPSI(5_050_000)
	step(1) // 5% stalled: below 10%
	if len(reasons) != 0 {
		t.Fatalf("pressure from the baseline or a 5%% stall: %q", reasons)
	}
	setPSI(5_400_000)
	step(2) // 35%
	if len(reasons) != 1 || !strings.Contains(reasons[0], "stalled on memory 35% of the last 1s") {
		t.Fatalf("35%% stall: %q", reasons)
	}
	setEvents(5, 0)
	step(3) // memory.high crossed twice
	if len(reasons) != 2 || !strings.Contains(reasons[1], "memory.events: high +2") {
		t.Fatalf("memory.events: %q", reasons)
	}
	step(12) // 9s quiet
	if relieved != 0 {
		t.Fatal("relief before ReliefAfter")
	}
	step(13)
	step(14)
	if relieved != 1 {
		t.Fatalf("relieved %d times after 10s quiet, want once", relieved)
	}

	// Missing files: no pressure, no panic.
	w = NewPressureWatcher(PressureOptions{PSI: filepath.Join(dir, "none"), Events: "-",
		OnPressure: func(r string) { t.Errorf("pressure from nothing: %s", r) }})
	w.Sample(t0)
	w.Sample(t0.Add(time.Second))
	w.Close()
}
