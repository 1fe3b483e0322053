// Command iowarp is the one iowarp binary: it mounts the buffered file
// system (`iowarp mount`, `iowarp runtime start`), stops and inspects a
// running daemon (`iowarp runtime stop|status`, `iowarp stat [--watch]`,
// `iowarp list`; selector.go says how the daemon is found) and prints the
// default configuration (`iowarp config default`).
//
// Errors the user can act on are logged as one line and exit with status 1.
package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// logFlags are the persistent logging flags.
type logFlags struct {
	verbose int
	level   string
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	logrus.SetFormatter(&lineFormatter{})
	sink = installLogSink()
	defer sink.Close()
	root := newRootCmd()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		logrus.Error(err)
		if p := sink.Path(); p != "" && !isDaemonChild() {
			// A foreground daemon logging to --log-file: the user at
			// the terminal sees why it stopped, too.
			fmt.Fprintf(os.Stderr, "iowarp: %v (log: %s)\n", err, p)
		}
		notifyParent(err)
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	lf := &logFlags{}
	root := &cobra.Command{
		Use:   "iowarp",
		Short: "A FUSE file system over a tiered buffer pool, written back to a parallel file system",
		Long: `iowarp buffers the I/O of unmodified applications in a per-node, multi-tier
buffer pool (RAM, then local NVMe) and writes it back to a backing directory
(the parallel file system) in the background.`,
		Version:       version,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Usage is printed for flag errors only, not for failures of
			// a command that started.
			cmd.SilenceUsage = true
			return lf.apply("")
		},
	}
	root.SetVersionTemplate(versionLine() + "\n")
	root.PersistentFlags().CountVarP(&lf.verbose, "verbose", "v", "more logging: -v debug, -vv trace (every FUSE request)")
	root.PersistentFlags().StringVar(&lf.level, "log-level", "", "log level: error, warn, info, debug, trace (overrides the config's log_level)")
	root.AddCommand(newMountCmd(lf), newRuntimeCmd(lf), newStatCmd(), newListCmd(), newConfigCmd(), newRunCmd())
	root.AddCommand(newVersionCmd(), newDocsCmd())
	root.AddCommand(newBlobCmds()...)   // put, get, ls, rm, bench over ipc (blobs.go)
	root.AddCommand(stageCommands()...) // stage-in, stage-out (drain), evict (stage.go)
	root.AddCommand(newReportCmd())     // report.go
	root.AddCommand(extraCommands()...) // registered from init() (omni.go: describe, export, query, assimilate)
	return root
}

// apply sets the logrus level: the flags win over cfgLevel (the config's
// log_level, "" if none), which wins over info.
func (lf *logFlags) apply(cfgLevel string) error {
	level := logrus.InfoLevel
	if cfgLevel != "" {
		l, err := logrus.ParseLevel(cfgLevel)
		if err != nil {
			return err
		}
		level = l
	}
	switch {
	case lf.level != "":
		l, err := logrus.ParseLevel(lf.level)
		if err != nil {
			return fmt.Errorf("--log-level: %q is not one of error, warn, info, debug, trace", lf.level)
		}
		level = l
	case lf.verbose == 1:
		level = logrus.DebugLevel
	case lf.verbose >= 2:
		level = logrus.TraceLevel
	}
	logrus.SetLevel(level)
	return nil
}

// explicit reports whether the log level was given on the command line.
func (lf *logFlags) explicit() bool { return lf.level != "" || lf.verbose > 0 }

// lineFormatter writes one line per entry: time, level, message, fields.
type lineFormatter struct{}

func (lineFormatter) Format(e *logrus.Entry) ([]byte, error) {
	var b strings.Builder
	b.WriteString(e.Time.Format(time.RFC3339))
	b.WriteByte(' ')
	b.WriteString(strings.ToUpper(e.Level.String()))
	b.WriteByte(' ')
	b.WriteString(strings.ReplaceAll(e.Message, "\n", " "))
	for _, k := range slices.Sorted(maps.Keys(e.Data)) {
		fmt.Fprintf(&b, " %s=%v", k, e.Data[k])
	}
	b.WriteByte('\n')
	return []byte(b.String()), nil
}
