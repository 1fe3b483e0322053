package ebpf

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/units"
)

// Timeline keeps the events of a trace, compactly, for the picture
// (WriteHTML): at most maxSamples; past that they are counted as dropped
// and the page says so.
type Timeline struct {
	samples []sample
	rows    map[rowKey]int32
	keys    []rowKey
	Dropped int64
	tiers   []TierSample
}

// TierSample is the use of one daemon's tiers at one moment (Now's
// clock), drawn under the calls.
type TierSample struct {
	Time  time.Duration
	Mount string
	Tiers []TierUse
}

// TierUse is one tier's bytes in use of its capacity.
type TierUse struct {
	Name, Kind     string
	Used, Capacity int64
}

// Now is the time on the events' clock (CLOCK_MONOTONIC).
func Now() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// AddTiers records a sample of the pool's tier use.
func (tl *Timeline) AddTiers(s TierSample) { tl.tiers = append(tl.tiers, s) }

type rowKey struct {
	pid  int
	file string
}

type sample struct {
	start, end time.Duration
	row        int32
	kind       Kind
	bytes      int64
}

const (
	maxSamples = 1 << 20
	maxRows    = 500
)

// NewTimeline returns an empty timeline.
func NewTimeline() *Timeline { return &Timeline{rows: map[rowKey]int32{}} }

// Add records e, attributed to file (the aggregator's path of its fd or
// path; "" for calls on no file, which are not drawn).
func (tl *Timeline) Add(e Event, file string) {
	if file == "" {
		return
	}
	switch e.Call.Kind {
	case KindRead, KindPRead, KindWrite, KindPWrite, KindSync, KindOpen, KindMeta:
	default:
		return
	}
	if len(tl.samples) >= maxSamples {
		tl.Dropped++
		return
	}
	k := rowKey{e.Pid, file}
	r, ok := tl.rows[k]
	if !ok {
		r = int32(len(tl.keys))
		tl.rows[k] = r
		tl.keys = append(tl.keys, k)
	}
	n := int64(0)
	if e.Ret > 0 && e.Call.Kind >= KindRead && e.Call.Kind <= KindPWrite {
		n = e.Ret
	}
	tl.samples = append(tl.samples, sample{start: e.Time - e.Latency, end: e.Time, row: r, kind: e.Call.Kind, bytes: n})
}

// kindClass names a sample's kind for the page (and its colour).
func kindClass(k Kind) string {
	switch k {
	case KindRead, KindPRead:
		return "read"
	case KindWrite, KindPWrite:
		return "write"
	case KindSync:
		return "sync"
	}
	return "meta"
}

