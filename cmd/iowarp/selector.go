package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/mountinfo"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// selector is how every command that talks to a running daemon (stat,
// runtime status|stop, put/get/ls/rm, bench) finds it: --mount DIR, or a
// path anywhere inside a mount (resolved to its mount point through the
// mount table), or, with neither, the only daemon of this user; with
// several, they are listed and the command fails. --control-dir (or
// IOWARP_CONTROL_DIR) names the directory of the sockets, which must be
// this user's (control.SecureDir).
type selector struct {
	mount      string // --mount: "" = none given; noMount = the runtime without a mount
	controlDir string // --control-dir: "" = control.DefaultDir()
}

// noMount selects the runtime without a mount (config mount: "").
const noMount = "none"

// Environment defaults of the selector's flags.
const (
	envMount      = "IOWARP_MOUNT"
	envControlDir = "IOWARP_CONTROL_DIR"
)

func (s *selector) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.mount, "mount", os.Getenv(envMount),
		"the daemon of this mount (or of the mount holding this path; 'none': the runtime without a mount; env "+envMount+")")
	f.StringVar(&s.controlDir, "control-dir", os.Getenv(envControlDir),
		"directory of the daemons' sockets (default /run/iowarp for root, $XDG_RUNTIME_DIR/iowarp otherwise; env "+envControlDir+")")
}

// daemonRef is a daemon that answered on its control socket.
type daemonRef struct {
	Info
	Socket string `json:"socket"` // control socket
	Dir    string `json:"-"`      // control directory
	Err    string `json:"error,omitempty"`
}

// IPCSocket is the daemon's ipc socket, next to its control socket.
func (r daemonRef) IPCSocket() string { return ipc.SocketPath(r.Dir, r.Mount) }

// name is how a daemon is named to the user.
func (r daemonRef) name() string {
	if r.Mount == "" {
		return "(runtime without a mount)"
	}
	return r.Mount
}

