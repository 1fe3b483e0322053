package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/adapters/posix/report"
	"github.com/iowarp/iowarp/internal/units"
)

func newReportCmd() *cobra.Command {
	var top int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report FILE...",
		Short: "Summarise the IOWARP_REPORT files of a job: top files by bytes and time, access sizes, fast-path share",
		Long: `report reads the files that IOWARP_REPORT=FILE made the shim append to (one
line per process, and one per file each process opened on the mount) and prints
a table of the job: processes, bytes by path (fast: shared memory, ipc: the
daemon's rings, kernel: FUSE), the files that moved the most bytes and those
that took the most time in calls, and the histogram of access sizes.`,
		Example: `  IOWARP_REPORT=$PWD/io.report iowarp run -- mpirun -np 4 ./sim
  iowarp report io.report`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s report.Summary
			for _, name := range args {
				if err := parseReportFile(&s, name); err != nil {
					return err
				}
			}
			if asJSON {
				return printReportJSON(cmd.OutOrStdout(), &s)
			}
			return printReport(cmd.OutOrStdout(), &s, top)
		},
	}
	cmd.Flags().IntVar(&top, "top", 10, "files listed in each table")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summed records as JSON")
	return cmd
}

func parseReportFile(s *report.Summary, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := s.Parse(f); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func printReportJSON(w io.Writer, s *report.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Processes []report.Process `json:"processes"`
		Files     []*report.File   `json:"files"`
		Total     report.Counters  `json:"total"`
		Skipped   int              `json:"skipped_lines"`
	}{s.Processes, s.FileList(nil), s.Files, s.Skipped})
}

func printReport(w io.Writer, s *report.Summary, top int) error {
	t := &s.Files
	files := s.FileList(nil)
	if len(files) == 0 {
		t = processTotals(s.Processes) // reports of IOWARP_REPORT=1, or of an older shim
	}
	withIO := 0
	for _, p := range s.Processes {
		if p.Opens > 0 || p.Calls > 0 {
			withIO++
		}
	}
	fmt.Fprintf(w, "%d processes (%d with files on the mount), %d files, %s read, %s written, %d calls, %v in calls\n",
		len(s.Processes), withIO, len(files), size(t.Read()), size(t.Written()), t.Calls, dur(t.Ns()))
	if s.Skipped > 0 {
		fmt.Fprintf(w, "(%d lines skipped: not report lines, or cut short)\n", s.Skipped)
	}
	if len(files) == 0 {
		fmt.Fprintln(w, "no per-file lines (IOWARP_REPORT=1 prints only the process lines; set it to a file)")
		printPaths(w, t)
		return nil
	}
	fmt.Fprintln(w)
	printPaths(w, t)
	fmt.Fprintln(w, "\ntop files by bytes:")
	printFiles(w, s.FileList(report.ByBytes), top)
	fmt.Fprintln(w, "\ntop files by time in calls:")
	printFiles(w, s.FileList(report.ByTime), top)
	fmt.Fprintln(w, "\naccess sizes:")
	return printSizes(w, t)
}

// processTotals sums the process lines.
func processTotals(ps []report.Process) *report.Counters {
	var t report.Counters
	for _, p := range ps {
		t.Add(&p.Counters)
	}
	return &t
}

// printPaths is how much each path carried, by direction.
func printPaths(w io.Writer, t *report.Counters) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tFAST\tIPC\tKERNEL\tFAST%\t")
	row := func(name string, fast, ipc, kern uint64) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, size(fast), size(ipc), size(kern), pct(fast, fast+ipc+kern))
	}
	row("read", t.FastRead, t.IPCRead, t.KernelRead)
	row("write", t.FastWrite, t.IPCWrite, t.KernelWrite)
	row("total", t.FastRead+t.FastWrite, t.IPCRead+t.IPCWrite, t.KernelRead+t.KernelWrite)
	tw.Flush()
	fmt.Fprintf(w, "fast-path hits %d, misses %d\n", t.FastHits, t.FastMisses)
}

func printFiles(w io.Writer, files []*report.File, top int) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "READ\tWRITTEN\tFAST%\tCALLS\tOPENS\tPROCS\tTIME\tREAD T\tWRITE T\tOTHER T\tFILE")
	for i, f := range files {
		if i == top {
			fmt.Fprintf(tw, "... %d more\n", len(files)-top)
			break
		}
		fast := f.FastRead + f.FastWrite
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%v\t%v\t%v\t%v\t%s\n", size(f.Read()), size(f.Written()),
			pct(fast, f.Bytes()), f.Calls, f.Opens, f.Procs, dur(f.Ns()), dur(f.ReadNs), dur(f.WriteNs),
			dur(f.MetaNs), f.Path)
	}
	tw.Flush()
}

func printSizes(w io.Writer, t *report.Counters) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SIZE\tREADS\tWRITES\t")
	for i, name := range report.BinNames {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", name, t.ReadSizes[i], t.WriteSizes[i])
	}
	fmt.Fprintf(tw, "largest\t%s\t%s\t\n", size(t.MaxRead), size(t.MaxWrite))
	return tw.Flush()
}

func size(n uint64) string { return units.FormatSize(int64(n)) }

func dur(ns uint64) time.Duration {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func pct(a, b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", 100*float64(a)/float64(b))
}
