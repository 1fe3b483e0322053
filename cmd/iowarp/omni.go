package main

// OMNI commands: describe, export, query, assimilate. Format readers run
// in helper processes (formats/helper: this binary re-executed), so a
// crafted file costs a helper, never this process; writers run here, on
// data the helpers decoded.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/omni/view"
)

// commandMakers are commands other files register from init(); the root
// command adds them (extraCommands), so new commands need no edit of main.go.
var commandMakers []func() *cobra.Command

func registerCommand(f func() *cobra.Command) { commandMakers = append(commandMakers, f) }

func extraCommands() []*cobra.Command {
	out := make([]*cobra.Command, 0, len(commandMakers))
	for _, f := range commandMakers {
		out = append(out, f())
	}
	return out
}

func init() {
	registerCommand(newDescribeCmd)
	registerCommand(newExportCmd)
	registerCommand(newQueryCmd)
	registerCommand(newAssimilateCmd)
}

// omniFlags are the flags every OMNI command shares.
type omniFlags struct {
	registry string
	deadline time.Duration
}

func (o *omniFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.registry, "registry", omni.DefaultRegistryDir(),
		"directory of assimilated datasets (env IOWARP_STATE_DIR/omni)")
	cmd.Flags().DurationVar(&o.deadline, "deadline", 2*time.Minute,
		"deadline of the whole command: helper requests and writing stop then, and it fails (0: none)")
}

// bound returns ctx limited by --deadline.
func (o *omniFlags) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.deadline <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, o.deadline, fmt.Errorf("--deadline %v: %w", o.deadline, context.DeadlineExceeded))
}

// within runs f and returns its error, or the context's cause as soon as
// ctx ends, whatever f is doing (a writer deep in a library call, a
// helper that does not die at once): the command returns then and exits.
func within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (o *omniFlags) pool() *helper.Pool {
	d := o.deadline
	if d <= 0 {
		d = 24 * time.Hour
	}
	return helper.New(helper.Options{Size: 2, Deadline: d, Logf: logrus.Warnf})
}

// source resolves DATASET: a file or store, else an assimilated dataset's
// name, with the dataset_filter and byte range of the job that assimilated
// it (zero for a file, or a dataset assimilated whole).
func (o *omniFlags) source(arg string) (src string, rng omni.Range, err error) {
	if _, err := os.Stat(arg); err == nil {
		src, err := filepath.Abs(arg)
		return src, omni.Range{}, err
	}
	if omni.ValidName(arg) {
		if e, err := (omni.Registry{Dir: o.registry}).Get(arg); err == nil {
			return e.Source, e.Range(), nil
		}
	}
	return "", omni.Range{}, fmt.Errorf("%s: no such file and no assimilated dataset of that name (registry %s)", arg, o.registry)
}

// cutOpen opens src in p as a job with range rng shows it: cut to its
// byte range (omni.Cut), then left with what its dataset_filter keeps.
func cutOpen(ctx context.Context, p *helper.Pool, src string, rng omni.Range) (*omni.Dataset, *omni.Cut, error) {
	ds, err := p.Open(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	cut, err := ds.ApplyRange(rng)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", src, err)
	}
	ds.KeepMatching(rng.Filter)
	return ds, cut, nil
}

// readCut reads the whole of v as the cut dataset shows it: the records
// the cut keeps, read as a selection of the stored variable.
func readCut(ctx context.Context, p *helper.Pool, src string, cut *omni.Cut, v *omni.Variable) ([]byte, error) {
	sv, h := cut.Stored(v, omni.All(v.Shape))
	if sv == v {
		return p.ReadAll(ctx, src, v)
	}
	d, err := p.Read(ctx, src, sv, h)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return bytes.Clone(d.Bytes()), nil
}

