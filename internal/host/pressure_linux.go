package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory pressure. The daemon's RAM tier is memory the kernel cannot
// reclaim; when the machine or the daemon's cgroup runs short of memory,
// tasks stall on reclaim (PSI, /proc/pressure/memory or the cgroup's
// memory.pressure) and a cgroup over memory.high or memory.max counts
// events (memory.events). A PressureWatcher samples both every Interval and
// calls OnPressure when either rises, so that the daemon moves RAM pages
// down a tier before the OOM killer takes it; OnRelief once no pressure
// was seen for ReliefAfter. Sampling, not PSI triggers: triggers need
// privileges some kernels and containers refuse, and one read of two small
// files a second costs nothing.

// PressureOptions configures a PressureWatcher. Zero values take the
// defaults.
type PressureOptions struct {
	// PSI is a PSI file (memory.pressure of the cgroup, else
	// /proc/pressure/memory); Events a cgroup v2 memory.events. ""
	// finds them from /proc/self/cgroup; "-" disables one.
	PSI, Events string
	// Interval between samples (1s).
	Interval time.Duration
	// Stall: the fraction of an interval during which some task waited
	// for memory that counts as pressure (0.1).
	Stall float64
	// ReliefAfter: how long without pressure before OnRelief (30s).
	ReliefAfter time.Duration
	OnPressure  func(reason string)
	OnRelief    func()
}

// PressureWatcher samples memory pressure; see PressureOptions. Close
// stops it. Sample is not safe for concurrent use; the watcher's own
// goroutine is its only caller once started.
type PressureWatcher struct {
	opt PressureOptions

	last     time.Time // previous sample
	stallUS  int64     // PSI "some" total at last, -1 unknown
	events   map[string]int64
	pressed  time.Time // last pressure seen
	shedding bool      // OnPressure called, OnRelief not yet

	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started bool
}

// NewPressureWatcher returns a watcher that has not started (tests drive
// it with Sample); Start runs it.
func NewPressureWatcher(opt PressureOptions) *PressureWatcher {
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	if opt.Stall <= 0 {
		opt.Stall = 0.1
	}
	if opt.ReliefAfter <= 0 {
		opt.ReliefAfter = 30 * time.Second
	}
	if opt.PSI == "" || opt.Events == "" {
		psi, events := pressureFiles()
		if opt.PSI == "" {
			opt.PSI = psi
		}
		if opt.Events == "" {
			opt.Events = events
		}
	}
	return &PressureWatcher{opt: opt, stallUS: -1, stop: make(chan struct{}), done: make(chan struct{})}
}

// Sources names the files the watcher reads ("" if none).
func (w *PressureWatcher) Sources() string {
	var s []string
	for _, p := range []string{w.opt.PSI, w.opt.Events} {
		if p != "-" && p != "" {
			s = append(s, p)
		}
	}
	return strings.Join(s, ", ")
}

// Start samples every Interval until Close.
func (w *PressureWatcher) Start() *PressureWatcher {
	w.started = true
	go func() {
		defer close(w.done)
		tk := time.NewTicker(w.opt.Interval)
		defer tk.Stop()
		w.Sample(time.Now())
		for {
			select {
			case <-w.stop:
				return
			case now := <-tk.C:
				w.Sample(now)
			}
		}
	}()
	return w
}

// Close stops a started watcher and waits for it.
func (w *PressureWatcher) Close() {
	w.once.Do(func() {
		close(w.stop)
		if w.started {
			<-w.done
		}
	})
}

// Sample reads the pressure files once, taken at now, and calls the
// callbacks. The first sample only sets the baseline.
func (w *PressureWatcher) Sample(now time.Time) {
	reason := w.psiPressure(now)
	if r := w.eventsPressure(); r != "" {
		reason = strings.TrimPrefix(reason+"; "+r, "; ")
	}
	w.last = now
	switch {
	case reason != "":
		w.pressed, w.shedding = now, true
		if w.opt.OnPressure != nil {
			w.opt.OnPressure(reason)
		}
	case w.shedding && now.Sub(w.pressed) >= w.opt.ReliefAfter:
		w.shedding = false
		if w.opt.OnRelief != nil {
			w.opt.OnRelief()
		}
	}
}

// psiPressure compares the "some" stall time with the previous sample.
func (w *PressureWatcher) psiPressure(now time.Time) string {
	total, ok := readPSISome(w.opt.PSI)
	if !ok {
		return ""
	}
	prev, elapsed := w.stallUS, now.Sub(w.last)
	w.stallUS = total
	if prev < 0 || elapsed <= 0 || total < prev {
		return ""
	}
	share := float64(total-prev) / float64(elapsed.Microseconds())
	if share < w.opt.Stall {
		return ""
	}
	return fmt.Sprintf("tasks stalled on memory %.0f%% of the last %v (%s)", 100*share,
		elapsed.Round(time.Millisecond), w.opt.PSI)
}

// eventsPressure reports the memory.events counters that rose.
func (w *PressureWatcher) eventsPressure() string {
	ev, ok := readKeyed(w.opt.Events)
	if !ok {
		return ""
	}
	prev := w.events
	w.events = ev
	if prev == nil {
		return ""
	}
	var rose []string
	for _, k := range []string{"high", "max", "oom", "oom_kill"} {
		if d := ev[k] - prev[k]; d > 0 {
			rose = append(rose, fmt.Sprintf("%s +%d", k, d))
		}
	}
	if len(rose) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %s", w.opt.Events, strings.Join(rose, ", "))
}

// readPSISome returns the "some ... total=N" of a PSI file, microseconds.
func readPSISome(p string) (int64, bool) {
	if p == "" || p == "-" {
		return 0, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// readKeyed reads a "key value" per line cgroup file.
func readKeyed(p string) (map[string]int64, bool) {
	if p == "" || p == "-" {
		return nil, false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	m := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 {
			if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[f[0]] = n
			}
		}
	}
	return m, true
}

// pressureFiles finds this process's cgroup v2 memory.pressure and
// memory.events, and falls back to the machine's /proc/pressure/memory.
func pressureFiles() (psi, events string) {
	psi, events = "-", "-"
	if _, err := os.Stat("/proc/pressure/memory"); err == nil {
		psi = "/proc/pressure/memory"
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return psi, events
	}
	for _, line := range strings.Split(string(cg), "\n") {
		rel, ok := strings.CutPrefix(line, "0::")
		if !ok || rel == "/" {
			continue
		}
		for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			dir := path.Join(root, rel)
			if _, err := os.Stat(path.Join(dir, "memory.events")); err != nil {
				continue
			}
			events = path.Join(dir, "memory.events")
			if _, err := os.Stat(path.Join(dir, "memory.pressure")); err == nil {
				psi = path.Join(dir, "memory.pressure")
			}
			return psi, events
		}
	}
	return psi, events
}