// dir is the control directory, checked (a loose one fixed, with a
// warning; another user's refused).
func (s *selector) dir() (string, error) {
	dir := s.controlDir
	if dir == "" {
		dir = control.DefaultDir()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	msg, err := control.SecureDir(abs)
	if msg != "" {
		logrus.Warn(msg)
	}
	return abs, err
}

// pick returns the daemon named by --mount, else by path (a positional
// argument, "" if none), else the only one there is.
func (s *selector) pick(path string) (daemonRef, error) {
	dir, err := s.dir()
	if err != nil {
		return daemonRef{}, err
	}
	name := s.mount
	if name == "" {
		name = path
	}
	if name != "" {
		return s.named(dir, name)
	}
	ds, err := daemons(dir)
	if err != nil {
		return daemonRef{}, err
	}
	switch len(ds) {
	case 1:
		return ds[0], ds[0].err()
	case 0:
		return daemonRef{}, fmt.Errorf("%w of uid %d on this node (control directory %s); start one with 'iowarp mount DIR'",
			errNoDaemons, os.Geteuid(), dir)
	}
	printDaemons(os.Stderr, ds, false)
	return daemonRef{}, fmt.Errorf("%d iowarp daemons run (listed above): name one with --mount DIR or a path inside its mount", len(ds))
}

// errNoDaemons: the control directory holds no live daemon.
var errNoDaemons = errors.New("no iowarp daemon runs")

func (r daemonRef) err() error {
	if r.Err != "" {
		return fmt.Errorf("%s: %s", r.name(), r.Err)
	}
	return nil
}

// named asks the daemon of the mount that holds path.
func (s *selector) named(dir, path string) (daemonRef, error) {
	mount := ""
	if path != noMount {
		m, err := mountOf(path)
		if err != nil {
			return daemonRef{}, err
		}
		mount = m
	}
	r := daemonRef{Socket: control.SocketPath(dir, mount), Dir: dir}
	err := control.Call(r.Socket, "info", &r.Info)
	if errors.Is(err, control.ErrNoDaemon) {
		return r, s.noneServes(dir, path, mount, err)
	}
	return r, err
}

// noneServes explains that no daemon serves mount, and names those that
// run.
func (s *selector) noneServes(dir, path, mount string, err error) error {
	what := mount
	if mount == "" {
		what = "the runtime without a mount"
	} else if mount != path {
		what = fmt.Sprintf("%s (the mount of %s)", mount, path)
	}
	ds, _ := daemons(dir)
	var names []string
	for _, d := range ds {
		names = append(names, d.name())
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: %w (no daemon at all in control directory %s)", what, err, dir)
	}
	return fmt.Errorf("%s: %w; the daemons in %s serve: %s", what, err, dir, strings.Join(names, ", "))
}

// mountOf resolves path (absolute, symlinks followed while it exists) to
// the iowarp mount point it lies in: the deepest FUSE mount of iowarp that
// holds it. A path in no such mount is returned as it is (the mount point
// of a daemon that is gone, or is not mounted yet).
func mountOf(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	ms, err := mountinfo.Mounts()
	if err != nil {
		return "", fmt.Errorf("read mount table: %w", err)
	}
	best := ""
	for _, m := range ms {
		if isIOWarp(m) && inDir(abs, m.Point) && len(m.Point) > len(best) {
			best = m.Point
		}
	}
	if best == "" {
		return abs, nil
	}
	return best, nil
}

// isIOWarp: a FUSE mount made by an iowarp daemon (fusefs names it so).
func isIOWarp(m mountinfo.MountInfo) bool {
	return m.FSType == "fuse.iowarp" || m.FSType == "fuse" && m.Source == "iowarp"
}

// inDir: path is dir or below it.
func inDir(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// daemons asks every control socket in dir who serves it. Sockets nobody
// answers on (left by a killed daemon) are skipped; a daemon that does not
// answer in time is listed with its error.
func daemons(dir string) ([]daemonRef, error) {
	socks, err := control.Sockets(dir)
	if err != nil {
		return nil, err
	}
	var out []daemonRef
	for _, sock := range socks {
		r := daemonRef{Socket: sock, Dir: dir}
		err := control.CallWithin(sock, "info", &r.Info, listTimeout)
		if errors.Is(err, control.ErrNoDaemon) {
			continue
		}
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	return out, nil
}

// listTimeout bounds the question to each daemon when listing them.
const listTimeout = 2 * time.Second

// printDaemons writes the daemons as a table; with use, the use of their
// tiers too (one more question to each).
func printDaemons(w io.Writer, ds []daemonRef, use bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	head := "MOUNT\tPID\tUPTIME\tMODE\tBACKING"
	if use {
		head += "\tTIERS (used/capacity)\tDIRTY"
	}
	fmt.Fprintln(tw, head)
	for _, d := range ds {
		if d.Err != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\n", d.Socket, d.Err)
			continue
		}
		mode := string(d.Mode)
		if d.Mount == "" {
			mode = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%v\t%s\t%s", d.name(), d.Pid, time.Since(d.Started).Round(time.Second),
			orDash(mode), orDash(d.Backing))
		if use {
			tiers, dirty := tierUse(d)
			fmt.Fprintf(tw, "\t%s\t%s", tiers, dirty)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tierUse is "ram 16MiB/1GiB, nvme 0B/8GiB" and the dirty bytes of d.
func tierUse(d daemonRef) (string, string) {
	var st files.Stats
	if err := control.CallWithin(d.Socket, "stats", &st, listTimeout); err != nil {
		return "stats: " + err.Error(), "-"
	}
	var parts []string
	for _, t := range st.Pool.Tiers {
		parts = append(parts, fmt.Sprintf("%s %s/%s", t.Name, units.FormatSize(t.Used), units.FormatSize(t.Capacity)))
	}
	return strings.Join(parts, ", "), units.FormatSize(st.Pool.DirtyBytes)
}

func newListCmd() *cobra.Command {
	var s selector
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the iowarp daemons of this user on this node: mount, pid, uptime, use of their tiers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := s.dir()
			if err != nil {
				return err
			}
			ds, err := daemons(dir)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(os.Stdout, ds)
			}
			if len(ds) == 0 {
				fmt.Printf("no iowarp daemon of uid %d runs on this node (control directory %s)\n", os.Geteuid(), dir)
				return nil
			}
			return printDaemons(os.Stdout, ds, true)
		},
	}
	cmd.Flags().StringVar(&s.controlDir, "control-dir", os.Getenv(envControlDir),
		"directory of the daemons' sockets (env "+envControlDir+")")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the daemons as JSON")
	return cmd
}
