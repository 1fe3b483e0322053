package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/iowarp/iowarp/internal/mountinfo"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// shimLib is the LD_PRELOAD library's file name.
const shimLib = "libiowarp.so"

func newRunCmd() *cobra.Command {
	var paths []string
	var lib, stageList string
	var sf stageFlags
	cmd := &cobra.Command{
		Use:   "run [--paths FROM=TO ...] -- CMD [ARGS...]",
		Short: "Run a program with the LD_PRELOAD shim (libiowarp.so)",
		Long: `Run CMD with libiowarp.so preloaded: its I/O on files of an iowarp mount takes
the shim's fast path; everything else is untouched. --paths FROM=TO (repeatable,
or IOWARP_PATHS) redirects absolute paths under FROM into TO, so codes with
hard-coded paths are buffered too. IOWARP_REPORT=1 prints, at the exit of each
process, the calls intercepted and the bytes each path carried. With no iowarp
mount on this node the program runs on the kernel path after one warning
(IOWARP_STRICT=1 makes that an error). --stage-in LIST first stages in the
paths listed in LIST (one a line, as iowarp stage-in --list), with progress on
stderr, and runs CMD once they are in the pool (a failure stops before CMD).`,
		Example: `  iowarp run -- ./app input.h5
  iowarp run --paths /lustre/proj=/iowarp/proj -- mpirun -np 4 ./sim
  iowarp run --stage-in inputs.list -- ./sim`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if stageList != "" {
				list, err := readList(stageList)
				if err != nil {
					return err
				}
				if len(list) > 0 {
					if err := stageIn(cmd.ErrOrStderr(), cmd.ErrOrStderr(), &sf, list); err != nil {
						return err
					}
				}
			}
			return runShim(args, paths, lib)
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&stageList, "stage-in", "", "stage in the paths listed in FILE (one a line) before running CMD")
	cmd.Flags().StringArrayVar(&paths, "paths", nil, "redirect FROM=TO (absolute paths; repeatable)")
	cmd.Flags().StringVar(&lib, "lib", "", "the shim library (default: $IOWARP_LIB, or "+shimLib+" next to this binary or in ../lib/iowarp/)")
	return cmd
}

func runShim(args, paths []string, lib string) error {
	so, err := findShim(lib)
	if err != nil {
		return err
	}
	prog, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	if !iowarpMounted() {
		if strictEnv() {
			return fmt.Errorf("no iowarp daemon is running on this node (IOWARP_STRICT is set)")
		}
		logrus.Warn("no iowarp daemon is running on this node: the program runs on the kernel path")
	}
	env := os.Environ()
	env = setEnv(env, "LD_PRELOAD", joinNonEmpty(" ", so, os.Getenv("LD_PRELOAD")))
	if r := os.Getenv("IOWARP_REPORT"); r != "" && r != "0" && r != "1" && !filepath.IsAbs(r) {
		// Every process appends to the same file, wherever it chdirs.
		if abs, err := filepath.Abs(r); err == nil {
			env = setEnv(env, "IOWARP_REPORT", abs)
		}
	}
	if len(paths) > 0 {
		for _, p := range paths {
			if from, to, ok := strings.Cut(p, "="); !ok || !filepath.IsAbs(from) || !filepath.IsAbs(to) {
				return fmt.Errorf("--paths %q: want FROM=TO with absolute paths", p)
			}
		}
		env = setEnv(env, "IOWARP_PATHS", joinNonEmpty(":", strings.Join(paths, ":"), os.Getenv("IOWARP_PATHS")))
	}
	return syscall.Exec(prog, args, env)
}

// findShim locates libiowarp.so: --lib, $IOWARP_LIB, next to the binary
// (bin/ of a build tree), ../lib/iowarp relative to it (`make install`:
// PREFIX/bin/iowarp and PREFIX/lib/iowarp/libiowarp.so) or ../lib.
func findShim(lib string) (string, error) {
	cands := []string{lib, os.Getenv("IOWARP_LIB")}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		cands = append(cands, filepath.Join(dir, shimLib), filepath.Join(dir, "..", "lib", "iowarp", shimLib),
			filepath.Join(dir, "..", "lib", shimLib))
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if abs, err := filepath.Abs(c); err == nil {
			if _, err := os.Stat(abs); err == nil {
				return abs, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found (build it with 'make build', or pass --lib / IOWARP_LIB)", shimLib)
}

// iowarpMounted reports whether an iowarp FUSE mount is visible here.
func iowarpMounted() bool {
	mounts, _ := mountinfo.Mounts()
	for _, m := range mounts {
		if m.FSType == "fuse.iowarp" {
			return true
		}
	}
	return false
}

func strictEnv() bool {
	v := os.Getenv("IOWARP_STRICT")
	return v != "" && v != "0"
}

func setEnv(env []string, k, v string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, k+"=") {
			out = append(out, e)
		}
	}
	return append(out, k+"="+v)
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
