package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
		// No daemon of this user: this user's socket of a root daemon
		// serving several users, if there is one.
		for _, m := range t.userMounts() {
			if u := client.RootUserSocket(t.sel.controlDir, m); u != "" {
				return client.Options{Socket: u}, nil
			}
		}
		return client.Options{}, err
	}
	return client.Options{Socket: d.IPCSocket()}, nil
}

// userMounts are the mounts whose root daemon's per-user socket options
// looks for: --mount, else /iowarp and none.
func (t *ipcTarget) userMounts() []string {
	if t.sel.mount != "" {
		if abs, err := filepath.Abs(t.sel.mount); err == nil {
			return []string{abs}
		}
	}
	return []string{client.DefaultMount, ""}
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

// withBucket connects and opens bucket (creating it with o), runs f, and
// closes both.
func (t *ipcTarget) withBucket(bucket string, o client.BucketOptions, f func(*client.Client, *client.Bucket) error) error {
	c, err := t.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.BucketWith(bucket, o)
	if err != nil {
		return err
	}
	return f(c, b)
}

// newBlobCmds are the commands on a running daemon's buckets and blobs.
func newBlobCmds() []*cobra.Command {
	return []*cobra.Command{newPutCmd(), newGetCmd(), newLsCmd(), newRmCmd(), newChmodCmd(), newBenchCmd()}
}

func newPutCmd() *cobra.Command {
	var t ipcTarget
	var durable, durableBucket, version bool
	var mode string
	var keep int
	var tags []string
	var compress string
	cmd := &cobra.Command{
		Use:   "put BUCKET BLOB [FILE|-]",
		Short: "Store FILE (or stdin) as BLOB in BUCKET of the running daemon's buffer pool",
		Long: `Store FILE (or stdin) as BLOB in BUCKET. Bucket names are paths
(simulation/run1/temperature). A new bucket belongs to the caller, mode 0600
unless --mode says otherwise. --durable returns once the blob is in the
daemon's durable store on its file tier (it survives kill -9 and a restart),
and a bucket it creates is durable: every later write to it is durable too,
with or without --durable (an existing plain bucket stays plain, unless
--durable-bucket makes it durable first: its owner only);
--version keeps the blob's current bytes as the previous version (the bucket
keeps --keep versions, set when it is created).`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseMode(mode)
			if err != nil {
				return err
			}
			kv, err := parseTags(tags)
			if err != nil {
				return err
			}
			if !bufferpool.ValidCompress(compress) {
				return fmt.Errorf("--compress %q: not one of %s", compress, strings.Join(bufferpool.Codecs(), ", "))
			}
			data, err := readInput(args[2:])
			if err != nil {
				return err
			}
			o := client.PutOptions{Durable: durable}
			return t.withBucket(args[0], client.BucketOptions{Mode: m, KeepVersions: keep, Durable: durable}, func(_ *client.Client, b *client.Bucket) error {
				if durableBucket {
					if err := b.SetDurable(true); err != nil {
						return err
					}
				}
				if compress != "" {
					if err := b.SetCompress(compress); err != nil {
						return err
					}
				}
				if version {
					v, err := b.PutVersion(args[1], data, o)
					if err == nil {
						fmt.Fprintf(os.Stderr, "%s/%s: version %d\n", args[0], args[1], v)
					}
					if err != nil {
						return err
					}
				} else if err := b.PutWith(args[1], data, o); err != nil {
					return err
				}
				for _, kv := range kv {
					if err := b.SetTag(args[1], kv[0], kv[1]); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	t.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&durableBucket, "durable-bucket", false, "make the bucket durable first (every write to it, this one included, returns once the store has it; the bucket's owner only)")
	f.BoolVar(&durable, "durable", false, "return once the blob is on the persistent tier and the store is synced; a bucket this creates is durable (every write to it is)")
	f.BoolVar(&version, "version", false, "store as a new version, keeping the current bytes as the previous one")
	f.StringVar(&mode, "mode", "", "permission bits of a bucket this creates, octal (default 0600)")
	f.IntVar(&keep, "keep", 0, "versions of each blob a bucket this creates keeps (default 4)")
	f.StringArrayVar(&tags, "tag", nil, "set tag KEY=VALUE on the blob (repeatable)")
	f.StringVar(&compress, "compress", "", "compress the bucket's blobs when they move to a slower tier: "+
		strings.Join(bufferpool.Codecs(), ", ")+" (RAM stays uncompressed; a blob that does not shrink is stored as it is)")
	return cmd
}

func parseMode(s string) (uint32, error) {
	if s == "" {
		return 0, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("--mode: %q is not octal permission bits (0 to 0777)", s)
	}
	return uint32(m), nil
}

// parseTags splits KEY=VALUE arguments.
func parseTags(tags []string) ([][2]string, error) {
	var out [][2]string
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--tag: %q is not KEY=VALUE", t)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func readInput(args []string) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(args[0])
}

func newGetCmd() *cobra.Command {
	var t ipcTarget
	var version uint64
	cmd := &cobra.Command{
		Use:   "get BUCKET BLOB [FILE|-]",
		Short: "Write BLOB of BUCKET (or --version N of it) to FILE (or stdout)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return t.withBucket(args[0], client.BucketOptions{}, func(_ *client.Client, b *client.Bucket) error {
				var data []byte
				var err error
				if version > 0 {
					data, err = b.GetVersion(args[1], version)
				} else {
					data, err = b.Get(args[1])
				}
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
	cmd.Flags().Uint64Var(&version, "version", 0, "the version to read (iowarp ls --versions BUCKET BLOB lists them)")
	return cmd
}

// lsFlags are the filters of iowarp ls.
type lsFlags struct {
	tags              []string
	minSize, maxSize  string
	since, before     string
	long, buckets, vs bool
}

// query builds the query of ls PREFIX with filters.
func (l *lsFlags) query(prefix string) (client.Query, error) {
	q := client.Query{Prefix: prefix}
	for _, t := range l.tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return q, fmt.Errorf("--tag: %q is not KEY=VALUE or KEY=MIN..MAX", t)
		}
		if lo, hi, isRange := strings.Cut(v, ".."); isRange {
			q.Tags = append(q.Tags, client.TagFilter{Key: k, Range: true, Min: lo, Max: hi})
		} else {
			q.Tags = append(q.Tags, client.TagFilter{Key: k, Value: v})
		}
	}
	var err error
	for _, sz := range []struct {
		flag, s string
		dst     *int64
	}{{"--min-size", l.minSize, &q.MinSize}, {"--max-size", l.maxSize, &q.MaxSize}} {
		if sz.s == "" {
			continue
		}
		if *sz.dst, err = units.ParseSize(sz.s); err != nil {
			return q, fmt.Errorf("%s: %w", sz.flag, err)
		}
	}
	for _, tm := range []struct {
		flag, s string
		dst     *time.Time
	}{{"--since", l.since, &q.ModifiedAfter}, {"--before", l.before, &q.ModifiedBefore}} {
		if tm.s == "" {
			continue
		}
		if *tm.dst, err = parseWhen(tm.s); err != nil {
			return q, fmt.Errorf("%s: %w", tm.flag, err)
		}
	}
	return q, nil
}

func (l *lsFlags) filtered() bool {
	return len(l.tags) > 0 || l.minSize != "" || l.maxSize != "" || l.since != "" || l.before != ""
}

// parseWhen reads RFC 3339 or a duration ago (10m).
func parseWhen(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor a duration ago (10m)", s)
	}
	return t, nil
}

func newLsCmd() *cobra.Command {
	var t ipcTarget
	var l lsFlags
	cmd := &cobra.Command{
		Use:   "ls [PREFIX|BUCKET] [BLOB]",
		Short: "List buckets (under PREFIX), the blobs of BUCKET, blobs matching filters, or the versions of BLOB",
		Long: `List the running daemon's buckets that you may read. With PREFIX, those named
PREFIX or below it (sim/run1 lists sim/run1 and sim/run1/..., not sim/run10).
With the name of a bucket (and neither --buckets nor a trailing '/'), its
blobs. With filters
(--tag KEY=VALUE, --tag KEY=MIN..MAX, --min-size, --max-size, --since,
--before) the matching blobs of the buckets under PREFIX, answered from the
daemon's name and tag indexes. With --versions BUCKET BLOB, the versions kept.`,
		Args: cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := t.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			return l.run(c, args)
		},
	}
	t.register(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&l.tags, "tag", nil, "only blobs with tag KEY=VALUE, or KEY=MIN..MAX (numbers compare numerically; a bound may be empty)")
	f.StringVar(&l.minSize, "min-size", "", "only blobs of at least this size")
	f.StringVar(&l.maxSize, "max-size", "", "only blobs of at most this size")
	f.StringVar(&l.since, "since", "", "only blobs modified after this time (RFC 3339, or a duration ago: 10m)")
	f.StringVar(&l.before, "before", "", "only blobs modified before this time")
	f.BoolVarP(&l.long, "long", "l", false, "buckets with owner, group, mode and versions kept")
	f.BoolVar(&l.buckets, "buckets", false, "list buckets even if PREFIX names one")
	f.BoolVar(&l.vs, "versions", false, "list the versions of BLOB in BUCKET")
	return cmd
}

func (l *lsFlags) run(c *client.Client, args []string) error {
	prefix := ""
	if len(args) > 0 {
		prefix = args[0]
	}
	switch {
	case l.vs:
		if len(args) != 2 {
			return fmt.Errorf("ls --versions BUCKET BLOB")
		}
		b, err := c.Bucket(args[0])
		if err != nil {
			return err
		}
		vs, err := b.ListVersions(args[1])
		if err != nil {
			return err
		}
		return printVersions(os.Stdout, vs)
	case len(args) == 2:
		return fmt.Errorf("ls BUCKET BLOB lists versions: add --versions")
	case l.filtered():
		q, err := l.query(prefix)
		if err != nil {
			return err
		}
		res, err := c.Query(q)
		if err != nil {
			return err
		}
		return printResults(os.Stdout, res)
	}
	names, err := c.BucketsUnder(prefix)
	if err != nil {
		return err
	}
	if prefix != "" && !l.buckets && slices.Contains(names, strings.TrimSuffix(prefix, "/")) && !strings.HasSuffix(prefix, "/") {
		b, err := c.Bucket(prefix)
		if err != nil {
			return err
		}
		infos, err := b.List()
		if err != nil {
			return err
		}
		return printBlobs(os.Stdout, infos)
	}
	if !l.long {
		for _, n := range names {
			fmt.Println(n)
		}
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tOWNER\tGROUP\tMODE\tKEEP\tDURABLE\tCREATED")
	for _, n := range names {
		st, err := c.StatBucket(n)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%04o\t%d\t%s\t%s\n", n, st.Owner, st.Group, st.Mode, st.KeepVersions, durability(st),
			st.Created.Format(time.RFC3339))
	}
	return tw.Flush()
}

func tagString(tags map[string]string) string {
	var out []string
	for k, v := range tags {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func printBlobs(w io.Writer, infos []client.BlobInfo) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOB\tSIZE\tTIER\tDIRTY\tVERSION\tDURABLE\tREADS\tLAST USED\tTAGS")
	for _, i := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d\t%v\t%d\t%s\t%s\n", i.Name, units.FormatSize(i.Size), i.Tier, i.Dirty,
			max(i.Generation, 1), i.Durable, i.Reads, i.LastUsed.Format(time.RFC3339), tagString(i.Tags))
	}
	return tw.Flush()
}