// WriteHTML writes the trace as one self-contained page (inline SVG and
// CSS, no script, nothing fetched): a timeline with one row per process
// and file, the calls drawn as marks coloured by kind over the trace's
// time (calls close together merge into one mark per pixel column), and
// the per-file table under it. title heads the page.
func (tl *Timeline) WriteHTML(w io.Writer, a *Aggregator, title string) error {
	const width, rowH, left = 1000, 18, 360
	var t0, t1 time.Duration
	for i, s := range tl.samples {
		if i == 0 || s.start < t0 {
			t0 = s.start
		}
		t1 = max(t1, s.end)
	}
	span := max(t1-t0, time.Microsecond)
	// Rows of files that were read, written or synced (a PATH search
	// stats dozens of names that would drown them), at most maxRows.
	var order []int32
	for i, k := range tl.keys {
		if f := a.files[k.file]; k.file != "" && f != nil && f.Reads+f.Writes+f.Syncs > 0 {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(x, y int32) int {
		kx, ky := tl.keys[x], tl.keys[y]
		if kx.pid != ky.pid {
			return kx.pid - ky.pid
		}
		return strings.Compare(kx.file, ky.file)
	})
	hidden := 0
	if len(order) > maxRows {
		hidden, order = len(order)-maxRows, order[:maxRows]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:13px system-ui,sans-serif;margin:1em}
.read{fill:#2b6cb0}.write{fill:#dd6b20}.sync{fill:#c53030}.meta{fill:#a0aec0}
.lab{font:11px monospace;fill:#222}
.occ{fill:none;stroke:#2f855a;stroke-width:1.5}.cap{fill:#f0fff4;stroke:#c6f6d5}
table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}td.f{text-align:left;font-family:monospace}
</style></head><body>
<h1>%s</h1>
<p id="span">%d calls, %d rows of process and file with I/O, over %v (%s)</p>
`, html.EscapeString(title), html.EscapeString(title), len(tl.samples), len(order), span.Round(time.Microsecond), legend())
	if hidden > 0 {
		fmt.Fprintf(&b, "<p id=\"hidden\">%d more rows not drawn</p>\n", hidden)
	}
	if tl.Dropped > 0 {
		fmt.Fprintf(&b, "<p id=\"dropped\">%d further calls not drawn (the timeline keeps %d)</p>\n", tl.Dropped, maxSamples)
	}
	tiers := tl.tierRows()
	h := len(order)*rowH + len(tiers)*tierH + 30
	fmt.Fprintf(&b, "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\">\n", left+width+10, h)
	for i, r := range order {
		k := tl.keys[r]
		y := i*rowH + 4
		name := k.file
		if len(name) > 48 {
			name = "…" + name[len(name)-47:]
		}
		fmt.Fprintf(&b, "<g class=\"row\" data-pid=\"%d\" data-file=\"%s\"><text class=\"lab\" x=\"0\" y=\"%d\">%d %s</text>\n",
			k.pid, html.EscapeString(k.file), y+12, k.pid, html.EscapeString(name))
		// One mark per pixel column and kind: merge the row's samples.
		cols := map[[2]int]bool{}
		for _, s := range tl.samples {
			if s.row != r {
				continue
			}
			x0 := int(int64(s.start-t0) * width / int64(span))
			x1 := max(int(int64(s.end-t0)*width/int64(span)), x0)
			for x := x0; x <= x1 && x < width; x++ {
				key := [2]int{x, int(s.kind)}
				if cols[key] {
					continue
				}
				cols[key] = true
				fmt.Fprintf(&b, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"1\" height=\"%d\"/>", kindClass(s.kind), left+x, y, rowH-4)
			}
		}
		b.WriteString("</g>\n")
	}
	for j, k := range tiers {
		tl.writeTierRow(&b, k, len(order)*rowH+j*tierH+4, t0, span)
	}
	fmt.Fprintf(&b, "<text class=\"lab\" x=\"%d\" y=\"%d\">0</text><text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">%v</text>\n",
		left, h-6, left+width, h-6, span.Round(time.Microsecond))
	b.WriteString("</svg>\n<table id=\"files\"><tr><th>read</th><th>written</th><th>reads</th><th>writes</th><th>seq</th><th>I/O time</th><th>file</th></tr>\n")
	for _, f := range a.Files() {
		if f.Reads+f.Writes == 0 {
			continue
		}
		fmt.Fprintf(&b, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%.0f%%</td><td>%v</td><td class=\"f\">%s</td></tr>\n",
			f.BytesRead, f.BytesWritten, f.Reads, f.Writes, 100*f.Sequential(), f.IOTime().Round(time.Microsecond), html.EscapeString(f.Path))
	}
	b.WriteString("</table>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

const tierH = 40 // height of a tier's occupancy row

// tierKey is one daemon's tier.
type tierKey struct{ mount, name string }

// tierRows are the tiers sampled, in the order first seen.
func (tl *Timeline) tierRows() []tierKey {
	var out []tierKey
	seen := map[tierKey]bool{}
	for _, s := range tl.tiers {
		for _, u := range s.Tiers {
			if k := (tierKey{s.Mount, u.Name}); !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

// writeTierRow draws tier k's use over the trace as a line in its
// capacity's box (full height: full), at y.
func (tl *Timeline) writeTierRow(b *strings.Builder, k tierKey, y int, t0, span time.Duration) {
	const width, left = 1000, 360
	var pts []string
	var last TierUse
	for _, s := range tl.tiers {
		for _, u := range s.Tiers {
			if s.Mount != k.mount || u.Name != k.name || u.Capacity <= 0 {
				continue
			}
			x := min(max(int(int64(s.Time-t0)*width/int64(span)), 0), width)
			yy := y + tierH - 6 - int(min(u.Used, u.Capacity)*int64(tierH-8)/u.Capacity)
			pts = append(pts, fmt.Sprintf("%d,%d", left+x, yy))
			last = u
		}
	}
	fmt.Fprintf(b, "<g class=\"tier\" data-mount=\"%s\" data-tier=\"%s\" data-kind=\"%s\" data-samples=\"%d\">"+
		"<text class=\"lab\" x=\"0\" y=\"%d\">%s tier %s: %s of %s</text>"+
		"<rect class=\"cap\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>"+
		"<polyline class=\"occ\" points=\"%s\"/></g>\n",
		html.EscapeString(k.mount), html.EscapeString(k.name), html.EscapeString(last.Kind), len(pts),
		y+14, html.EscapeString(k.mount), html.EscapeString(k.name), units.FormatSize(last.Used), units.FormatSize(last.Capacity),
		left, y+2, width, tierH-8, strings.Join(pts, " "))
}

func legend() string {
	return `<span style="color:#2b6cb0">■ read</span> <span style="color:#dd6b20">■ write</span> ` +
		`<span style="color:#c53030">■ fsync</span> <span style="color:#a0aec0">■ open/stat/other</span> ` +
		`<span style="color:#2f855a">— tier use (of its capacity)</span>`
}

// rename moves pid's row of file from to file to (a placeholder named
// once the fork that passed the fd was seen).
func (tl *Timeline) rename(pid int, from, to string) {
	r, ok := tl.rows[rowKey{pid, from}]
	if !ok {
		return
	}
	delete(tl.rows, rowKey{pid, from})
	k := rowKey{pid, to}
	if r2, ok := tl.rows[k]; ok {
		for i := range tl.samples {
			if tl.samples[i].row == r {
				tl.samples[i].row = r2
			}
		}
		tl.keys[r] = rowKey{pid, ""} // unused row, not drawn
		return
	}
	tl.keys[r] = k
	tl.rows[k] = r
}
