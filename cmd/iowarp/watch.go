package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

// `iowarp stat --watch [INTERVAL]` asks the daemon for its statistics and
// its top files by dirty bytes every INTERVAL and shows them with the
// per-second rates since the last refresh: redrawn in place on a
// terminal, as plain blocks one after the other otherwise (a log, a pipe).

// defaultWatch is the refresh interval of a bare --watch.
const defaultWatch = 2 * time.Second

// watchArgs splits the positional arguments of `stat --watch`: an
// interval ("2", "500ms", "1.5s") and a path, in either order, each
// optional. flagVal is --watch's own value ("" when given bare).
func watchArgs(args []string, flagVal string) (path string, every time.Duration, err error) {
	every = defaultWatch
	if flagVal != "" {
		if every, err = parseInterval(flagVal); err != nil {
			return "", 0, err
		}
	}
	for _, a := range args {
		if looksLikeInterval(a) {
			if every, err = parseInterval(a); err != nil {
				return "", 0, err
			}
			continue
		}
		if path != "" {
			return "", 0, fmt.Errorf("stat --watch: two paths (%s, %s)", path, a)
		}
		path = a
	}
	return path, every, nil
}

// looksLikeInterval: a number of seconds or a Go duration, not a path.
func looksLikeInterval(s string) bool {
	_, derr := time.ParseDuration(s)
	_, ferr := strconv.ParseFloat(s, 64)
	return derr == nil || ferr == nil
}

// parseInterval reads "2" (seconds), "0.5" or a Go duration ("500ms").
func parseInterval(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, fmt.Errorf("--watch: %q is not an interval (2, 0.5, 500ms, 1m)", s)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 10*time.Millisecond {
		return 0, fmt.Errorf("--watch: interval %v is shorter than 10ms", d)
	}
	return d, nil
}

// sample is one refresh: what the daemon answered and when.
type sample struct {
	at  time.Time
	st  files.Stats
	top []files.FileDirty
}

// watcher draws the refreshes of one daemon.
type watcher struct {
	d     daemonRef
	w     io.Writer
	tty   bool // redraw in place
	every time.Duration
	prev  *sample
}

// run draws count refreshes (0: until an error, the daemon going away or
// the process being interrupted).
func (wt *watcher) run(count int) error {
	for i := 0; count == 0 || i < count; i++ {
		if i > 0 {
			time.Sleep(wt.every)
		}
		s, err := wt.fetch()
		if err != nil {
			return err
		}
		if err := wt.draw(s); err != nil {
			return err
		}
		wt.prev = s
	}
	return nil
}