// open resolves DATASET (source) and opens it in a new helper pool, which
// the caller closes; on error the pool is already closed. An assimilated
// dataset shows only what its job's dataset_filter and byte range keep
// (read its variables with readCut).
func (o *omniFlags) open(ctx context.Context, arg string) (*helper.Pool, string, *omni.Dataset, *omni.Cut, error) {
	src, rng, err := o.source(arg)
	if err != nil {
		return nil, "", nil, nil, err
	}
	p := o.pool()
	ds, cut, err := cutOpen(ctx, p, src, rng)
	if err != nil {
		p.Close()
		return nil, "", nil, nil, err
	}
	return p, src, ds, cut, nil
}

func newDescribeCmd() *cobra.Command {
	var of omniFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "describe DATASET",
		Short: "Print a dataset's groups, dimensions, variables and attributes (h5ls/ncdump -h style)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := of.bound(cmd.Context())
			defer cancel()
			var ds *omni.Dataset
			err := within(ctx, func() error {
				p, _, d, _, err := of.open(ctx, args[0])
				if err == nil {
					p.Close()
				}
				ds = d
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				b, err := ds.Schema()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			return omni.Describe(cmd.OutOrStdout(), ds)
		},
	}
	of.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print schema.json instead")
	return c
}

var exportExts = map[string]string{
	".nc": "netcdf", ".nc4": "netcdf", ".h5": "hdf5", ".hdf5": "hdf5", ".he5": "hdf5",
	".omni": "omni", ".zarr": "omni", ".csv": "csv", ".parquet": "parquet",
}

func newExportCmd() *cobra.Command {
	var of omniFlags
	var format string
	var split bool
	c := &cobra.Command{
		Use:   "export DATASET OUT",
		Short: "Write a dataset as NetCDF-4, HDF5, OMNI (Zarr v2), CSV or Parquet",
		Long: `export reads every variable of DATASET (a file, or the name of an
assimilated dataset) through the format helpers and writes OUT. --format
defaults from OUT's extension (.nc, .h5, .omni/.zarr, .csv, .parquet).
NetCDF-4, HDF5 and Zarr keep every group and variable, with the stored names.
CSV and Parquet are one table in long form, coordinate columns first: a
dataset whose variables do not all share one variable's dimensions (or are its
coordinates) fails, naming those left over, unless --split, which writes OUT as
a directory holding one file per variable (OUT/<group>/<name>.csv), each with
the coordinate columns of its axes.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format == "" {
				format = exportExts[strings.ToLower(filepath.Ext(args[1]))]
			}
			if format == "" {
				return fmt.Errorf("--format is one of netcdf, hdf5, omni, csv, parquet (OUT's extension says none)")
			}
			ctx, cancel := of.bound(cmd.Context())
			defer cancel()
			return within(ctx, func() error { return runExport(ctx, &of, args[0], args[1], format, split, cmd.ErrOrStderr()) })
		},
	}
	of.register(c)
	c.Flags().StringVar(&format, "format", "", "netcdf, hdf5, omni, csv or parquet")
	c.Flags().BoolVar(&split, "split", false, "OUT is a directory: one file per variable (for CSV and Parquet)")
	return c
}

func runExport(ctx context.Context, of *omniFlags, arg, out, format string, split bool, progress io.Writer) error {
	drv, err := omni.DriverNamed(format)
	if err != nil || drv.Write == nil {
		return fmt.Errorf("export: format %q cannot be written (netcdf, hdf5, omni, csv, parquet)", format)
	}
	p, src, ds, cut, err := of.open(ctx, arg)
	if err != nil {
		return err
	}
	defer p.Close()
	bar := newProgress(progress, "export "+filepath.Base(out), totalBytes(ds))
	read := func(v *omni.Variable) ([]byte, error) {
		b, err := readCut(ctx, p, src, cut, v)
		bar.Add(int64(len(b)))
		return b, err
	}
	if split {
		files, err := omni.WriteSplit(drv, out, ds, read)
		if err != nil {
			return fmt.Errorf("export %s to %s: %w", src, out, err)
		}
		bar.Finish()
		logrus.Infof("exported %s (%s) to %d %s files under %s", src, ds.Format, len(files), format, out)
		return nil
	}
	if err := drv.Write(out, ds, read); err != nil {
		return fmt.Errorf("export %s to %s: %w", src, out, err)
	}
	bar.Finish()
	logrus.Infof("exported %s (%s) to %s (%s)", src, ds.Format, out, format)
	return nil
}

func totalBytes(ds *omni.Dataset) int64 {
	var n int64
	for _, v := range ds.Variables() {
		n += v.Len() * int64(max(v.DType.Size(), 1))
	}
	return n
}

func newBar(total int64, desc string, w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w), progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetDescription(desc), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetVisibility(isTerminal(w)))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newQueryCmd() *cobra.Command {
	var of omniFlags
	var q queryFlags
	c := &cobra.Command{
		Use:   "query DATASET --var V [--time A:B] [--lat A:B] [--lon A:B] [--sel DIM=A:B]... [--out F]",
		Short: "Read a variable by coordinate ranges (or a slice) into .npy or CSV",
		Long: `query selects a variable by coordinate values (dates through the CF time
units of the time coordinate; --time/--lat/--lon find the axes by name or CF
role) or by index (--slice "0:2,10:20,:"), and writes the selection to --out:
NumPy .npy when it ends in .npy, else CSV (stdout without --out).

Values are decoded as xarray decodes them by default: _FillValue and
missing_value become NaN (an integer variable with them becomes float32 or
float64, as in xarray), scale_factor and add_offset are applied, CF times
(standard, gregorian, proleptic_gregorian calendars) become datetime64[ns]
(ISO 8601 in CSV). CSV has one column per axis holding the coordinate's
values (the index where the axis has none), then the values. --raw gives
the stored values instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := of.bound(cmd.Context())
			defer cancel()
			return within(ctx, func() error { return runQuery(ctx, &of, &q, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr()) })
		},
	}
	of.register(c)
	c.Flags().StringVar(&q.variable, "var", "", "variable path (required)")
	c.Flags().StringVar(&q.time, "time", "", "time range A:B (dates or values)")
	c.Flags().StringVar(&q.lat, "lat", "", "latitude range A:B")
	c.Flags().StringVar(&q.lon, "lon", "", "longitude range A:B")
	c.Flags().StringArrayVar(&q.sel, "sel", nil, "DIM=A:B on any dimension (repeatable)")
	c.Flags().StringVar(&q.slice, "slice", "", `index slice, as in a view name: "0:2,10:20,:"`)
	c.Flags().StringVar(&q.out, "out", "", "output file (.npy or CSV); CSV on stdout without it")
	c.Flags().BoolVar(&q.allowEmpty, "allow-empty", false, "write an empty result for an empty selection instead of failing")
	c.Flags().BoolVar(&q.raw, "raw", false, "the stored values, without CF decoding (masking, scale/offset, time)")
	c.MarkFlagRequired("var")
	return c
}

