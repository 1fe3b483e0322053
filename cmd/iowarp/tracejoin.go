package main

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/iowarp/iowarp/adapters/ebpf"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

// poolSide is what the daemons of this user's iowarp mounts did per file
// at one moment (their "fileio" counters), by absolute path.
type poolSide map[string]files.FileIO

// snapshotPools asks every daemon with a mount in dir ("" = the default
// control directory) for its per-file counters; a daemon that does not
// answer is left out.
func snapshotPools(dir string) poolSide {
	if dir == "" {
		dir = control.DefaultDir()
	}
	out := poolSide{}
	ds, err := daemons(dir)
	if err != nil {
		return out
	}
	for _, d := range ds {
		if d.Mount == "" || d.Err != "" {
			continue
		}
		var fio []files.FileIO
		if control.CallWithin(d.Socket, "fileio", &fio, listTimeout) != nil {
			continue
		}
		for _, f := range fio {
			out[filepath.Join(d.Mount, f.Path)] = f
		}
	}
	return out
}

// writePoolSide prints, for the traced files that lie on an iowarp mount,
// what the pool did for them over the trace (after - before): the join of
// the application's side (the trace) with the buffer pool's.
func writePoolSide(w io.Writer, a *ebpf.Aggregator, before, after poolSide) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	rows := 0
	for _, f := range a.Files() {
		now, ok := after[f.Path]
		if !ok {
			continue
		}
		d := now.Sub(before[f.Path])
		if d.Idle() {
			continue
		}
		if rows == 0 {
			fmt.Fprintln(tw, "pool side (iowarp mounts), same interval:")
			fmt.Fprintln(tw, "hits\tRAM\tfile tier\tmisses\tread via daemon\twritten via daemon\tstaged in (reads)\twritten back\t  file")
		}
		rows++
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s (%d)\t%s\t  %s\n", d.Hits, d.RAMHits, d.FileHits, d.Misses,
			units.FormatSize(int64(d.BytesRead)), units.FormatSize(int64(d.BytesWritten)),
			units.FormatSize(int64(d.StagedBytes)), d.StageReads, units.FormatSize(int64(d.WrittenBack)), f.Path)
	}
	if rows > 0 {
		return tw.Flush()
	}
	onMount := false
	for _, f := range a.Files() {
		if _, ok := after[f.Path]; ok {
			onMount = true
		}
	}
	if onMount {
		_, err := fmt.Fprintln(w, "pool side: the daemon did nothing for the traced files in this interval (reads the shim served from shared memory do not reach it)")
		return err
	}
	return nil
}

// tierInterval is how often `trace --html` samples the pools' tiers.
const tierInterval = 100 * time.Millisecond

// sampleTiers asks every daemon with a mount in dir ("" = the default
// control directory) for the use of its tiers, at once and then every
// interval until stop is closed, and one last time; the samples come on
// the channel returned, for the timeline. A daemon that does not answer
// is left out of that sample.
func sampleTiers(dir string, interval time.Duration, stop <-chan struct{}) <-chan []ebpf.TierSample {
	if dir == "" {
		dir = control.DefaultDir()
	}
	out := make(chan []ebpf.TierSample, 1)
	go func() {
		var samples []ebpf.TierSample
		ds, _ := daemons(dir)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for done := false; ; {
			for _, d := range ds {
				if s, ok := tierSample(d); ok {
					samples = append(samples, s)
				}
			}
			if done {
				out <- samples
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				done = true
			}
		}
	}()
	return out
}

// tierSample is the use of d's tiers now.
func tierSample(d daemonRef) (ebpf.TierSample, bool) {
	if d.Mount == "" || d.Err != "" {
		return ebpf.TierSample{}, false
	}
	var st files.Stats
	if control.CallWithin(d.Socket, "stats", &st, listTimeout) != nil {
		return ebpf.TierSample{}, false
	}
	s := ebpf.TierSample{Time: ebpf.Now(), Mount: d.Mount}
	for _, t := range st.Pool.Tiers {
		s.Tiers = append(s.Tiers, ebpf.TierUse{Name: t.Name, Kind: t.Kind, Used: t.Used, Capacity: t.Capacity})
	}
	return s, true
}