func (wt *watcher) fetch() (*sample, error) {
	s := &sample{}
	if err := control.Call(wt.d.Socket, "stats", &s.st); err != nil {
		return nil, err
	}
	// An older daemon has no "top": the view goes on without it.
	control.Call(wt.d.Socket, "top", &s.top)
	s.at = time.Now()
	return s, nil
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

func (wt *watcher) draw(s *sample) error {
	var b strings.Builder
	if wt.tty {
		b.WriteString(clearScreen)
	}
	renderWatch(&b, wt.d.Info, wt.prev, s, wt.every)
	if !wt.tty {
		b.WriteByte('\n')
	}
	_, err := io.WriteString(wt.w, b.String())
	return err
}

// renderWatch writes one refresh: the header, the tiers, the counters with
// their rates since prev (nil: the first refresh, no rates yet), the top
// files by dirty bytes.
func renderWatch(w io.Writer, info Info, prev, cur *sample, every time.Duration) {
	st := cur.st
	fmt.Fprintf(w, "%s  %s  mode %s  pid %d  up %v  every %v\n\n", cur.at.Format("15:04:05"), orDash(info.Mount),
		st.Mode, info.Pid, cur.at.Sub(info.Started).Round(time.Second), every)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TIER\tCAPACITY\tUSED\tUSE%\tDIRTY\tBLOBS\tPROMOTED/s\tDEMOTED/s\tEVICTED/s\t")
	for i, ts := range st.Pool.Tiers {
		pct := 0.0
		if ts.Capacity > 0 {
			pct = 100 * float64(ts.Used) / float64(ts.Capacity)
		}
		moves := [3]string{"-", "-", "-"}
		if prev != nil && i < len(prev.st.Pool.Tiers) {
			o := prev.st.Pool.Tiers[i]
			moves = [3]string{countRate(prev, cur, o.Promoted, ts.Promoted), countRate(prev, cur, o.Demoted, ts.Demoted),
				countRate(prev, cur, o.Evicted, ts.Evicted)}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%d\t%s\t%s\t%s\t\n", ts.Name, units.FormatSize(ts.Capacity),
			units.FormatSize(ts.Used), pct, units.FormatSize(ts.Dirty), ts.Blobs, moves[0], moves[1], moves[2])
	}
	tw.Flush()
	fmt.Fprintf(w, "\ndirty %s   flush backlog %d files   open files %d   flush errors %d\n\n",
		units.FormatSize(st.DirtyBytes), st.FlushBacklog, st.OpenFiles, st.FlushErrors)
	renderCounters(w, prev, cur)
	renderTop(w, cur.top)
}

// counter is one line of the counters table.
type counter struct {
	name  string
	bytes bool
	get   func(*files.Stats) uint64
}

var watchCounters = []counter{
	{"written by apps", true, func(s *files.Stats) uint64 { return s.BytesWritten }},
	{"read by apps", true, func(s *files.Stats) uint64 { return s.BytesRead }},
	{"flushed", true, func(s *files.Stats) uint64 { return s.FlushedBytes }},
	{"staged in", true, func(s *files.Stats) uint64 { return s.StagedBytes }},
	{"read hits", false, func(s *files.Stats) uint64 { return s.ReadHits }},
	{"read misses", false, func(s *files.Stats) uint64 { return s.ReadMisses }},
	{"pool hits", false, func(s *files.Stats) uint64 { return s.Pool.Hits }},
	{"pool misses", false, func(s *files.Stats) uint64 { return s.Pool.Misses }},
	{"prefetch hits", false, func(s *files.Stats) uint64 { return s.PrefetchHits }},
}

func renderCounters(w io.Writer, prev, cur *sample) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tTOTAL\tPER SECOND\t")
	for _, c := range watchCounters {
		now := c.get(&cur.st)
		total, rate := strconv.FormatUint(now, 10), "-"
		if c.bytes {
			total = units.FormatSize(int64(now))
		}
		if prev != nil {
			if c.bytes {
				rate = byteRate(prev, cur, c.get(&prev.st), now)
			} else {
				rate = countRate(prev, cur, c.get(&prev.st), now)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", c.name, total, rate)
	}
	tw.Flush()
}

// perSecond is the increase from a to b over the time between the samples
// (a counter that went back, a restarted daemon, counts as 0).
func perSecond(prev, cur *sample, a, b uint64) float64 {
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 || b < a {
		return 0
	}
	return float64(b-a) / dt
}

func byteRate(prev, cur *sample, a, b uint64) string {
	return units.FormatSize(int64(perSecond(prev, cur, a, b))) + "/s"
}

func countRate(prev, cur *sample, a, b uint64) string {
	return strconv.FormatFloat(perSecond(prev, cur, a, b), 'f', 1, 64)
}

func renderTop(w io.Writer, top []files.FileDirty) {
	fmt.Fprintf(w, "\ntop files by dirty bytes:")
	if len(top) == 0 {
		fmt.Fprintln(w, " none dirty")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  DIRTY\tSIZE\tFILE")
	for _, f := range top {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", units.FormatSize(f.DirtyBytes), units.FormatSize(f.Size), f.Path)
	}
	tw.Flush()
}