type queryFlags struct {
	variable, time, lat, lon, slice, out string
	sel                                  []string
	allowEmpty, raw                      bool
}

// viewName builds the view name the flags describe, so the CLI and the
// .omni/ views share one parser (and one engine: formats/omni/view).
func (q *queryFlags) viewName() (string, error) {
	var filters []string
	for _, kv := range [][2]string{{"time", q.time}, {"lat", q.lat}, {"lon", q.lon}} {
		if kv[1] != "" {
			filters = append(filters, kv[0]+"="+kv[1])
		}
	}
	filters = append(filters, q.sel...)
	name := path.Base("/" + q.variable)
	switch {
	case len(filters) > 0 && q.slice != "":
		return "", errors.New("query: --slice and coordinate ranges do not combine")
	case len(filters) > 0:
		name += "@" + strings.Join(filters, ",")
	case q.slice != "":
		name += "[" + q.slice + "]"
	}
	_, err := omni.ParseView(name)
	return name, err
}

// engine is a view engine over a new helper pool and a small RAM pool
// caching its blocks, for one command; closing it closes both.
type engine struct {
	*view.Engine
	helpers *helper.Pool
	pool    *bufferpool.Pool
}

// queryCache is the RAM the CLI's engine caches blocks in: a few blocks,
// enough for the read-ahead; a query streams, whatever its size.
const queryCache = 64 << 20

