package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/host"
	"github.com/iowarp/iowarp/runtime/config"
)

// TestMountFlags: flags override the config; errors name the flag.
func TestMountFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		err  string
		ok   func(*config.Config) bool
	}{
		{"ram and nvme", []string{"--ram", "2GiB", "--nvme", "/local/nvme:100GiB"}, "", func(c *config.Config) bool {
			return c.Tiers[0].Capacity == 2<<30 && c.Tiers[1].Dir == "/local/nvme" && c.Tiers[1].Capacity == 100<<30
		}},
		{"ram percent", []string{"--ram", "10%"}, "", func(c *config.Config) bool {
			return c.Tiers[0].Capacity > 0 && c.Tiers[0].Capacity <= host.MemTotal()/9
		}},
		{"nvme dir with colon", []string{"--nvme", "/a:b/nvme:1G"}, "", func(c *config.Config) bool {
			return c.Tiers[1].Dir == "/a:b/nvme" && c.Tiers[1].Capacity == 1<<30
		}},
		{"mode and backing", []string{"--mode", "scratch", "--backing", "/pfs"}, "", func(c *config.Config) bool {
			return c.Mode == files.Scratch && c.Backing == "/pfs"
		}},
		{"flush on close", []string{"--flush-on-close", "--allow-other"}, "", func(c *config.Config) bool {
			return c.FlushOnClose && c.AllowOther
		}},
		{"bad ram", []string{"--ram", "12XB"}, `--ram: "12XB" is not a size`, nil},
		{"zero ram", []string{"--ram", "0"}, `--ram: "0" must be more than zero`, nil},
		{"bad nvme", []string{"--nvme", "100G"}, `--nvme: "100G" is not DIR:SIZE`, nil},
		{"bad nvme size", []string{"--nvme", "/x:big"}, `--nvme: "big" is not a size`, nil},
		{"bad mode", []string{"--mode", "fast"}, `--mode: "fast" is not one of writeback, writethrough, scratch`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mf := &mountFlags{}
			cmd := &cobra.Command{Use: "mount"}
			mf.register(cmd, true)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			err := mf.override(cmd, cfg)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.ok(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
}

// TestOverrideTierAdds: --ram or --nvme on a config without such a tier
// adds one in the right place.
func TestOverrideTierAdds(t *testing.T) {
	cfg := config.Default()
	cfg.Tiers = cfg.Tiers[1:] // file tier only
	if err := overrideTier(cfg, bufferpool.KindRAM, "", "64MiB", "--ram"); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tiers) != 2 || cfg.Tiers[0].Kind != bufferpool.KindRAM || cfg.Tiers[0].Capacity != 64<<20 {
		t.Fatalf("tiers %+v", cfg.Tiers)
	}
	cfg.Tiers = cfg.Tiers[:1] // ram only
	if err := overrideTier(cfg, bufferpool.KindFile, "/n", "1GiB", "--nvme"); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tiers) != 2 || cfg.Tiers[1].Kind != bufferpool.KindFile || cfg.Tiers[1].Dir != "/n" {
		t.Fatalf("tiers %+v", cfg.Tiers)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLogLevel(t *testing.T) {
	defer logrus.SetLevel(logrus.InfoLevel)
	cases := []struct {
		lf     logFlags
		config string
		want   logrus.Level
	}{
		{logFlags{}, "", logrus.InfoLevel},
		{logFlags{}, "warn", logrus.WarnLevel},
		{logFlags{verbose: 1}, "warn", logrus.DebugLevel},
		{logFlags{verbose: 2}, "", logrus.TraceLevel},
		{logFlags{level: "error", verbose: 2}, "debug", logrus.ErrorLevel},
	}
	for _, tc := range cases {
		if err := tc.lf.apply(tc.config); err != nil {
			t.Fatal(err)
		}
		if got := logrus.GetLevel(); got != tc.want {
			t.Errorf("%+v with config %q: level %v, want %v", tc.lf, tc.config, got, tc.want)
		}
	}
	bad := logFlags{level: "loud"}
	if err := bad.apply(""); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
}

func TestLineFormatter(t *testing.T) {
	e := &logrus.Entry{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Level: logrus.ErrorLevel,
		Message: "mount point /x does not exist\nsecond line", Data: logrus.Fields{"b": 2, "a": 1}}
	b, _ := lineFormatter{}.Format(e)
	want := "2025-01-02T03:04:05Z ERROR mount point /x does not exist second line a=1 b=2\n"
	if string(b) != want {
		t.Errorf("got %q, want %q", b, want)
	}
}

func TestPrintStats(t *testing.T) {
	st := files.Stats{Mode: files.Writeback, DirtyBytes: 3 << 20, FlushBacklog: 2, ReadHits: 10, ReadMisses: 1,
		PrefetchedPages: 12, PrefetchedBytes: 12 << 20, PrefetchHits: 9, PrefetchWasted: 2,
		StagedDirect: 8 << 20, ReadAround: 5, StagedBehind: 3,
		Learned: files.LearnedStats{HistoriesLoaded: 2, HistoriesSaved: 3, StagedPages: 40, Hits: 38, HotPages: 4},
		Pool: bufferpool.Stats{Tiers: []bufferpool.TierStats{
			{Name: "ram", Kind: "ram", Capacity: 64 << 20, Used: 16 << 20, Dirty: 3 << 20, Blobs: 16, Ceiling: 16 << 20},
			{Name: "nvme", Kind: "file", Capacity: 1 << 30},
		}}}
	var buf bytes.Buffer
	if err := printStats(&buf, Info{Mount: "/iowarp", Backing: "/pfs", Pid: 7, Started: time.Now()}, st); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"/iowarp  mode writeback  backing /pfs  pid 7", "64MiB", "16MiB", "25.0", "3MiB",
		"1GiB", "flush backlog 2 files", "10 hits, 1 misses", "memory pressure: tier ram held at 16MiB",
		"read-ahead: 12 pages (12MiB) staged ahead, 9 prefetch hits, 2 wasted",
		"learned prefetch: 2 histories replayed, 3 saved, 0 discarded; 40 pages staged ahead, 38 hits, 4 placed hot",
		"stage-in: 8MiB with O_DIRECT; 5 small cold reads served from the backing file, 3 pages staged in behind them"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCommandsParse: every command of the reference parses its documented
// flags (a typo in a flag name fails here, not on a user's node).
func TestCommandsParse(t *testing.T) {
	for _, args := range [][]string{
		{"mount", "--help"},
		{"runtime", "start", "--help"},
		{"runtime", "stop", "--help"},
		{"runtime", "status", "--help"},
		{"stat", "--help"},
		{"list", "--help"},
		{"config", "default"},
		{"config", "merge", "--help"},
	} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
