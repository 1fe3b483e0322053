package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/runtime/config"
)

// mountFlags are the flags of `iowarp mount` and `iowarp runtime start`.
type mountFlags struct {
	config       string
	backing      string
	ram          string
	nvme         string
	mode         string
	controlDir   string
	logFile      string
	daemon       bool
	flushOnClose bool
	allowOther   bool
}

func newMountCmd(lf *logFlags) *cobra.Command {
	mf := &mountFlags{}
	cmd := &cobra.Command{
		Use:   "mount DIR",
		Short: "Mount iowarp on DIR and serve it in the foreground until SIGTERM, Ctrl-C or umount",
		Long: `Mount iowarp on DIR with the embedded default configuration (see
'iowarp config default'), or --config FILE, overridden by the flags.

The command serves the mount in the foreground. SIGTERM, SIGINT (Ctrl-C) or an
external 'umount DIR' drain every dirty page to the backing directory, unmount
and exit 0. SIGHUP reopens the --log-file (logrotate) and does nothing else.
With --daemon it detaches and returns once the mount is ready.`,
		Example: `  iowarp mount /iowarp
  iowarp mount /iowarp --backing /lustre/$USER --ram 8GiB --nvme /local/nvme:200GiB
  iowarp mount /scratch/job --mode scratch --daemon`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mountMain(cmd, lf, mf, args[0])
		},
	}
	mf.register(cmd, true)
	return cmd
}

func (mf *mountFlags) register(cmd *cobra.Command, overrides bool) {
	f := cmd.Flags()
	f.StringVarP(&mf.config, "config", "c", "", "YAML config file read on top of the embedded default")
	f.BoolVarP(&mf.daemon, "daemon", "d", false, "detach; return once the mount is ready")
	f.StringVar(&mf.logFile, "log-file", "", "log here instead of stderr; SIGHUP reopens it (with --daemon the default is next to the control socket)")
	f.StringVar(&mf.controlDir, "control-dir", "", "directory of the control socket (overrides the config's control_dir; env "+envControlDir+" if neither)")
	if !overrides {
		return
	}
	f.StringVarP(&mf.backing, "backing", "b", "", "backing directory mirrored by the mount (the parallel file system)")
	f.StringVar(&mf.ram, "ram", "", "capacity of the RAM tier, e.g. 8GiB or 25% (of memory)")
	f.StringVar(&mf.nvme, "nvme", "", "file tier as DIR:SIZE, e.g. /local/nvme:200GiB")
	f.StringVarP(&mf.mode, "mode", "m", "", "writeback, writethrough or scratch")
	f.BoolVar(&mf.flushOnClose, "flush-on-close", false, "close(2) waits for the file's write-back")
	f.BoolVar(&mf.allowOther, "allow-other", false, "let other users use the mount")
}

