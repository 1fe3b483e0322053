package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/host"
)

func TestDefault(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("embedded default is invalid: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"mount", c.Mount, "/iowarp"},
		{"backing", c.Backing, "/var/lib/iowarp/backing"},
		{"mode", c.Mode, files.Writeback},
		{"page_size", c.PageSize, int64(1 << 20)},
		{"tiers", len(c.Tiers), 2},
		{"ram kind", c.Tiers[0].Kind, bufferpool.KindRAM},
		{"ram capacity", c.Tiers[0].Capacity, int64(1 << 30)},
		{"nvme kind", c.Tiers[1].Kind, bufferpool.KindFile},
		{"nvme dir", c.Tiers[1].Dir, "/var/lib/iowarp/nvme"},
		{"nvme capacity", c.Tiers[1].Capacity, int64(8 << 30)},
		{"placement", c.Placement, bufferpool.PlaceMinimizeIOTime},
		{"organizer", c.Organizer.Interval, 200 * time.Millisecond},
		{"log level", c.LogLevel, "info"},
		{"flushers", c.Flushers, 4},
		{"no_space_wait", c.NoSpaceWait, 30 * time.Second},
		{"oom_score_adj", c.OOMScoreAdj, -900},
		{"drain_timeout", c.DrainTimeout, 30 * time.Second},
		{"readahead", c.Readahead, int64(32 << 20)},
		{"direct_stage_in", c.DirectStageIn, true},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// TestParse reads full files on top of the defaults.
func TestParse(t *testing.T) {
	const full = `
mount: /mnt/iowarp
backing: /lustre/proj
mode: writethrough
page_size: 256KiB
flush_on_close: yes
flushers: 8
backing_bandwidth: 20MiB/s
no_space_wait: 5s
drain_timeout: 2m
tiers:
  - name: ram
    kind: ram
    capacity: 64MiB
  - name: ssd
    kind: file
    dir: /scratch/iowarp
    capacity: 1.5GiB
    high_watermark: 0.8
    low_watermark: 0.5
placement: round_robin
learned_prefetch:
  enabled: true
organizer:
  interval: "off"
  promote_reads: 2
log_level: debug
allow_other: true
passthrough: false
writeback_cache: true
fuse_io_uring: off
control_dir: /run/user/1000/iowarp
metrics_listen: 127.0.0.1:9464
modules:
  - /opt/iowarp/modules/compress.so
`
	c, err := Parse("full.yaml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"mount", c.Mount, "/mnt/iowarp"},
		{"backing", c.Backing, "/lustre/proj"},
		{"mode", c.Mode, files.Writethrough},
		{"page_size", c.PageSize, int64(256 << 10)},
		{"flush_on_close", c.FlushOnClose, true},
		{"flushers", c.Flushers, 8},
		{"backing_bandwidth", c.BackingBandwidth, int64(20 << 20)},
		{"no_space_wait", c.NoSpaceWait, 5 * time.Second},
		{"tiers", len(c.Tiers), 2},
		{"ram capacity", c.Tiers[0].Capacity, int64(64 << 20)},
		{"ram default high", c.Tiers[0].HighWatermark, 0.9},
		{"ssd capacity", c.Tiers[1].Capacity, int64(1536 << 20)},
		{"ssd low", c.Tiers[1].LowWatermark, 0.5},
		{"placement", c.Placement, bufferpool.PlaceRoundRobin},
		{"organizer off", c.Organizer.Interval, time.Duration(-1)},
		{"promote", c.Organizer.PromoteReads, 2.0},
		{"log level", c.LogLevel, "debug"},
		{"allow_other", c.AllowOther, true},
		{"passthrough", c.Passthrough, false},
		{"writeback_cache", c.WritebackCache, true},
		{"fuse_io_uring", c.FuseIoUring, "off"},
		{"control_dir", c.ControlDir, "/run/user/1000/iowarp"},
		{"metrics_listen", c.MetricsListen, "127.0.0.1:9464"},
		{"modules", len(c.Modules), 1},
		{"module", c.Modules[0], "/opt/iowarp/modules/compress.so"},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}

	pc := c.PoolConfig()
	if len(pc.Tiers) != 2 || pc.Tiers[1].Dir != "/scratch/iowarp" || pc.Placement != bufferpool.PlaceRoundRobin ||
		pc.OrganizerInterval >= 0 || pc.PromoteReads != 2 {
		t.Errorf("PoolConfig = %+v", pc)
	}
	fo := c.FilesOptions()
	want := files.Options{Backing: "/lustre/proj", Mode: files.Writethrough, PageSize: 256 << 10,
		FlushOnClose: true, Flushers: 8, BackingBandwidth: 20 << 20, NoSpaceWait: 5 * time.Second,
		DrainTimeout: 2 * time.Minute, Readahead: 32 << 20,
		HistoryDir: "/scratch/iowarp/history", HistoryPages: 65536, HistoryFiles: 1024}
	if !reflect.DeepEqual(fo, want) {
		t.Errorf("FilesOptions = %+v, want %+v", fo, want)
	}
}

func TestParsePartial(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		ok   func(*Config) bool
	}{
		{"empty file keeps defaults", "", func(c *Config) bool { return c.Mount == "/iowarp" && len(c.Tiers) == 2 }},
		{"comment only", "# nothing\n", func(c *Config) bool { return c.Mode == files.Writeback }},
		{"scratch needs no backing", "mode: scratch\nbacking: \"\"\n", func(c *Config) bool {
			return c.FilesOptions().Backing == "" && c.Mode == files.Scratch
		}},
		{"tiers replace the list", "tiers:\n  - {name: r, kind: ram, capacity: 64M}\n", func(c *Config) bool {
			return len(c.Tiers) == 1 && c.Tiers[0].Capacity == 64<<20
		}},
		{"ram percentage", "tiers:\n  - {name: r, kind: ram, capacity: 10%}\n", func(c *Config) bool {
			return c.Tiers[0].Capacity > 0 && c.Tiers[0].Capacity <= host.MemTotal()/9
		}},
		{"empty organizer", "organizer:\n", func(c *Config) bool { return c.Organizer.Interval == 200*time.Millisecond }},
		{"bandwidth plain bytes", "backing_bandwidth: 1048576\n", func(c *Config) bool { return c.BackingBandwidth == 1<<20 }},
		{"decimal units", "tiers:\n  - {name: r, kind: ram, capacity: 1GB}\n", func(c *Config) bool {
			return c.Tiers[0].Capacity == 1e9
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.ok(c) {
				t.Errorf("unexpected config %+v", c)
			}
		})
	}
}

// TestParseErrors: every refusal names the file, the line, the key and the
// reason. The expected messages are golden: they are what the user reads.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		want string
	}{
		{"bad size", "tiers:\n  - name: ram\n    kind: ram\n    capacity: 64MiB\n  - name: nvme\n    kind: file\n    dir: /nvme\n    capacity: 12XB\n",
			`c.yaml:8: tiers[1].capacity: "12XB" is not a size`},
		{"unknown key", "mount: /x\nbakcing: /y\n",
			`c.yaml:2: bakcing: unknown key (known: allow_other, backing, backing_bandwidth, cluster, compress, control_dir, direct_stage_in, drain_timeout, flush_on_close, flushers, format_helper_deadline, format_helper_memory, fuse_io_uring, learned_prefetch, log_level, metrics_listen, mode, modules, mount, no_space_wait, oom_score_adj, organizer, page_size, passthrough, placement, readahead, scratch_dir, tiers, writeback_cache)`},
		{"helper memory too small", "format_helper_memory: 64MiB\n",
			`c.yaml:1: format_helper_memory: "64MiB": 0 (the default) or at least 1GiB`},
		{"unknown tier key", "tiers:\n  - name: r\n    kind: ram\n    size: 1G\n",
			`c.yaml:4: tiers[0].size: unknown key (known: capacity, dir, high_watermark, kind, low_watermark, name)`},
		{"unknown organizer key", "organizer:\n  every: 1s\n",
			`c.yaml:2: organizer.every: unknown key (known: interval, promote_reads)`},
		{"duplicate key", "mode: scratch\nmode: writeback\n",
			`c.yaml:2: mode: key given twice`},
		{"bad mode", "mode: fast\n",
			`c.yaml:1: mode: "fast" is not one of writeback, writethrough, scratch`},
		{"bad placement", "placement: best\n",
			`c.yaml:1: placement: "best" is not one of minimize_io_time, round_robin, random`},
		{"bad kind", "tiers:\n  - {name: g, kind: gpu, capacity: 1G}\n",
			`c.yaml:2: tiers[0].kind: "gpu" is not one of ram, file`},
		{"bad fuse_io_uring", "fuse_io_uring: yes\n",
			`c.yaml:1: fuse_io_uring: "yes" is not one of auto, on, off`},
		{"bad bool", "flush_on_close: maybe\n",
			`c.yaml:1: flush_on_close: "maybe" is not true or false`},
		{"bad integer", "flushers: many\n",
			`c.yaml:1: flushers: "many" is not a whole number`},
		{"integer range", "flushers: 0\n",
			`c.yaml:1: flushers: 0 is not between 1 and 1024`},
		{"bad duration", "no_space_wait: 5\n",
			`c.yaml:1: no_space_wait: "5" is not a duration (like 200ms, 30s, 5m)`},
		{"bad organizer interval", "organizer:\n  interval: soon\n",
			`c.yaml:2: organizer.interval: "soon" is not a duration (like 200ms, 30s, 5m)`},
		{"page size not power of two", "page_size: 1000K\n",
			`c.yaml:1: page_size: "1000K" is not a power of two between 4KiB and 64MiB`},
		{"bad page size", "page_size: big\n",
			`c.yaml:1: page_size: "big" is not a size`},
		{"bad bandwidth", "backing_bandwidth: fast\n",
			`c.yaml:1: backing_bandwidth: "fast" is not a bandwidth (like 20MiB/s, 0 = unlimited)`},
		{"bad log level", "log_level: loud\n",
			`c.yaml:1: log_level: "loud" is not one of panic, fatal, error, warn, info, debug, trace`},
		{"bad watermark", "tiers:\n  - {name: r, kind: ram, capacity: 1G, high_watermark: 1.5}\n",
			`c.yaml:2: tiers[0].high_watermark: 1.5 is not between 0.01 and 1`},
		{"watermarks crossed", "tiers:\n  - name: r\n    kind: ram\n    capacity: 1G\n    high_watermark: 0.5\n    low_watermark: 0.6\n",
			`c.yaml:6: tiers[0].low_watermark: 0.6 must be below high_watermark 0.5`},
		{"tiers not a list", "tiers: ram\n",
			`c.yaml:1: tiers: expected a list of tiers, got "ram"`},
		{"tier not a mapping", "tiers:\n  - ram\n",
			`c.yaml:2: tiers[0]: expected a mapping of keys, got "ram"`},
		{"top not a mapping", "- a\n- b\n",
			`c.yaml:1: the config file: expected a mapping of keys, got a list`},
		{"value not scalar", "mount: [a, b]\n",
			`c.yaml:1: mount: expected a value, got a list`},
		{"missing capacity", "tiers:\n  - name: r\n    kind: ram\n",
			`c.yaml:2: tiers[0].capacity: every tier needs a capacity`},
		{"zero capacity", "tiers:\n  - {name: r, kind: ram, capacity: 0}\n",
			`c.yaml:2: tiers[0].capacity: "0" must be more than zero`},
		{"capacity below a page", "tiers:\n  - {name: r, kind: ram, capacity: 4K}\n",
			`c.yaml:2: tiers[0].capacity: 4KiB is less than one page (page_size 1MiB)`},
		{"percent for file tier", "tiers:\n  - {name: n, kind: file, dir: /n, capacity: 10%}\n",
			`c.yaml:2: tiers[0].capacity: a percentage is only allowed for a ram tier`},
		{"bad percent", "tiers:\n  - {name: r, kind: ram, capacity: 95%}\n",
			`c.yaml:2: tiers[0].capacity: "95%" is not a percentage of memory between 0 and 80`},
		{"bad metrics_listen", "metrics_listen: 9464\n",
			`c.yaml:1: metrics_listen: "9464" is not HOST:PORT (127.0.0.1:9464, :9464)`},
		{"oom_score_adj range", "oom_score_adj: -2000\n",
			`c.yaml:1: oom_score_adj: -2000 is not between -1000 and 1000`},
		{"file tier without dir", "tiers:\n  - name: n\n    kind: file\n    capacity: 1G\n",
			`c.yaml:2: tiers[0].dir: a file tier needs a directory`},
		{"ram tier with dir", "tiers:\n  - name: r\n    kind: ram\n    dir: /x\n    capacity: 1G\n",
			`c.yaml:4: tiers[0].dir: a ram tier has no directory`},
		{"relative tier dir", "tiers:\n  - name: n\n    kind: file\n    dir: nvme\n    capacity: 1G\n",
			`c.yaml:4: tiers[0].dir: "nvme" is not an absolute path`},
		{"duplicate tier name", "tiers:\n  - {name: a, kind: ram, capacity: 1G}\n  - {name: a, kind: file, dir: /a, capacity: 1G}\n",
			`c.yaml:3: tiers[1].name: "a" is already the name of tiers[0]`},
		{"no tiers", "tiers: []\n",
			`c.yaml:1: tiers: at least one tier is needed`},
		{"missing kind", "tiers:\n  - {name: a, capacity: 1G}\n",
			`c.yaml:2: tiers[0].kind: every tier needs a kind (ram or file)`},
		{"relative mount", "mount: iowarp\n",
			`c.yaml:1: mount: "iowarp" is not an absolute path`},
		{"no backing", "backing: \"\"\n",
			`c.yaml:1: backing: a backing directory is needed unless mode is scratch`},
		{"backing inside mount", "mount: /iowarp\nbacking: /iowarp/data\n",
			`c.yaml:2: backing: /iowarp/data and the mount point /iowarp must not contain each other`},
		{"modules not a list", "modules: a.so\n",
			`c.yaml:1: modules: expected a list, got "a.so"`},
		{"relative module", "modules:\n  - /ok.so\n  - rel.so\n",
			`c.yaml:3: modules[1]: "rel.so" is not an absolute path`},
		{"yaml syntax", "mount: /x\n  backing: /y\n",
			`c.yaml:2: bad YAML: mapping values are not allowed in this context`},
		{"yaml tab", "mount: /x\n\tbacking: /y\n",
			`c.yaml:2: bad YAML: found a tab character that violates indentation`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tc.want)
			}
			if c != nil {
				t.Errorf("error with a partial result %+v", c)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte("mode: scratch\ntiers:\n  - {name: r, kind: ram, capacity: 12XB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || err.Error() != p+`:3: tiers[0].capacity: "12XB" is not a size` {
		t.Fatalf("Load error = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !os.IsNotExist(err) {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

// TestOverridden: once a flag replaced a value, an error about it no longer
// points at the file's line for that key.
func TestOverridden(t *testing.T) {
	c, err := Parse("c.yaml", []byte("mount: /a\nbacking: /b\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.Backing = "/a/b"
	c.Overridden("backing")
	err = c.Validate()
	if err == nil || err.Error() != "backing: /a/b and the mount point /a must not contain each other" {
		t.Fatalf("Validate = %v", err)
	}
}

func TestDefaultYAMLDocumentsEveryKey(t *testing.T) {
	y := string(DefaultYAML())
	for _, k := range []string{"mount:", "backing:", "mode:", "page_size:", "flush_on_close:", "flushers:",
		"backing_bandwidth:", "no_space_wait:", "scratch_dir:", "tiers:", "high_watermark:", "low_watermark:",
		"placement:", "organizer:", "interval:", "promote_reads:", "log_level:", "allow_other:",
		"passthrough:", "writeback_cache:", "control_dir:", "metrics_listen:", "fuse_io_uring:", "modules:", "format_helper_memory:", "format_helper_deadline:", "readahead:", "direct_stage_in:"} {
		if !strings.Contains(y, k) {
			t.Errorf("default.yaml does not mention %s", k)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(DefaultYAML()))
	f.Add([]byte("tiers:\n  - {name: r, kind: ram, capacity: 10%}\n"))
	f.Add([]byte("mode: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of a config and an error", c, err)
		}
	})
}

// TestREADMEShowsDefault keeps the README's documented config example
// identical to the embedded default.
func TestREADMEShowsDefault(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	y := string(DefaultYAML())
	body := y[strings.Index(y, "# Where the file system"):]
	if !strings.Contains(string(readme), body) {
		t.Error("README.md's configuration example differs from runtime/config/default.yaml: copy it over")
	}
}

func TestReadaheadKey(t *testing.T) {
	c, err := Parse("c.yaml", []byte("readahead: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := c.FilesOptions(); o.Readahead >= 0 {
		t.Errorf("readahead: 0 gives files.Options.Readahead %d, want < 0 (off)", o.Readahead)
	}
	c, err = Parse("c.yaml", []byte("readahead: 8MiB\n"))
	if err != nil || c.FilesOptions().Readahead != 8<<20 {
		t.Fatalf("readahead: 8MiB: %v, %v", c, err)
	}
	if _, err := Parse("c.yaml", []byte("readahead: lots\n")); err == nil || !strings.Contains(err.Error(), "c.yaml:1: readahead:") {
		t.Errorf("readahead: lots: %v", err)
	}
}

// TestLearnedPrefetchKeys: the histories live in history/ under the
// first file tier; the learned prefetch is off when disabled, without
// read-ahead, or without a file tier; bounds out of range are errors.
func TestLearnedPrefetchKeys(t *testing.T) {
	const tiers = "tiers:\n  - {name: ram, kind: ram, capacity: 64MiB}\n"
	const fileTier = "  - {name: nvme, kind: file, dir: /local/nvme, capacity: 1GiB}\n"
	cases := []struct {
		name, yaml, want string
		pages, files     int
	}{
		{"default", tiers + fileTier, "/local/nvme/history", 65536, 1024},
		{"enabled", tiers + fileTier + "learned_prefetch: {enabled: true}\n", "/local/nvme/history", 65536, 1024},
		{"bounds", tiers + fileTier + "learned_prefetch: {enabled: true, max_pages: 100, max_files: 3}\n", "/local/nvme/history", 100, 3},
		{"disabled", tiers + fileTier + "learned_prefetch: {enabled: false}\n", "", 65536, 1024},
		{"no read-ahead", tiers + fileTier + "readahead: 0\nlearned_prefetch: {enabled: true}\n", "", 65536, 1024},
		{"no file tier", tiers + "learned_prefetch: {enabled: true}\n", "", 65536, 1024},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			o := c.FilesOptions()
			if o.HistoryDir != tc.want || o.HistoryPages != tc.pages || o.HistoryFiles != tc.files {
				t.Errorf("history dir %q, %d pages, %d files; want %q, %d, %d",
					o.HistoryDir, o.HistoryPages, o.HistoryFiles, tc.want, tc.pages, tc.files)
			}
		})
	}
	for _, bad := range []string{"learned_prefetch: {max_pages: 1}\n", "learned_prefetch: {max_files: 0}\n", "learned_prefetch: {often: true}\n"} {
		if _, err := Parse("c.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "c.yaml:1: learned_prefetch.") {
			t.Errorf("%q: %v, want an error naming the key", bad, err)
		}
	}
}

// TestUserDefaults: a daemon that is not root gets the default backing
// and file tier directories under its own data directory, not /var/lib
// (where its mkdir fails); paths a config names stay as they are.
func TestUserDefaults(t *testing.T) {
	c := Default()
	c.Tiers = append(c.Tiers, Tier{Name: "mine", Kind: "file", Dir: "/local/nvme"})
	c.userDefaults("/home/u/.cache/iowarp")
	if c.Backing != "/home/u/.cache/iowarp/backing" || c.Tiers[1].Dir != "/home/u/.cache/iowarp/nvme" ||
		c.Tiers[2].Dir != "/local/nvme" || c.Tiers[0].Dir != "" {
		t.Errorf("backing %s, tiers %+v", c.Backing, c.Tiers)
	}
	home := t.TempDir()
	for _, tc := range []struct{ cache, home, run, want string }{
		{"/c", home, "/r", "/c/iowarp"},
		{"", home, "/r", home + "/.cache/iowarp"},
		{"", "/nonexistent", "/r", "/r/iowarp"},
		{"relative", "", "", filepath.Join(os.TempDir(), fmt.Sprintf("iowarp-%d", os.Geteuid()))},
	} {
		t.Setenv("XDG_CACHE_HOME", tc.cache)
		t.Setenv("HOME", tc.home)
		t.Setenv("XDG_RUNTIME_DIR", tc.run)
		if got := UserDataDir(); got != tc.want {
			t.Errorf("%+v: UserDataDir() = %s", tc, got)
		}
	}
}
