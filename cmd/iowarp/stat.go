package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// pathArg is the positional path of a command, "" if none.
func pathArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func newStatCmd() *cobra.Command {
	var s selector
	var asJSON bool
	var watch string
	var count int
	cmd := &cobra.Command{
		Use:   "stat [PATH] [--watch [INTERVAL]]",
		Short: "Show per-tier capacity, use, dirty bytes, hits and misses of a running mount (the one holding PATH); --watch refreshes",
		Args:  cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("watch") {
				return watchMain(&s, args, watch, count)
			}
			if len(args) > 1 {
				return fmt.Errorf("stat takes one path (an interval only with --watch)")
			}
			d, err := s.pick(pathArg(args))
			if err != nil {
				return err
			}
			if asJSON {
				var raw json.RawMessage
				if err := control.Call(d.Socket, "stats", &raw); err != nil {
					return err
				}
				_, err := fmt.Fprintf(os.Stdout, "%s\n", raw)
				return err
			}
			var st files.Stats
			if err := control.Call(d.Socket, "stats", &st); err != nil {
				return err
			}
			return printStats(os.Stdout, d.Info, st)
		},
	}
	s.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the raw statistics as JSON")
	f.StringVarP(&watch, "watch", "w", "", "refresh every INTERVAL (default 2s; also as an argument: --watch 1): in place on a terminal, as plain blocks otherwise")
	f.Lookup("watch").NoOptDefVal = defaultWatch.String()
	f.IntVar(&count, "count", 0, "with --watch: stop after this many refreshes (0 = until interrupted)")
	return cmd
}

// watchMain is `stat --watch`.
func watchMain(s *selector, args []string, flagVal string, count int) error {
	path, every, err := watchArgs(args, flagVal)
	if err != nil {
		return err
	}
	d, err := s.pick(path)
	if err != nil {
		return err
	}
	wt := &watcher{d: d, w: os.Stdout, tty: term.IsTerminal(int(os.Stdout.Fd())), every: every}
	return wt.run(count)
}