func mountMain(cmd *cobra.Command, lf *logFlags, mf *mountFlags, dir string) error {
	cfg, err := mf.load()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cfg.Mount = abs
	cfg.Overridden("mount")
	if err := mf.override(cmd, cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return start(lf, mf, cfg)
}

// load returns the embedded default or the --config file on top of it.
func (mf *mountFlags) load() (*config.Config, error) {
	if mf.config == "" {
		return config.Default(), nil
	}
	return config.Load(mf.config)
}

// start runs the daemon in the foreground, or detached with --daemon.
func start(lf *logFlags, mf *mountFlags, cfg *config.Config) error {
	if !lf.explicit() {
		if err := lf.apply(cfg.LogLevel); err != nil {
			return err
		}
	}
	if mf.daemon && !isDaemonChild() {
		return daemonize(cfg, mf.logFile)
	}
	ignoreSIGPIPE()
	if err := openLog(cfg, mf.logFile); err != nil {
		return err
	}
	if cfg.NoMount() {
		return serveNoMount(cfg, daemonReadyFile())
	}
	return serve(cfg, daemonReadyFile())
}

// override applies the flags that were given on top of the config.
func (mf *mountFlags) override(cmd *cobra.Command, cfg *config.Config) error {
	set := cmd.Flags().Changed
	if set("backing") {
		abs, err := filepath.Abs(mf.backing)
		if err != nil {
			return err
		}
		cfg.Backing = abs
		cfg.Overridden("backing")
	}
	if set("mode") {
		switch m := files.Mode(mf.mode); m {
		case files.Writeback, files.Writethrough, files.Scratch:
			cfg.Mode = m
		default:
			return fmt.Errorf("--mode: %q is not one of writeback, writethrough, scratch", mf.mode)
		}
	}
	if set("ram") {
		if err := overrideTier(cfg, bufferpool.KindRAM, "", mf.ram, "--ram"); err != nil {
			return err
		}
	}
	if set("nvme") {
		i := strings.LastIndex(mf.nvme, ":")
		if i <= 0 {
			return fmt.Errorf("--nvme: %q is not DIR:SIZE", mf.nvme)
		}
		dir, err := filepath.Abs(mf.nvme[:i])
		if err != nil {
			return err
		}
		if err := overrideTier(cfg, bufferpool.KindFile, dir, mf.nvme[i+1:], "--nvme"); err != nil {
			return err
		}
	}
	if set("flush-on-close") {
		cfg.FlushOnClose = mf.flushOnClose
	}
	if set("allow-other") {
		cfg.AllowOther = mf.allowOther
	}
	return mf.overrideControlDir(cmd, cfg)
}

// overrideControlDir applies --control-dir, or $IOWARP_CONTROL_DIR when
// neither the flag nor the config names one: the daemon then listens
// where `iowarp stat` and the others look.
func (mf *mountFlags) overrideControlDir(cmd *cobra.Command, cfg *config.Config) error {
	dir := ""
	switch env := os.Getenv(envControlDir); {
	case cmd.Flags().Changed("control-dir"):
		dir = mf.controlDir
	case cfg.ControlDir == "" && env != "":
		dir = env
	default:
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cfg.ControlDir = abs
	return nil
}

// overrideTier sets the capacity (and dir) of the first tier of kind, or
// adds one: a RAM tier first, a file tier after the RAM tiers.
func overrideTier(cfg *config.Config, kind, dir, size, flag string) error {
	capacity, err := config.ParseCapacity(size, kind)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	i, ok := cfg.TierByKind(kind)
	if !ok {
		t := config.Tier{Name: "ram", Kind: kind, HighWatermark: 0.9, LowWatermark: 0.7}
		i = 0
		if kind == bufferpool.KindFile {
			t.Name = "nvme"
			for i < len(cfg.Tiers) && cfg.Tiers[i].Kind == bufferpool.KindRAM {
				i++
			}
		}
		cfg.Tiers = append(cfg.Tiers[:i], append([]config.Tier{t}, cfg.Tiers[i:]...)...)
	}
	cfg.Tiers[i].Capacity = capacity
	cfg.OverriddenBy(fmt.Sprintf("tiers[%d].capacity", i), flag)
	if dir != "" {
		cfg.Tiers[i].Dir = dir
		cfg.OverriddenBy(fmt.Sprintf("tiers[%d].dir", i), flag)
	}
	return nil
}

func newRuntimeCmd(lf *logFlags) *cobra.Command {
	rt := &cobra.Command{
		Use:   "runtime",
		Short: "Start, stop and inspect the per-node daemon",
	}
	mf := &mountFlags{}
	startCmd := &cobra.Command{
		Use:   "start --config FILE",
		Short: "Start the daemon and mount from a config file alone (foreground; --daemon to detach); mount: \"\" in it starts the runtime without a mount (CTE over ipc only)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mf.config == "" {
				return fmt.Errorf("runtime start needs --config FILE (or use 'iowarp mount DIR')")
			}
			cfg, err := config.Load(mf.config)
			if err != nil {
				return err
			}
			if err := mf.overrideControlDir(cmd, cfg); err != nil {
				return err
			}
			return start(lf, mf, cfg)
		},
	}
	mf.register(startCmd, false)
	rt.AddCommand(startCmd, newStopCmd(), newStatusCmd())
	return rt
}

func newConfigCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Show and check configuration files"}
	c.AddCommand(&cobra.Command{
		Use:   "default",
		Short: "Print the embedded default configuration (every key, documented)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := os.Stdout.Write(config.DefaultYAML())
			return err
		},
	}, &cobra.Command{
		Use:   "check FILE",
		Short: "Check a configuration file; print the error with its line, or nothing",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := config.Load(args[0])
			return err
		},
	}, &cobra.Command{
		Use:   "merge FILE OVERLAY...",
		Short: "Print FILE with the keys of each OVERLAY laid over it (mappings merged key by key), checked as one config",
		Long: `Print FILE with the keys of each OVERLAY laid over it, as one YAML file that
'iowarp config check' accepts (it is checked before it is printed; on an
error nothing is printed). A key of an overlay replaces the same key below
it, except that two mappings merge key by key; a list is replaced whole.
FILE's comments are kept. The Slurm prolog uses it to add a job's cluster
block to the site config.`,
		Example: `  iowarp config merge /etc/iowarp/iowarp.yaml job-cluster.yaml > job.yaml`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			srcs := make([]config.Source, 0, len(args))
			for _, a := range args {
				b, err := os.ReadFile(a)
				if err != nil {
					return err
				}
				srcs = append(srcs, config.Source{Name: a, Data: b})
			}
			out, err := config.Merge(srcs...)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	})
	return c
}
