package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/adapters/ebpf"
)

func init() { registerCommand(newTraceCmd) }

type traceFlags struct {
	pids     []int
	cgroup   string
	duration time.Duration
	output   string
	darshan  string
	html     string
	top      int
	ctlDir   string
}

func newTraceCmd() *cobra.Command {
	var f traceFlags
	c := &cobra.Command{
		Use:   "trace [--pid PID]... [--cgroup DIR] [--duration D] [--output F] [--darshan F] [--html F] [-- CMD [ARGS]]",
		Short: "Trace the I/O system calls of a command, processes or a cgroup (eBPF)",
		Long: `trace attaches eBPF programs to the kernel's system-call tracepoints and
records the I/O calls (open, read, write, pread, pwrite, the vector forms,
lseek, fsync, close, mmap, stat, rename, unlink, mkdir, getdents, io_uring)
of a command run in a cgroup of its own, of processes (--pid, their
children too) or of a cgroup v2 directory (--cgroup, e.g. a Slurm job's),
filtered in the kernel. It sees every program: static binaries, Go, and
fortified libc calls, which the LD_PRELOAD shim cannot. At the end it
prints a table per file: bytes, calls, sequential fraction, time in I/O.

--output writes every event as a JSON line (then every call goes to user
space; without it the kernel counts reads and writes per process and fd
itself and sends a sample of them for the timeline); --darshan writes the
POSIX counters in darshan-parser's text layout; --html draws a timeline
of the calls per process and file, with the iowarp daemons' tier use
sampled every 100ms under them (one page, nothing fetched). Needs root.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrace(&f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().IntSliceVar(&f.pids, "pid", nil, "trace this process and its future children (repeatable)")
	c.Flags().StringVar(&f.cgroup, "cgroup", "", "trace the processes of this cgroup v2 directory and below")
	c.Flags().DurationVar(&f.duration, "duration", 0, "stop after this long (with --pid or --cgroup; default: until Ctrl-C)")
	c.Flags().StringVar(&f.output, "output", "", "write every event to this file as JSON lines")
	c.Flags().StringVar(&f.darshan, "darshan", "", "write Darshan POSIX counters (darshan-parser text) to this file")
	c.Flags().StringVar(&f.html, "html", "", "write a timeline of the calls per process and file as a self-contained HTML page")
	c.Flags().IntVar(&f.top, "top", 20, "files in the summary (0 = all)")
	c.Flags().StringVar(&f.ctlDir, "control-dir", os.Getenv(envControlDir),
		"where the daemons' sockets are, for the pool's side of files on iowarp mounts (env "+envControlDir+")")
	return c
}

// traceEvent is the JSON line of one event.
type traceEvent struct {
	T       float64  `json:"t"`      // seconds, CLOCK_MONOTONIC
	Latency float64  `json:"lat_us"` // µs
	Pid     int      `json:"pid"`
	Tid     int      `json:"tid"`
	Call    string   `json:"call"`
	Ret     int64    `json:"ret"`
	Args    []uint64 `json:"args"`
	Path    string   `json:"path,omitempty"`
}

func runTrace(f *traceFlags, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 && len(f.pids) == 0 && f.cgroup == "" {
		return errors.New("trace: give a command (-- CMD ARGS), --pid or --cgroup")
	}
	if len(args) > 0 && (len(f.pids) > 0 || f.cgroup != "") {
		return errors.New("trace: a command, --pid and --cgroup do not combine")
	}
	agg := ebpf.NewAggregator()
	if f.html != "" {
		agg.Timeline = ebpf.NewTimeline()
	}
	sink, closeSink, err := eventSink(f.output)
	if err != nil {
		return err
	}
	before := snapshotPools(f.ctlDir)
	var tiers <-chan []ebpf.TierSample
	stopTiers := make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(stopTiers) })
	defer stopSampling()
	if f.html != "" {
		tiers = sampleTiers(f.ctlDir, tierInterval, stopTiers)
	}
	start := time.Now()
	on := func(e ebpf.Event) {
		agg.Add(e)
		sink(e)
	}
	var runErr error
	if len(args) > 0 {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		runErr = ebpf.Run(cmd, ebpf.Options{Every: f.output != ""}, on)
		var exit *exec.ExitError
		if runErr != nil && !errors.As(runErr, &exit) {
			closeSink()
			return runErr
		}
	} else if err := traceAttached(f, on); err != nil {
		closeSink()
		return err
	}
	end := time.Now()
	stopSampling()
	if tiers != nil {
		for _, s := range <-tiers {
			agg.Timeline.AddTiers(s)
		}
	}
	after := snapshotPools(f.ctlDir)
	if err := closeSink(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "iowarp trace: %d calls in %v\n", totalCalls(agg), end.Sub(start).Round(time.Millisecond))
	if err := ebpf.WriteSummary(stderr, agg, f.top); err != nil {
		return err
	}
	if err := writePoolSide(stderr, agg, before, after); err != nil {
		return err
	}
	if f.darshan != "" {
		if err := writeDarshan(f.darshan, agg, args, start, end); err != nil {
			return err
		}
	}
	if f.html != "" {
		if err := writeHTML(f.html, agg, args); err != nil {
			return err
		}
	}
	return runErr // the command's own failure is ours
}

// traceAttached traces --pid or --cgroup until --duration or a signal.
func traceAttached(f *traceFlags, on func(ebpf.Event)) error {
	t, err := ebpf.Open(ebpf.Options{Cgroup: f.cgroup, Pids: f.pids, Every: f.output != ""})
	if err != nil {
		return err
	}
	defer t.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	var stop <-chan time.Time
	if f.duration > 0 {
		stop = time.After(f.duration)
	}
	var drainUntil time.Time // once stopping: read what is queued, for at most a second
	for done := false; ; {
		t.SetDeadline(time.Now().Add(100 * time.Millisecond))
		e, err := t.Read()
		if err == nil {
			on(e)
			if !done || time.Now().Before(drainUntil) {
				continue
			}
			return t.Flush(on)
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		if done {
			// The ring is read to the end: the kernel's counts last.
			return t.Flush(on)
		}
		select {
		case <-sig:
			done = true
		case <-stop:
			done = true
		default:
		}
		if len(f.pids) > 0 && !anyAlive(f.pids) {
			done = true
		}
		drainUntil = time.Now().Add(time.Second)
	}
}

func anyAlive(pids []int) bool {
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			return true
		}
	}
	return false
}

func totalCalls(a *ebpf.Aggregator) int64 {
	var n int64
	for _, c := range a.Calls {
		n += c
	}
	return n
}

// eventSink returns where events go as JSON lines (nowhere without a file).
func eventSink(path string) (func(ebpf.Event), func() error, error) {
	if path == "" {
		return func(ebpf.Event) {}, func() error { return nil }, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	enc := json.NewEncoder(out)
	var werr error
	sink := func(e ebpf.Event) {
		if werr == nil && e.Call.Name != "" { // a syscall, not a record of the kernel's
			werr = enc.Encode(traceEvent{T: e.Time.Seconds(), Latency: float64(e.Latency) / 1e3, Pid: e.Pid, Tid: e.Tid,
				Call: e.Call.Name, Ret: e.Ret, Args: e.Args[:], Path: e.Path})
		}
	}
	return sink, func() error { return errors.Join(werr, out.Close()) }, nil
}

func writeHTML(path string, a *ebpf.Aggregator, args []string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	title := "iowarp trace"
	if len(args) > 0 {
		title += ": " + strings.Join(args, " ")
	}
	err = a.Timeline.WriteHTML(out, a, title)
	return errors.Join(err, out.Close())
}

func writeDarshan(path string, a *ebpf.Aggregator, args []string, start, end time.Time) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	job := os.Getenv("SLURM_JOB_ID")
	if job == "" {
		job = "0"
	}
	err = ebpf.WriteDarshan(out, a, ebpf.DarshanMeta{Exe: strings.Join(args, " "), Uid: os.Getuid(), JobID: job,
		Start: start, End: end, Nprocs: len(a.Procs)})
	return errors.Join(err, out.Close())
}