func printStats(w io.Writer, info Info, st files.Stats) error {
	fmt.Fprintf(w, "%s  mode %s  backing %s  pid %d  up %v\n\n", info.Mount, st.Mode, info.Backing,
		info.Pid, time.Since(info.Started).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TIER\tKIND\tCAPACITY\tUSED\tUSE%\tDIRTY\tBLOBS\tPROMOTED\tDEMOTED\tEVICTED\t")
	for _, ts := range st.Pool.Tiers {
		pct := 0.0
		if ts.Capacity > 0 {
			pct = 100 * float64(ts.Used) / float64(ts.Capacity)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%s\t%d\t%d\t%d\t%d\t\n", ts.Name, ts.Kind,
			units.FormatSize(ts.Capacity), units.FormatSize(ts.Used), pct, units.FormatSize(ts.Dirty),
			ts.Blobs, ts.Promoted, ts.Demoted, ts.Evicted)
	}
	tw.Flush()
	for _, ts := range st.Pool.Tiers {
		if ts.Ceiling > 0 {
			fmt.Fprintf(w, "memory pressure: tier %s held at %s until it passes\n", ts.Name, units.FormatSize(ts.Ceiling))
		}
	}
	fmt.Fprintf(w, "\ndirty %s   flush backlog %d files   written back %s   staged in %s   flush errors %d\n",
		units.FormatSize(st.DirtyBytes), st.FlushBacklog, units.FormatSize(int64(st.FlushedBytes)),
		units.FormatSize(int64(st.StagedBytes)), st.FlushErrors)
	_, err := fmt.Fprintf(w, "reads: %d hits, %d misses (pool: %d hits, %d misses)   read %s   written %s   open files %d\n",
		st.ReadHits, st.ReadMisses, st.Pool.Hits, st.Pool.Misses, units.FormatSize(int64(st.BytesRead)),
		units.FormatSize(int64(st.BytesWritten)), st.OpenFiles)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "read-ahead: %d pages (%s) staged ahead, %d prefetch hits, %d wasted (evicted or dropped unread)\n",
		st.PrefetchedPages, units.FormatSize(int64(st.PrefetchedBytes)), st.PrefetchHits, st.PrefetchWasted)
	if l := st.Learned; l.HistoriesLoaded+l.HistoriesSaved+l.HistoriesDiscarded > 0 {
		fmt.Fprintf(w, "learned prefetch: %d histories replayed, %d saved, %d discarded; %d pages staged ahead, %d hits, %d placed hot\n",
			l.HistoriesLoaded, l.HistoriesSaved, l.HistoriesDiscarded, l.StagedPages, l.Hits, l.HotPages)
	}
	fmt.Fprintf(w, "stage-in: %s with O_DIRECT; %d small cold reads served from the backing file, %d pages staged in behind them\n",
		units.FormatSize(int64(st.StagedDirect)), st.ReadAround, st.StagedBehind)
	printIntegrity(w, st)
	if l := st.Pool.LeaseStats; l.LeaseRefills > 0 {
		fmt.Fprintf(w, "shim leases: %s reserved now, %d refills, %d returned (%s), %d new pages adopted, %d dropped (created past a lease)\n",
			units.FormatSize(l.LeaseBytes), l.LeaseRefills, l.LeasesReturned, units.FormatSize(int64(l.LeaseReturnedBytes)),
			l.ShimPagesAdopted, l.ShimPagesDropped)
	}
	if r := st.Replay; r != nil {
		fmt.Fprintf(w, "at start: replayed %d pages (%s) of %d files from the file tier of a killed daemon; %d pages skipped, %d files failed, %s of its tier files reclaimed\n",
			r.Pages, units.FormatSize(r.Bytes), r.Files, r.Skipped, r.Failed, units.FormatSize(r.Reclaimed))
	}
	if wb := st.LongestWriteBack; wb != nil && time.Since(wb.Since) >= slowWriteBack {
		fmt.Fprintf(w, "\nwrite-back of %s running for %v: the backing store is slow or hangs\n",
			wb.Path, time.Since(wb.Since).Round(time.Second))
	}
	if st.FailingCount == 0 {
		return nil
	}
	return printFailing(w, st)
}

// printIntegrity shows what the checksums caught and what compression
// saves, per tier: lines only where there is something to say.
func printIntegrity(w io.Writer, st files.Stats) {
	if n := st.BackingChecksumErrors + st.TierChecksumErrors; n > 0 {
		fmt.Fprintf(w, "CHECKSUM ERRORS: %d pages staged in from the backing file did not match their write-back crc32c (EIO); "+
			"%d reads of slower tiers did not match, %d of them repaired from the backing file (the rest EIO); see the log\n",
			st.BackingChecksumErrors, st.TierChecksumErrors, st.Repaired)
	}
	for _, ts := range st.Pool.Tiers {
		if ts.Compressed > 0 {
			fmt.Fprintf(w, "compression: tier %s holds %d blobs (%s) compressed in %s: ratio %.2f, %s saved; %d blobs checksummed\n",
				ts.Name, ts.Compressed, units.FormatSize(ts.CompressedBytes), units.FormatSize(ts.CompressedBytes-ts.SavedBytes),
				ts.Ratio(), units.FormatSize(ts.SavedBytes), ts.Checksummed)
		}
	}
}

// slowWriteBack is how long one write-back of a file runs before stat
// calls the backing store slow.
const slowWriteBack = 10 * time.Second

// printFailing lists the files whose write-back is failing: their data
// are held dirty in the pool until the backing store takes them.
func printFailing(w io.Writer, st files.Stats) error {
	fmt.Fprintf(w, "\nwrite-back FAILING for %d files, %s stuck dirty in the pool (retried; fsync returns the error):\n",
		st.FailingCount, units.FormatSize(st.StuckDirtyBytes))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tCAUSE\tDIRTY\tFAILING FOR\tATTEMPTS\tLAST ERROR")
	for _, ff := range st.FailingFiles {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%s\n", ff.Path, ff.Errno, units.FormatSize(ff.DirtyBytes),
			time.Since(ff.Since).Round(time.Second), ff.Attempts, ff.Error)
	}
	if more := st.FailingCount - len(st.FailingFiles); more > 0 {
		fmt.Fprintf(tw, "... %d more\n", more)
	}
	return tw.Flush()
}

