package main

import (
	"fmt"
	goruntime "runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at link time by `make build`:
// -X main.version=$(git describe --always --dirty) -X main.commit=<sha>.
// A plain `go build` leaves the defaults; commit then comes from the
// VCS stamp the go command embeds (vcsCommit).
var (
	version = "0.1.0-dev"
	commit  = ""
)

// buildCommit is the commit the binary was built from, "unknown" when
// neither the linker nor the go command recorded one.
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if c := vcsCommit(); c != "" {
		return c
	}
	return "unknown"
}

// vcsCommit reads vcs.revision (and vcs.modified) from the build info.
func vcsCommit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// versionLine is what `iowarp --version` and `iowarp version` print.
func versionLine() string {
	return fmt.Sprintf("iowarp version %s (commit %s, %s, %s/%s)", version, buildCommit(),
		goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
