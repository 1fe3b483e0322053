package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/control"
)

func init() { registerCommand(newSnapshotCmd) }

// snapshotArgs are the arguments of the control socket's snapshot-*
// operations.
type snapshotArgs struct {
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"` // create: mount-relative root of the tree
	Dir  string `json:"dir,omitempty"`  // export: absolute destination
}

// snapshotStreams are the daemon's snapshot operations on fsys (streams:
// they take arguments; none reports progress). mount is the mount point:
// an export into the mount itself is refused (the daemon would write
// through its own door).
func snapshotStreams(fsys *files.FS, mount string) map[string]control.StreamHandler {
	op := func(name string, run func(a snapshotArgs) (any, error)) control.StreamHandler {
		return func(_ context.Context, raw json.RawMessage, _ func(any)) (any, error) {
			var a snapshotArgs
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, fmt.Errorf("%s: bad arguments: %w", name, err)
				}
			}
			v, err := run(a)
			l := logrus.WithField("op", name)
			if err != nil {
				l.Warnf("%s %s: %v", name, a.Name, err)
			} else if name != "snapshot-list" {
				l.Infof("%s %s done", name, a.Name)
			}
			return v, err
		}
	}
	return map[string]control.StreamHandler{
		"snapshot-create": op("snapshot-create", func(a snapshotArgs) (any, error) {
			return fsys.CreateSnapshot(a.Name, a.Path)
		}),
		"snapshot-list": op("snapshot-list", func(a snapshotArgs) (any, error) {
			return fsys.Snapshots(), nil
		}),
		"snapshot-delete": op("snapshot-delete", func(a snapshotArgs) (any, error) {
			return struct{}{}, fsys.DeleteSnapshot(a.Name)
		}),
		"snapshot-export": op("snapshot-export", func(a snapshotArgs) (any, error) {
			d := filepath.Clean(a.Dir)
			if mount != "" && (d == mount || strings.HasPrefix(d, mount+"/")) {
				return nil, fmt.Errorf("export %s: %s is inside the mount %s: export to a directory outside it", a.Name, d, mount)
			}
			return fsys.ExportSnapshot(a.Name, d)
		}),
	}
}

// mergeStreams is the union of the stream maps.
func mergeStreams(ms ...map[string]control.StreamHandler) map[string]control.StreamHandler {
	out := map[string]control.StreamHandler{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot create|list|delete|export",
		Short: "Copy-on-write snapshots of a file tree on the mount, read at MOUNT/.snapshots/NAME",
		Long: `snapshot create NAME [PATH] records the tree at PATH (default: the whole mount)
as it is now, without copying data: a page is copied into the pool only when
the live file is about to change it (copy-on-write). The snapshot is read,
read-only and with the original modes and owners, at MOUNT/.snapshots/NAME/.
Its copied pages count against the tiers' capacity; delete gives them back.
export writes a snapshot to a directory outside the mount. Snapshots live in
the daemon: a restart drops them (export what must be kept).`,
		Example: `  iowarp snapshot create before-run /iowarp/results
  cat /iowarp/.snapshots/before-run/out.dat
  iowarp snapshot list
  iowarp snapshot export before-run /scratch/before-run
  iowarp snapshot delete before-run`,
	}
	var sel selector
	sock := func(path string) (string, string, error) {
		if path != "" {
			abs, err := filepath.Abs(path)
			if err != nil {
				return "", "", err
			}
			path = realPath(abs)
		}
		d, err := sel.pick(path)
		if err != nil {
			return "", "", err
		}
		if d.Mount == "" {
			return "", "", errors.New("the runtime without a mount has no files to snapshot: name a mount (--mount DIR)")
		}
		return d.Socket, d.Mount, nil
	}
	call := func(s, op string, a snapshotArgs, out any) error {
		err := control.Stream(s, op, a, nil, out)
		if errors.Is(err, control.ErrNoDaemon) {
			err = fmt.Errorf("%w (is it mounted? is --control-dir right?)", err)
		}
		return err
	}
	create := &cobra.Command{
		Use:   "create NAME [PATH]",
		Short: "Snapshot the tree at PATH (default: the whole mount) as NAME",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			path := ""
			if len(args) > 1 {
				path = args[1]
			}
			s, mount, err := sock(path)
			if err != nil {
				return err
			}
			r := ""
			if path != "" {
				abs, _ := filepath.Abs(path)
				abs = realPath(abs)
				if r, err = filepath.Rel(mount, abs); err != nil || r == ".." || strings.HasPrefix(r, "../") {
					return fmt.Errorf("%s is not inside the iowarp mount %s", abs, mount)
				}
				if r == "." {
					r = ""
				}
			}
			flushKernel(c.ErrOrStderr(), filepath.Join(mount, r))
			var in files.SnapshotInfo
			if err := call(s, "snapshot-create", snapshotArgs{Name: args[0], Path: r}, &in); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "snapshot %s of %s: %d files, %d directories, %s; read it at %s\n", in.Name,
				filepath.Join(mount, in.Path), in.Files, in.Dirs, units.FormatSize(in.Bytes),
				filepath.Join(mount, files.SnapshotDir, in.Name))
			return nil
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the snapshots and the pool space each holds",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			s, mount, err := sock("")
			if err != nil {
				return err
			}
			var all []files.SnapshotInfo
			if err := call(s, "snapshot-list", snapshotArgs{}, &all); err != nil {
				return err
			}
			return printSnapshots(c.OutOrStdout(), mount, all, asJSON)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete snapshot NAME; its copied pages go back to the tiers",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, _, err := sock("")
			if err != nil {
				return err
			}
			if err := call(s, "snapshot-delete", snapshotArgs{Name: args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "deleted snapshot %s\n", args[0])
			return nil
		},
	}
	export := &cobra.Command{
		Use:   "export NAME DIR",
		Short: "Write snapshot NAME to DIR (absent or empty, outside the mount)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			s, _, err := sock("")
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(args[1])
			if err != nil {
				return err
			}
			start := time.Now()
			var in files.SnapshotInfo
			if err := call(s, "snapshot-export", snapshotArgs{Name: args[0], Dir: realPath(dir)}, &in); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "exported snapshot %s to %s: %d files, %s in %v\n", in.Name, dir, in.Files,
				units.FormatSize(in.Bytes), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	for _, sub := range []*cobra.Command{create, list, del, export} {
		sel.register(sub) // --mount, --control-dir
		cmd.AddCommand(sub)
	}
	return cmd
}

// flushKernel sends the daemon what the kernel still holds dirty for the
// mount (pages written through a shared mmap, or with writeback_cache):
// syncfs on the mount. A snapshot takes what the daemon has.
func flushKernel(w io.Writer, p string) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Syncfs(fd)
		unix.Close(fd)
	}
	if err != nil {
		fmt.Fprintf(w, "iowarp: syncfs %s: %v (pages the kernel still holds dirty may be missing from the snapshot)\n", p, err)
	}
}

func printSnapshots(w io.Writer, mount string, all []files.SnapshotInfo, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	if len(all) == 0 {
		fmt.Fprintln(w, "no snapshots")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPATH\tCREATED\tFILES\tSIZE\tIN POOL")
	for _, s := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Name, filepath.Join(mount, s.Path), s.Created.Format(time.RFC3339),
			s.Files, units.FormatSize(s.Bytes), units.FormatSize(s.CopiedBytes+s.UnlinkedBytes))
	}
	return tw.Flush()
}
