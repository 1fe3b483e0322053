package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

// stageFlags select the daemon of stage-in, stage-out and evict the way
// every command does (selector): --mount, else the mount that holds the
// first PATH, else the only daemon there is.
type stageFlags struct {
	selector
	workers int
}

// resolve returns the control socket of the mount and paths relative to
// it (none stays none: the whole mount).
func (f *stageFlags) resolve(paths []string) (sock string, rels []string, err error) {
	abs := make([]string, len(paths))
	for i, p := range paths {
		if abs[i], err = filepath.Abs(p); err != nil {
			return "", nil, err
		}
		abs[i] = realPath(abs[i]) // a path through a symlink to the mount
	}
	first := ""
	if len(abs) > 0 {
		first = abs[0]
	}
	d, err := f.pick(first)
	if err != nil {
		return "", nil, err
	}
	if d.Mount == "" {
		return "", nil, errors.New("the runtime without a mount has no files to stage: name a mount (--mount DIR)")
	}
	for _, a := range abs {
		r, err := filepath.Rel(d.Mount, a)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return "", nil, fmt.Errorf("%s is not inside the iowarp mount %s", a, d.Mount)
		}
		if r == "." {
			r = ""
		}
		rels = append(rels, r)
	}
	return d.Socket, rels, nil
}

// realPath is p with its symlinks resolved when it exists (the daemon
// names its socket after the real mount point).
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// stream runs a stage operation with a progress line on stderr.
func stream(w io.Writer, sock, op, desc string, a stageArgs) (files.StageReport, error) {
	var rep files.StageReport
	var p *progress
	err := control.Stream(sock, op, a, func(raw json.RawMessage) {
		var r files.StageReport
		if json.Unmarshal(raw, &r) != nil || r.Bytes == 0 {
			return
		}
		if p == nil {
			p = newProgress(w, desc, r.Bytes)
		}
		p.Update(r.Done, r.Bytes)
	}, &rep)
	if p != nil {
		p.Update(rep.Done, rep.Bytes)
		p.Finish()
	}
	if errors.Is(err, control.ErrNoDaemon) {
		err = fmt.Errorf("%w (is it mounted? is --control-dir right?)", err)
	}
	return rep, err
}

// rate is n bytes over d as "12.0MiB/s".
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return units.FormatSize(int64(float64(n)/d.Seconds())) + "/s"
}

// failures prints the files that failed; an error if any did.
func failures(w io.Writer, rep files.StageReport, what string) error {
	if rep.FailedCount == 0 {
		return nil
	}
	for _, f := range rep.Failed {
		fmt.Fprintf(w, "  failed: %s\n", f)
	}
	if more := rep.FailedCount - len(rep.Failed); more > 0 {
		fmt.Fprintf(w, "  ... and %d more\n", more)
	}
	return fmt.Errorf("%s: %d files failed", what, rep.FailedCount)
}