func newStatusCmd() *cobra.Command {
	var s selector
	cmd := &cobra.Command{
		Use:   "status [PATH]",
		Short: "Say which daemon serves PATH (default: the only one); exit 1 if none",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := s.pick(pathArg(args))
			if err != nil {
				return err
			}
			info := d.Info
			if info.Mount == "" {
				fmt.Printf("runtime without a mount: pid %d (iowarp %s, config %q) since %s\n",
					info.Pid, info.Version, info.Config, info.Started.Format(time.RFC3339))
			} else {
				fmt.Printf("%s: served by pid %d (iowarp %s, %s, backing %s, config %q) since %s\n", info.Mount,
					info.Pid, info.Version, info.Mode, info.Backing, info.Config, info.Started.Format(time.RFC3339))
			}
			if info.Metrics != "" {
				fmt.Printf("metrics: http://%s/metrics\n", info.Metrics)
			}
			printIPCStatus(os.Stdout, d.IPCSocket())
			return nil
		},
	}
	s.register(cmd)
	return cmd
}

// printIPCStatus adds the runtime's task and ipc counters (admin.status
// over the ipc socket next to the control socket), or says why not.
func printIPCStatus(w io.Writer, sock string) {
	c, err := client.Connect(client.Options{Socket: sock})
	if err != nil {
		fmt.Fprintf(w, "ipc: not reachable (%v)\n", err)
		return
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		fmt.Fprintf(w, "ipc: admin.status: %v\n", err)
		return
	}
	fmt.Fprintf(w, "runtime: %d modules (%s), tasks: %d in flight, %d completed, %d failed\n", st.Tasks.Modules,
		strings.Join(st.Modules, ", "), st.Tasks.InFlight, st.Tasks.Completed, st.Tasks.Failed)
	var is ipc.Stats
	raw, err := json.Marshal(st.Extra["ipc"])
	if err == nil {
		err = json.Unmarshal(raw, &is)
	}
	if err != nil || st.Extra["ipc"] == nil {
		fmt.Fprintf(w, "ipc: no statistics in admin.status\n")
		return
	}
	// This status call is one of the clients (and its requests are counted).
	fmt.Fprintf(w, "ipc %s: %d clients (%s of segments), %d accepted, %d refused, %d killed, %d requests (%d bad), %d segments reclaimed\n",
		sock, is.Clients, units.FormatSize(is.SegmentBytes), is.Accepted, is.Refused, is.Killed, is.Requests,
		is.BadRequests, is.Reclaimed)
	if r := is.LastReclaim; r.Client != 0 {
		fmt.Fprintf(w, "  last reclaimed: client %d (pid %d, %s) %s ago: %s segment, %d blocks left, %d handles closed\n",
			r.Client, r.PID, r.Reason, time.Since(r.At).Round(time.Second), units.FormatSize(r.SegmentBytes),
			r.Allocations, r.Handles)
	}
}

func newStopCmd() *cobra.Command {
	var s selector
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop [PATH]",
		Short: "Drain and unmount the mount holding PATH (default: the only one): SIGTERM to its daemon, wait for it to exit",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := s.pick(pathArg(args))
			if err != nil {
				return err
			}
			info, dir := d.Info, d.Mount
			if err := syscall.Kill(info.Pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("signal daemon pid %d: %w", info.Pid, err)
			}
			if dir == "" {
				logrus.Infof("stopping pid %d (runtime without a mount)", info.Pid)
			} else {
				logrus.Infof("stopping pid %d: draining and unmounting %s", info.Pid, dir)
			}
			return waitStopped(cmd.ErrOrStderr(), d.Socket, info.Pid, timeout)
		},
	}
	s.register(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0 = wait for the drain)")
	return cmd
}
