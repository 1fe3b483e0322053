package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/formats/omni/search"
	"github.com/iowarp/iowarp/fusefs"
	"github.com/iowarp/iowarp/runtime/control"
)

func init() { registerCommand(newSearchCmd) }

// newSearchService is the daemon's search index of its mount's views
// and of the registry (nil without a mount).
func newSearchService(mount, registry string) *search.Service {
	if mount == "" {
		return nil
	}
	return search.NewService(search.ServiceOptions{File: search.IndexFile(registry, mount), Registry: registry,
		Mount: mount, Logf: logrus.Warnf})
}

// searchStream is the control socket's "search" operation.
func searchStream(p *atomic.Pointer[search.Service]) control.StreamHandler {
	return func(ctx context.Context, raw json.RawMessage, _ func(any)) (any, error) {
		s := p.Load()
		if s == nil {
			return nil, search.ErrNoEngine
		}
		var q search.Query
		if err := json.Unmarshal(raw, &q); err != nil {
			return nil, fmt.Errorf("search: bad arguments: %w", err)
		}
		return s.Search(ctx, q)
	}
}

func newSearchCmd() *cobra.Command {
	var s selector
	var within string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "search QUERY [--within lat=LO:HI,lon=LO:HI,time=FROM:TO]",
		Short: "Find variables across every dataset the daemon has seen (assimilated or opened under .omni), ranked by BM25",
		Long: `Search the daemon's index of datasets: every variable of every assimilated dataset and of
every dataset opened under MOUNT/.omni, by its name, long_name, standard_name, units, other
attributes and its dataset's name and global attributes, ranked by BM25. --within keeps the
variables whose coordinates have values in each range (numbers, or dates for CF time
coordinates; a dimension name or a CF role: time, lat, lon, level); longitudes compare modulo
360 and lo > hi wraps (lon=350:10). Each hit names the dataset, the variable and a ready .omni
path (with the --within filters as a view). The index is updated when a dataset is assimilated
or opened, and when a dataset among the hits changed. Exits 1 when nothing matches.`,
		Example: `  iowarp search "sea surface temperature"
  iowarp search precipitation --within lat=-10:10,time=2024-01-01:2024-06-30
  iowarp search salinity --json | jq -r '.hits[0].path'`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := search.Query{Limit: limit}
			if len(args) == 1 {
				q.Text = args[0]
			}
			var err error
			if q.Within, err = search.ParseWithin(within); err != nil {
				return err
			}
			if strings.TrimSpace(q.Text) == "" && len(q.Within) == 0 {
				return errors.New("search: give a QUERY, or --within ranges, or both")
			}
			d, err := s.pick("")
			if err != nil {
				return err
			}
			var res search.Result
			if err := control.Stream(d.Socket, "search", q, nil, &res); err != nil {
				return err
			}
			return printSearch(cmd.OutOrStdout(), res, q, asJSON)
		},
	}
	s.register(cmd)
	f := cmd.Flags()
	f.StringVar(&within, "within", "", "coordinate ranges, e.g. lat=-10:10,lon=350:10,time=2024-01-01:2024-06-30")
	f.IntVar(&limit, "limit", search.DefaultLimit, "most hits shown")
	f.BoolVar(&asJSON, "json", false, "print the hits as JSON")
	return cmd
}

// errNoHits: a search that matched nothing (exit status 1).
var errNoHits = errors.New("no variable matches")

func printSearch(w io.Writer, res search.Result, q search.Query, asJSON bool) error {
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\n", b)
	} else if len(res.Hits) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCORE\tDATASET\tVARIABLE\tUNITS\tDESCRIPTION\tPATH")
		for _, h := range res.Hits {
			desc := h.LongName
			if desc == "" {
				desc = h.StandardName
			}
			fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\t%s\t%s\n", h.Score, h.Dataset, h.Variable, h.Units, desc, h.Path)
		}
		tw.Flush()
	}
	if len(res.Hits) == 0 {
		return fmt.Errorf("search: %w: %q%s (%d datasets, %d variables indexed)", errNoHits, q.Text,
			withinText(q.Within), res.Datasets, res.Variables)
	}
	return nil
}

func withinText(fs []omni.Filter) string {
	if len(fs) == 0 {
		return ""
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Dim + "=" + f.Lo + ":" + f.Hi
	}
	return " within " + strings.Join(parts, ",")
}

// withSearch adds the "search" operation to the control streams.
func withSearch(streams map[string]control.StreamHandler, s *atomic.Pointer[search.Service]) map[string]control.StreamHandler {
	streams["search"] = searchStream(s)
	return streams
}

// omniOptions are the mount's views, with the search index's hook.
func (d *daemon) omniOptions() *fusefs.OMNIOptions {
	reg := omni.DefaultRegistryDir()
	o := &fusefs.OMNIOptions{Formats: d.fmts, Pool: d.pool, Registry: reg}
	if s := newSearchService(d.cfg.Mount, reg); s != nil {
		d.search.Store(s)
		o.OnLoad = s.OnLoad
	}
	return o
}

// closeSearch stops the indexer (before the helpers it reads through)
// and saves the index.
func (d *daemon) closeSearch() {
	if s := d.search.Load(); s != nil {
		if err := s.Close(); err != nil { // idempotent; searches still answer
			logrus.Warnf("search index: %v", err)
		}
	}
}