func newStageInCmd() *cobra.Command {
	var f stageFlags
	var list string
	cmd := &cobra.Command{
		Use:   "stage-in PATH... | --list FILE",
		Short: "Pull files or trees from the backing directory into the pool, in parallel",
		Long: `stage-in reads the files at or below each PATH (inside an iowarp mount) from
the backing directory into the buffer pool, clean, with -j workers, so that the
job's reads hit the pool. It evicts nothing: when no tier has room for more it
stops and says how much it staged. --list FILE reads the paths from FILE, one a
line (# comments), as iowarp run --stage-in does.`,
		Example: `  iowarp stage-in /iowarp/inputs /iowarp/mesh.h5
  iowarp stage-in --list job.stage`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list != "" {
				more, err := readList(list)
				if err != nil {
					return err
				}
				args = append(args, more...)
			}
			if len(args) == 0 {
				return errors.New("stage-in: no PATH")
			}
			return stageIn(cmd.OutOrStdout(), cmd.ErrOrStderr(), &f, args)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVarP(&f.workers, "jobs", "j", 0, "parallel readers (default: the daemon's flushers)")
	cmd.Flags().StringVar(&list, "list", "", "read the paths from FILE, one a line")
	return cmd
}

func stageIn(out, errw io.Writer, f *stageFlags, paths []string) error {
	sock, rels, err := f.resolve(paths)
	if err != nil {
		return err
	}
	start := time.Now()
	rep, err := stream(errw, sock, "stage-in", "stage-in", stageArgs{Paths: rels, Workers: f.workers})
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(out, "staged in %d files: %s of %s in %v (%s), %s of it already in the pool\n", rep.FilesDone,
		units.FormatSize(rep.Done), units.FormatSize(rep.Bytes), took.Round(time.Millisecond),
		rate(rep.Done-rep.Resident, took), units.FormatSize(rep.Resident))
	if rep.Full {
		fmt.Fprintf(out, "stopped: no tier has room for more without evicting (%s not staged in; reads of it go to the backing directory)\n",
			units.FormatSize(rep.Bytes-rep.Done))
	}
	return failures(out, rep, "stage-in")
}

func newStageOutCmd() *cobra.Command {
	var f stageFlags
	var drop bool
	cmd := &cobra.Command{
		Use:     "stage-out [PATH...]",
		Aliases: []string{"drain"},
		Short:   "Write the dirty data of files or trees (default: the whole mount) back and wait",
		Long: `stage-out writes every dirty page of the files at or below each PATH (without
PATH: of the whole mount) to the backing directory, fsyncs them, and returns
once they are there. --drop also frees their pages from the pool.`,
		Example: `  iowarp stage-out /iowarp/results
  iowarp drain --mount /iowarp --drop`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sock, rels, err := f.resolve(args)
			if err != nil {
				return err
			}
			start := time.Now()
			rep, err := stream(cmd.ErrOrStderr(), sock, "stage-out", "stage-out", stageArgs{Paths: rels, Drop: drop})
			if err != nil && rep.FailedCount == 0 {
				return err
			}
			took := time.Since(start)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "written back %s of %d files in %v (%s)", units.FormatSize(rep.Done), rep.Files,
				took.Round(time.Millisecond), rate(rep.Done, took))
			if drop {
				fmt.Fprintf(out, ", %s dropped from the pool", units.FormatSize(rep.Dropped))
			}
			fmt.Fprintln(out)
			if ferr := failures(out, rep, "stage-out"); ferr != nil {
				return ferr
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&drop, "drop", false, "free the files' pages from the pool once written back")
	return cmd
}

func newEvictCmd() *cobra.Command {
	var f stageFlags
	cmd := &cobra.Command{
		Use:   "evict PATH...",
		Short: "Drop the clean pages of files or trees from the pool",
		Long: `evict frees the pool's clean pages of the files at or below each PATH: their
data is on the backing directory and is staged in again when read. Dirty pages
stay until they are written back (iowarp stage-out --drop writes them back and
drops them too).`,
		Example: `  iowarp evict /iowarp/inputs`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sock, rels, err := f.resolve(args)
			if err != nil {
				return err
			}
			var rep files.StageReport
			if err := control.Stream(sock, "evict", stageArgs{Paths: rels}, nil, &rep); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "evicted %s of %d files", units.FormatSize(rep.Dropped), rep.Files)
			if rep.DirtyLeft > 0 {
				fmt.Fprintf(out, "; %s dirty kept (not written back yet: iowarp stage-out --drop)", units.FormatSize(rep.DirtyLeft))
			}
			fmt.Fprintln(out)
			return failures(out, rep, "evict")
		},
	}
	f.register(cmd)
	return cmd
}

// readList reads a stage list: one path a line; blank lines and lines
// starting with # are skipped; relative paths are relative to the
// current directory.
func readList(name string) ([]string, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("stage list: %w", err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("stage list %s: %w", name, err)
	}
	return out, nil
}

func stageCommands() []*cobra.Command {
	return []*cobra.Command{newStageInCmd(), newStageOutCmd(), newEvictCmd()}
}