func (o *omniFlags) engine() (*engine, error) {
	pool, err := bufferpool.New(bufferpool.Config{Tiers: []bufferpool.TierConfig{
		{Name: "ram", Kind: bufferpool.KindRAM, Capacity: queryCache}}})
	if err != nil {
		return nil, err
	}
	h := o.pool()
	return &engine{Engine: view.New(view.Options{Formats: h, Pool: pool, Logf: func(string, ...any) {}}), helpers: h, pool: pool}, nil
}

func (e *engine) Close() {
	e.Engine.Close()
	e.helpers.Close()
	e.pool.Close()
}

func runQuery(ctx context.Context, of *omniFlags, q *queryFlags, arg string, stdout, stderr io.Writer) error {
	name, err := q.viewName()
	if err != nil {
		return err
	}
	src, rng, err := of.source(arg)
	if err != nil {
		return err
	}
	if v := path.Clean("/" + q.variable); !omni.MatchesFilter(v, rng.Filter) {
		return fmt.Errorf("query: %s is not in %s: its job's dataset_filter %q leaves it out: %w", v, arg, rng.Filter, omni.ErrNotFound)
	}
	e, err := of.engine()
	if err != nil {
		return err
	}
	defer e.Close()
	gen, err := e.DatasetOfRange(src, rng).Current()
	if err != nil {
		return err
	}
	plan := gen.Plan
	if q.raw {
		plan = gen.RawPlan
	}
	p, err := plan(path.Dir("/"+q.variable), name)
	if err != nil {
		return err
	}
	if h := p.Hyperslab(); h.Len() == 0 && !q.allowEmpty {
		return fmt.Errorf("query %s: the selection is empty (count %v of shape %v): no value of %s lies in the ranges given (--allow-empty writes an empty result)",
			name, h.Count, p.Variable().Shape, p.Variable().Path)
	}
	// Data in other files (external storage) is read as this user.
	ctx = view.WithCaller(ctx, view.Caller{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Pid: uint32(os.Getpid())})
	w := stdout
	if q.out != "" {
		f, err := os.Create(q.out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	masked, err := writeQuery(ctx, bw, p, strings.HasSuffix(q.out, ".npy"))
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	h := p.Hyperslab()
	fmt.Fprintf(stderr, "%s: start %v count %v stride %v (%d elements", p.Variable().Path, h.Start, h.Count, h.Strides(), h.Len())
	if dec := p.Decoding(); !dec.Identity() {
		fmt.Fprintf(stderr, ", decoded %s", dec)
		if dec.Masks() {
			fmt.Fprintf(stderr, ", %d masked", masked)
		}
	}
	fmt.Fprintln(stderr, ")")
	return nil
}

// writeQuery streams the selection of p to w, block by block: .npy (its
// header, then the bytes) or CSV. It returns how many values are masked
// (NaN or NaT) when the decoding masks some.
func writeQuery(ctx context.Context, w io.Writer, p *view.Plan, npy bool) (int64, error) {
	var masked int64
	count := func(b []byte) {
		if p.Decoding().Masks() {
			masked += omni.CountMasked(p.DType(), b)
		}
	}
	if npy {
		hdr := p.NPYHeader()
		if hdr == nil {
			return 0, fmt.Errorf("%s: %s has no NumPy dtype: %w", p.Variable().Path, p.DType(), omni.ErrNotSupported)
		}
		if _, err := w.Write(hdr); err != nil {
			return 0, err
		}
		err := p.Each(ctx, func(_ omni.Hyperslab, b []byte) error {
			count(b)
			_, err := w.Write(b)
			return err
		})
		return masked, err
	}
	t, err := p.CSVTable()
	if err != nil {
		return 0, err
	}
	if err := t.WriteHeader(w); err != nil {
		return 0, err
	}
	err = p.Each(ctx, func(h omni.Hyperslab, b []byte) error {
		count(b)
		return t.WriteRows(w, h, b)
	})
	return masked, err
}

func newAssimilateCmd() *cobra.Command {
	var of omniFlags
	var name string
	var eager bool
	c := &cobra.Command{
		Use:   "assimilate FILE|JOB.yaml",
		Short: "Register a dataset (or every transfer of an OMNI job file) as an OMNI dataset",
		Long: `assimilate opens FILE through a format helper, checks it and records it,
with its schema, in the registry (--registry): <name>.json and
<name>.schema.json. The .omni/ view of the mount lists registered datasets.
--eager also reads every chunk of every variable now (so a broken chunk is
found at once; the daemon stages them into the pool). JOB.yaml is an
upstream IOWarp OMNI job: name, transfers[] of src, dst, format, range_off,
range_size, dataset_filter (a variable path or glob to keep).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := of.bound(cmd.Context())
			defer cancel()
			return within(ctx, func() error { return runAssimilate(ctx, &of, args[0], name, eager, cmd.ErrOrStderr()) })
		},
	}
	of.register(c)
	c.Flags().StringVar(&name, "name", "", "dataset name (default: the file name without extension)")
	c.Flags().BoolVar(&eager, "eager", false, "read every chunk now")
	return c
}

func runAssimilate(ctx context.Context, of *omniFlags, arg, name string, eager bool, progress io.Writer) error {
	transfers := []omni.Transfer{{Src: arg, Dst: name}}
	job := ""
	if ext := strings.ToLower(filepath.Ext(arg)); ext == ".yaml" || ext == ".yml" {
		b, err := os.ReadFile(arg)
		if err != nil {
			return err
		}
		j, err := omni.ParseJob(b)
		if err != nil {
			return fmt.Errorf("%s: %w", arg, err)
		}
		transfers, job = j.Transfers, j.Name
	}
	p := of.pool()
	defer p.Close()
	reg := omni.Registry{Dir: of.registry}
	for _, t := range transfers {
		if err := assimilateOne(ctx, p, reg, t, job, eager, progress); err != nil {
			return err
		}
	}
	return nil
}

func assimilateOne(ctx context.Context, p *helper.Pool, reg omni.Registry, t omni.Transfer, job string, eager bool, progress io.Writer) error {
	src, err := t.SrcPath()
	if err != nil {
		return err
	}
	if src, err = filepath.Abs(src); err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("assimilate: %w", err)
	}
	name := t.DstName()
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	}
	if !omni.ValidName(name) {
		return fmt.Errorf("assimilate %s: %q is not a usable dataset name (use --name)", src, name)
	}
	ds, cut, err := cutOpen(ctx, p, src, omni.Range{Off: t.RangeOff, Size: t.RangeSize, Filter: t.DatasetFilter})
	if err != nil {
		return fmt.Errorf("assimilate %s: %w", src, err)
	}
	e := omni.Entry{Name: name, Source: src, Format: ds.Format, Size: st.Size(), ModTime: st.ModTime(),
		Assimilated: time.Now().UTC(), Eager: eager, Filter: t.DatasetFilter, RangeOff: t.RangeOff,
		RangeSize: t.RangeSize, Job: job}
	for _, v := range ds.Variables() {
		e.Variables++
		e.Bytes += v.Len() * int64(v.DType.Size())
	}
	if eager {
		bar := newProgress(progress, "assimilate "+name, totalBytes(ds))
		for _, v := range ds.Variables() {
			b, err := readCut(ctx, p, src, cut, v)
			if err != nil {
				return fmt.Errorf("assimilate %s: %w", src, err)
			}
			bar.Add(int64(len(b)))
		}
		bar.Finish()
	}
	if err := reg.Add(e, ds); err != nil {
		return err
	}
	if cut != nil {
		logrus.Infof("%s: range_off %d range_size %d keep records %d to %d of %s (%d bytes each in %s)",
			name, t.RangeOff, t.RangeSize, cut.Start, cut.Start+cut.Count-1, cut.Dim, cut.Record, cut.Var)
	}
	logrus.Infof("assimilated %s as %s (%s, %d variables, %d bytes) in %s", src, name, ds.Format, e.Variables, e.Bytes, reg.Dir)
	return nil
}
