package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/client"
	"github.com/iowarp/iowarp/internal/units"
)

// ipcTarget names the daemon the blob commands talk to over ipc: its
// socket, or the daemon the selector picks.
type ipcTarget struct {
	socket string
	sel    selector
}

func (t *ipcTarget) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.socket, "socket", "", "ipc socket of the daemon (env "+client.EnvSocket+")")
	t.sel.register(cmd)
}

// options names the ipc socket: --socket, else $IOWARP_IPC_SOCKET if
// neither --mount nor --control-dir is given, else that of the daemon
// the selector picks.
func (t *ipcTarget) options() (client.Options, error) {
	if t.socket != "" {
		return client.Options{Socket: t.socket}, nil
	}
	if env := os.Getenv(client.EnvSocket); env != "" && t.sel.mount == "" && t.sel.controlDir == "" {
		return client.Options{Socket: env}, nil
	}
	d, err := t.sel.pick("")
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{Socket: d.IPCSocket()}, nil
}

func (t *ipcTarget) connect() (*client.Client, error) {
	o, err := t.options()
	if err != nil {
		return nil, err
	}
	c, err := client.Connect(o)
	if err != nil {
		return nil, fmt.Errorf("%w (is a daemon running? see --socket, --mount, --control-dir)", err)
	}
	return c, nil
}

// withBucket connects and opens bucket, runs f, and closes both.
func (t *ipcTarget) withBucket(bucket string, f func(*client.Client, *client.Bucket) error) error {
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.Bucket(bucket)
	if err != nil {
		return err
	}
	return f(c, b)
}

// newBlobCmds are the commands on a running daemon's buckets and blobs.
func newBlobCmds() []*cobra.Command {
	return []*cobra.Command{newPutCmd(), newGetCmd(), newLsCmd(), newRmCmd(), newBenchCmd()}
}

func newPutCmd() *cobra.Command {
	var t ipcTarget
	var compress string
	cmd := &cobra.Command{
		Use:   "put BUCKET BLOB [FILE|-]",
		Short: "Store FILE (or stdin) as BLOB in BUCKET of the running daemon's buffer pool",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !bufferpool.ValidCompress(compress) {
				return fmt.Errorf("--compress %q: not one of %s", compress, strings.Join(bufferpool.Codecs(), ", "))
			}
			data, err := readInput(args[2:])
			if err != nil {
				return err
			}
			return t.withBucket(args[0], func(_ *client.Client, b *client.Bucket) error {
				if compress != "" {
					if err := b.SetCompress(compress); err != nil {
						return err
					}
				}
				return b.Put(args[1], data)
			})
		},
	}
	t.register(cmd)
	cmd.Flags().StringVar(&compress, "compress", "", "compress the bucket's blobs when they move to a slower tier: "+
		strings.Join(bufferpool.Codecs(), ", ")+" (RAM stays uncompressed; a blob that does not shrink is stored as it is)")
	return cmd
}

func readInput(args []string) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(args[0])
}

func newGetCmd() *cobra.Command {
	var t ipcTarget
	cmd := &cobra.Command{
		Use:   "get BUCKET BLOB [FILE|-]",
		Short: "Write BLOB of BUCKET to FILE (or stdout)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.withBucket(args[0], func(_ *client.Client, b *client.Bucket) error {
				data, err := b.Get(args[1])
				if err != nil {
					return err
				}
				if len(args) < 3 || args[2] == "-" {
					_, err = os.Stdout.Write(data)
					return err
				}
				return os.WriteFile(args[2], data, 0o644)
			})
		},
	}
	t.register(cmd)
	return cmd
}

func newLsCmd() *cobra.Command {
	var t ipcTarget
	cmd := &cobra.Command{
		Use:   "ls [BUCKET]",
		Short: "List the running daemon's buckets, or the blobs of BUCKET",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := t.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			if len(args) == 0 {
				names, err := c.Buckets()
				for _, n := range names {
					fmt.Println(n)
				}
				return err
			}
			b, err := c.Bucket(args[0])
			if err != nil {
				return err
			}
			infos, err := b.List()
			if err != nil {
				return err
			}
			return printBlobs(os.Stdout, infos)
		},
	}
	t.register(cmd)
	return cmd
}

func printBlobs(w io.Writer, infos []client.BlobInfo) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOB\tSIZE\tTIER\tDIRTY\tVERSION\tREADS\tLAST USED\tTAGS")
	for _, i := range infos {
		var tags []string
		for k, v := range i.Tags {
			tags = append(tags, k+"="+v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%d\t%s\t%s\n", i.Name, units.FormatSize(i.Size), i.Tier, i.Dirty,
			i.Version, i.Reads, i.LastUsed.Format(time.RFC3339), strings.Join(tags, ","))
	}
	return tw.Flush()
}

func newRmCmd() *cobra.Command {
	var t ipcTarget
	var bucket bool
	cmd := &cobra.Command{
		Use:   "rm BUCKET BLOB... | rm --bucket BUCKET",
		Short: "Delete blobs of BUCKET, or (--bucket) the whole bucket",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bucket {
				if len(args) != 1 {
					return fmt.Errorf("rm --bucket takes one bucket name")
				}
				c, err := t.connect()
				if err != nil {
					return err
				}
				defer c.Close()
				return c.DeleteBucket(args[0])
			}
			if len(args) < 2 {
				return fmt.Errorf("rm BUCKET BLOB...: name a blob, or use --bucket to delete the bucket")
			}
			return t.withBucket(args[0], func(_ *client.Client, b *client.Bucket) error {
				for _, blob := range args[1:] {
					if err := b.Delete(blob); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	t.register(cmd)
	cmd.Flags().BoolVarP(&bucket, "bucket", "r", false, "delete the bucket and all its blobs")
	return cmd
}

func newBenchCmd() *cobra.Command {
	b := &cobra.Command{Use: "bench", Short: "Benchmarks against a running daemon"}
	var t ipcTarget
	var d time.Duration
	ipcCmd := &cobra.Command{
		Use:   "ipc",
		Short: "Round trips (steady with the daemon spinning or sleeping, after idle), tasks/s with 1 and 4 clients, Put/Get vs a cache-cold memcpy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := t.options()
			if err != nil {
				return err
			}
			r, err := client.Bench(o, d)
			if err != nil {
				return err
			}
			r.Print(os.Stdout)
			return nil
		},
	}
	t.register(ipcCmd)
	ipcCmd.Flags().DurationVar(&d, "time", time.Second, "time spent on each measurement")
	b.AddCommand(ipcCmd)
	return b
}