func printResults(w io.Writer, res []client.QueryResult) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tBLOB\tSIZE\tTIER\tMODIFIED\tTAGS")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Bucket, r.Name, units.FormatSize(r.Size), r.Tier,
			r.Modified.Format(time.RFC3339), tagString(r.Tags))
	}
	return tw.Flush()
}

func printVersions(w io.Writer, vs []client.VersionInfo) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSIZE\tMODIFIED\tCURRENT\tDURABLE")
	for _, v := range vs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%v\n", v.Version, units.FormatSize(v.Size), v.Modified.Format(time.RFC3339),
			v.Current, v.Durable)
	}
	return tw.Flush()
}

func newChmodCmd() *cobra.Command {
	var t ipcTarget
	cmd := &cobra.Command{
		Use:   "chmod MODE BUCKET",
		Short: "Set the permission bits of BUCKET (octal; its owner or root)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := strconv.ParseUint(args[0], 8, 32)
			if err != nil || m > 0o777 {
				return fmt.Errorf("mode %q is not octal permission bits (0 to 0777)", args[0])
			}
			c, err := t.connect()
			if err != nil {
				return err
			}
			defer c.Close()
			b, err := c.Bucket(args[1])
			if err != nil {
				return err
			}
			return b.Chmod(uint32(m))
		},
	}
	t.register(cmd)
	return cmd
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
			return t.withBucket(args[0], client.BucketOptions{}, func(_ *client.Client, b *client.Bucket) error {
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

// durability says in ls -l how much of a bucket survives a restart: all
// ("bucket": a durable bucket), the blobs put durably ("blobs"), or
// nothing ("no").
func durability(st client.BucketStat) string {
	switch {
	case st.DurableBucket:
		return "bucket"
	case st.Durable:
		return "blobs"
	}
	return "no"
}
