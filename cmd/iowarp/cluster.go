package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/cluster"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/config"
)

// The daemon's side of the cluster block (package cluster): start and
// stop, and `iowarp cluster status`.

func init() { registerCommand(newClusterCmd) }

// clusterConfig converts the config's cluster block.
func clusterConfig(cfg *config.Config) cluster.Config {
	k := cfg.Cluster
	c := cluster.Config{Cluster: k.Name, Listen: k.Listen, Endpoints: k.Endpoints(), TTL: k.TTL,
		SharedNamespace: k.SharedNamespace && !cfg.NoMount(), Mount: cfg.Mount, Node: k.Node,
		Organizer: cluster.Organizer{Interval: k.Organizer.Interval, High: k.Organizer.HighWatermark, Low: k.Organizer.LowWatermark}}
	if k.Embed.Name != "" {
		c.Embed = &cluster.Embed{Name: k.Embed.Name, Peers: k.Embed.Peers, Client: k.Embed.ClientURL(), Dir: k.Embed.Dir}
	}
	if c.Node == "" {
		c.Node = k.Embed.Name
	}
	if c.Node == "" {
		// Without an embedded member: host name and gRPC port, unique
		// as long as one host runs one daemon per port.
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(k.Listen)
		c.Node = host + ":" + port
	}
	return c
}

// startCluster joins the cluster when the config has one (nil, nil
// otherwise); with shared_namespace the file layer asks it for other
// nodes' files.
func startCluster(cfg *config.Config, pool *bufferpool.Pool, fsys *files.FS) (*cluster.Node, error) {
	if !cfg.Cluster.Enabled() {
		return nil, nil
	}
	c := clusterConfig(cfg)
	n, err := cluster.Start(c, cluster.Local{FS: fsys, Pool: pool.Stats, Blobs: pool})
	if err != nil {
		return nil, err
	}
	if c.SharedNamespace && fsys != nil {
		fsys.SetRemote(n)
	}
	return n, nil
}

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "The daemons of a job that meet in etcd (config: cluster)",
	}
	var cfgFile string
	var asJSON bool
	var timeout time.Duration
	status := &cobra.Command{
		Use:   "status --config FILE",
		Short: "List the members of the cluster (tiers, capacity, health) and the health of its etcd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgFile)
			if err != nil {
				return err
			}
			if !cfg.Cluster.Enabled() {
				return fmt.Errorf("%s has no cluster (cluster.name is empty)", cfgFile)
			}
			st, err := cluster.GetStatus(context.Background(), cfg.Cluster.Endpoints(), cfg.Cluster.Name, timeout)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printClusterStatus(cmd, st)
			return nil
		},
	}
	status.Flags().StringVar(&cfgFile, "config", "", "the daemons' config file (its cluster block names the etcd)")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	status.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long each member and etcd endpoint may take to answer")
	status.MarkFlagRequired("config")
	cmd.AddCommand(status, newClusterPutCmd(), newClusterGetCmd())
	return cmd
}

// loadCluster reads a config that must have a cluster block.
func loadCluster(file string) (*config.Config, error) {
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	if !cfg.Cluster.Enabled() {
		return nil, fmt.Errorf("%s has no cluster (cluster.name is empty)", file)
	}
	return cfg, nil
}

func newClusterPutCmd() *cobra.Command {
	var cfgFile string
	cmd := &cobra.Command{
		Use:   "put --config FILE BUCKET BLOB [FILE|-]",
		Short: "Put a blob into the cluster's CTE: the daemon of this node (cluster.listen) keeps it if it has room, else the member with the most",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadCluster(cfgFile)
			if err != nil {
				return err
			}
			data, err := readInput(args[2:])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			node, err := cluster.PutBlob(ctx, cfg.Cluster.Listen, args[0], args[1], data)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: %d bytes on %s\n", args[0], args[1], len(data), node)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "the daemons' config file")
	cmd.MarkFlagRequired("config")
	return cmd
}

func newClusterGetCmd() *cobra.Command {
	var cfgFile string
	cmd := &cobra.Command{
		Use:   "get --config FILE BUCKET BLOB [FILE|-]",
		Short: "Get a blob of the cluster's CTE from whichever node holds it (the placement map in etcd)",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadCluster(cfgFile)
			if err != nil {
				return err
			}
			cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Cluster.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			data, err := cluster.GetBlob(ctx, cli, cfg.Cluster.Name, args[0], args[1])
			if err != nil {
				return err
			}
			if len(args) == 3 && args[2] != "-" {
				return os.WriteFile(args[2], data, 0o644)
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "the daemons' config file")
	cmd.MarkFlagRequired("config")
	return cmd
}

func printClusterStatus(cmd *cobra.Command, st cluster.Status) {
	out := cmd.OutOrStdout()
	healthy := 0
	for _, e := range st.Etcd {
		if e.Healthy {
			healthy++
		}
	}
	fmt.Fprintf(out, "cluster %s: %d members, etcd %d of %d endpoints healthy, %d owned files\n",
		st.Cluster, len(st.Members), healthy, len(st.Etcd), st.Owners)
	w := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tADDR\tHEALTH\tTIERS (used/capacity, dirty)\tOWNS\tMOUNT\tPID")
	for _, m := range st.Members {
		health := fmt.Sprintf("ok (%d ms)", m.PingMillis)
		if !m.Healthy {
			health = "UNREACHABLE: " + m.Error
		}
		var tiers []string
		for _, t := range m.Tiers {
			tiers = append(tiers, fmt.Sprintf("%s %s/%s, %s", t.Name, units.FormatSize(t.Used), units.FormatSize(t.Capacity), units.FormatSize(t.Dirty)))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%d\n", m.Name, m.Addr, health, strings.Join(tiers, "; "), m.OwnedFiles, m.Mount, m.PID)
	}
	w.Flush()
	for _, e := range st.Etcd {
		switch {
		case e.Error != "":
			fmt.Fprintf(out, "etcd %s: DOWN: %s\n", e.Endpoint, e.Error)
		case e.Leader:
			fmt.Fprintf(out, "etcd %s: ok (leader)\n", e.Endpoint)
		default:
			fmt.Fprintf(out, "etcd %s: ok\n", e.Endpoint)
		}
	}
}
