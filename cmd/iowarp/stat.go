package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/control"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// target names a running mount: its directory and the control directory.
type target struct {
	controlDir string
}

func (t *target) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.controlDir, "control-dir", os.Getenv("IOWARP_CONTROL_DIR"),
		"directory of the control socket (default /run/iowarp for root, $XDG_RUNTIME_DIR/iowarp otherwise; env IOWARP_CONTROL_DIR)")
}

// socket returns the control socket of the mount at dir: args[0], else
// the default config's mount point, or, if no daemon serves that, the
// daemon without a mount (returned as dir "").
func (t *target) socket(args []string) (string, string, error) {
	dir := runtime.Default().Mount
	if len(args) > 0 {
		dir = args[0]
	} else if sock := control.SocketPath(t.controlDir, dir); !exists(sock) && exists(control.SocketPath(t.controlDir, "")) {
		return "", control.SocketPath(t.controlDir, ""), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, control.SocketPath(t.controlDir, abs), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (t *target) call(args []string, op string, result any) (string, error) {
	dir, sock, err := t.socket(args)
	if err != nil {
		return "", err
	}
	if err := control.Call(sock, op, result); err != nil {
		if errors.Is(err, control.ErrNoDaemon) {
			return dir, fmt.Errorf("%s: %w (is it mounted? is --control-dir right?)", dir, err)
		}
		return dir, err
	}
	return dir, nil
}

// info asks the daemon of args (as in call) who it is.
func (t *target) info(args []string) (Info, string, error) {
	var info Info
	dir, err := t.call(args, "info", &info)
	return info, dir, err
}

func newStatCmd() *cobra.Command {
	var t target
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat [DIR]",
		Short: "Show per-tier capacity, use, dirty bytes, hits and misses of a running mount",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				var raw json.RawMessage
				if _, err := t.call(args, "stats", &raw); err != nil {
					return err
				}
				_, err := fmt.Fprintf(os.Stdout, "%s\n", raw)
				return err
			}
			info, _, err := t.info(args)
			if err != nil {
				return err
			}
			var st files.Stats
			if _, err := t.call(args, "stats", &st); err != nil {
				return err
			}
			return printStats(os.Stdout, info, st)
		},
	}
	t.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw statistics as JSON")
	return cmd
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
			runtime.FormatSize(ts.Capacity), runtime.FormatSize(ts.Used), pct, runtime.FormatSize(ts.Dirty),
			ts.Blobs, ts.Promoted, ts.Demoted, ts.Evicted)
	}
	tw.Flush()
	for _, ts := range st.Pool.Tiers {
		if ts.Ceiling > 0 {
			fmt.Fprintf(w, "memory pressure: tier %s held at %s until it passes\n", ts.Name, runtime.FormatSize(ts.Ceiling))
		}
	}
	fmt.Fprintf(w, "\ndirty %s   flush backlog %d files   written back %s   staged in %s   flush errors %d\n",
		runtime.FormatSize(st.DirtyBytes), st.FlushBacklog, runtime.FormatSize(int64(st.FlushedBytes)),
		runtime.FormatSize(int64(st.StagedBytes)), st.FlushErrors)
	_, err := fmt.Fprintf(w, "reads: %d hits, %d misses (pool: %d hits, %d misses)   read %s   written %s   open files %d\n",
		st.ReadHits, st.ReadMisses, st.Pool.Hits, st.Pool.Misses, runtime.FormatSize(int64(st.BytesRead)),
		runtime.FormatSize(int64(st.BytesWritten)), st.OpenFiles)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "read-ahead: %d pages (%s) staged ahead, %d prefetch hits, %d wasted (evicted or dropped unread)\n",
		st.PrefetchedPages, runtime.FormatSize(int64(st.PrefetchedBytes)), st.PrefetchHits, st.PrefetchWasted)
	if l := st.Pool.LeaseStats; l.LeaseRefills > 0 {
		fmt.Fprintf(w, "shim leases: %s reserved now, %d refills, %d returned (%s), %d new pages adopted, %d dropped (created past a lease)\n",
			runtime.FormatSize(l.LeaseBytes), l.LeaseRefills, l.LeasesReturned, runtime.FormatSize(int64(l.LeaseReturnedBytes)),
			l.ShimPagesAdopted, l.ShimPagesDropped)
	}
	if r := st.Replay; r != nil {
		fmt.Fprintf(w, "at start: replayed %d pages (%s) of %d files from the file tier of a killed daemon; %d pages skipped, %d files failed, %s of its tier files reclaimed\n",
			r.Pages, runtime.FormatSize(r.Bytes), r.Files, r.Skipped, r.Failed, runtime.FormatSize(r.Reclaimed))
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

// slowWriteBack is how long one write-back of a file runs before stat
// calls the backing store slow.
const slowWriteBack = 10 * time.Second

// printFailing lists the files whose write-back is failing: their data
// are held dirty in the pool until the backing store takes them.
func printFailing(w io.Writer, st files.Stats) error {
	fmt.Fprintf(w, "\nwrite-back FAILING for %d files, %s stuck dirty in the pool (retried; fsync returns the error):\n",
		st.FailingCount, runtime.FormatSize(st.StuckDirtyBytes))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tCAUSE\tDIRTY\tFAILING FOR\tATTEMPTS\tLAST ERROR")
	for _, ff := range st.FailingFiles {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%s\n", ff.Path, ff.Errno, runtime.FormatSize(ff.DirtyBytes),
			time.Since(ff.Since).Round(time.Second), ff.Attempts, ff.Error)
	}
	if more := st.FailingCount - len(st.FailingFiles); more > 0 {
		fmt.Fprintf(tw, "... %d more\n", more)
	}
	return tw.Flush()
}

func newStatusCmd() *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   "status [DIR]",
		Short: "Say whether a daemon serves DIR (default /iowarp); exit 1 if none",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, dir, err := t.info(args)
			if err != nil {
				return err
			}
			if info.Mount == "" {
				fmt.Printf("runtime without a mount: pid %d (iowarp %s, config %q) since %s\n",
					info.Pid, info.Version, info.Config, info.Started.Format(time.RFC3339))
			} else {
				fmt.Printf("%s: served by pid %d (iowarp %s, %s, backing %s, config %q) since %s\n", info.Mount,
					info.Pid, info.Version, info.Mode, info.Backing, info.Config, info.Started.Format(time.RFC3339))
			}
			printIPCStatus(os.Stdout, ipc.SocketPath(t.controlDir, dir))
			return nil
		},
	}
	t.register(cmd)
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
		sock, is.Clients, runtime.FormatSize(is.SegmentBytes), is.Accepted, is.Refused, is.Killed, is.Requests,
		is.BadRequests, is.Reclaimed)
	if r := is.LastReclaim; r.Client != 0 {
		fmt.Fprintf(w, "  last reclaimed: client %d (pid %d, %s) %s ago: %s segment, %d blocks left, %d handles closed\n",
			r.Client, r.PID, r.Reason, time.Since(r.At).Round(time.Second), runtime.FormatSize(r.SegmentBytes),
			r.Allocations, r.Handles)
	}
}

func newStopCmd() *cobra.Command {
	var t target
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop [DIR]",
		Short: "Drain and unmount DIR (default /iowarp): SIGTERM to its daemon, wait for it to exit",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, dir, err := t.info(args)
			if err != nil {
				return err
			}
			if err := syscall.Kill(info.Pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("signal daemon pid %d: %w", info.Pid, err)
			}
			if dir == "" {
				logrus.Infof("stopping pid %d (runtime without a mount)", info.Pid)
			} else {
				logrus.Infof("stopping pid %d: draining and unmounting %s", info.Pid, dir)
			}
			deadline := time.Now().Add(timeout)
			for syscall.Kill(info.Pid, 0) == nil {
				if timeout > 0 && time.Now().After(deadline) {
					return fmt.Errorf("pid %d still draining after %v", info.Pid, timeout)
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		},
	}
	t.register(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long (0 = wait for the drain)")
	return cmd
}
