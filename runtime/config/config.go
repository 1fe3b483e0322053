package config

import (
	_ "embed"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/bufferpool/tier"
	"github.com/iowarp/iowarp/internal/host"
	"github.com/iowarp/iowarp/internal/units"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML returns the embedded default configuration, comments
// included (it documents every key).
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// Config is the configuration of one iowarp daemon and its mount. It is a
// plain value: the zero Config is not valid, start from Default or Load.
type Config struct {
	Mount            string        // mount point; "" = none: a pure CTE daemon (NoMount)
	Backing          string        // mirrored directory (PFS); unused in scratch mode
	Mode             files.Mode    // writeback | writethrough | scratch
	PageSize         int64         // bytes, power of two
	FlushOnClose     bool          // close(2) waits for write-back
	Flushers         int           // write-back workers
	BackingBandwidth int64         // bytes/s, 0 = unlimited
	NoSpaceWait      time.Duration // bound on waiting for room in a full pool
	DrainTimeout     time.Duration // bound on retrying a failing write-back at unmount
	Readahead        int64         // largest read-ahead window of an open file, bytes; 0 = off
	DirectStageIn    bool          // stage-ins of pages not in the page cache read with O_DIRECT
	ScratchDir       string        // scratch mode namespace ("" = under $TMPDIR)
	Tiers            []Tier        // fastest first
	Placement        string        // bufferpool.Place*
	Organizer        Organizer
	LearnedPrefetch  LearnedPrefetch // access histories replayed at the next open (bufferpool/files learned.go)
	LogLevel         string          // a logrus level
	AllowOther       bool
	Passthrough      bool
	WritebackCache   bool                 // the kernel's FUSE writeback cache (fusefs.Options.WritebackCache)
	FuseIoUring      string               // auto | on | off: FUSE requests over io_uring (fusefs.Options.IoUring)
	ControlDir       string               // "" = control.DefaultDir()
	MetricsListen    string               // host:port of the Prometheus endpoint; "" = off
	Modules          []string             // module plugins (.so) loaded at start (config_modules.go)
	Compress         []files.CompressRule // codec of file pages on slower tiers by path glob (config_compress.go)
	OOMScoreAdj      int                  // the daemon's oom_score_adj (-1000..1000)
	// FormatHelperMemory is each format helper's address-space limit in
	// bytes (0 = formats/helper's default).
	FormatHelperMemory int64
	// FormatHelperDeadline bounds one format-helper request of the
	// .omni views (0 = 20s): a file that makes a reader loop costs this
	// much, then EIO.
	FormatHelperDeadline time.Duration
	Cluster              Cluster // config_cluster.go

	// lines maps a key path ("tiers[1].capacity") to its line in File, so
	// that Validate can point at the offending line.
	lines map[string]int
	// flags maps a key path to the command-line flag that set it, so
	// that Validate names the flag.
	flags map[string]string
	// File is the config file the values came from ("" for the embedded
	// default only).
	File string
}

// Tier configures one tier of the buffer pool.
type Tier struct {
	Name          string
	Kind          string // a registered tier kind (bufferpool/tier): ram, file, ...
	Dir           string // kinds that live in a directory (file) only
	Capacity      int64  // bytes
	HighWatermark float64
	LowWatermark  float64
}

// Organizer configures the background organizer of the pool.
type Organizer struct {
	Interval     time.Duration // negative: disabled
	PromoteReads float64
}

// LearnedPrefetch configures the file layer's learned prefetch: access
// histories kept under the first file tier's directory (history/).
type LearnedPrefetch struct {
	Enabled  bool
	MaxPages int // pages one history keeps
	MaxFiles int // histories kept
}

// HistoryDir is where the learned prefetch keeps its histories: history/
// in the first file tier's directory; "" when it is off or no tier
// persists (a RAM-only pool forgets everything at a restart anyway).
func (c *Config) HistoryDir() string {
	if !c.LearnedPrefetch.Enabled || c.Readahead == 0 {
		return ""
	}
	for _, t := range c.Tiers {
		if t.Kind == bufferpool.KindFile && t.Dir != "" {
			return filepath.Join(t.Dir, "history")
		}
	}
	return ""
}

// Error is a configuration error: File and Line locate it (both may be
// empty for values that came from flags), Key is the dotted key path.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Default returns the embedded default configuration.
func Default() *Config {
	c, err := parse("", defaultYAML, &Config{})
	if err != nil {
		panic("embedded default.yaml: " + err.Error()) // a build defect, caught by tests
	}
	c.File = ""
	c.lines = map[string]int{}
	c.flags = map[string]string{}
	if os.Geteuid() != 0 {
		c.userDefaults(UserDataDir())
	}
	return c
}

// rootDataDir is where default.yaml keeps the data of a root daemon.
const rootDataDir = "/var/lib/iowarp"

// userDefaults moves the default paths under rootDataDir (backing, file
// tier dirs) to base, for a daemon that is not root and cannot write
// /var/lib.
func (c *Config) userDefaults(base string) {
	move := func(p string) string {
		if rest, ok := strings.CutPrefix(p, rootDataDir+"/"); ok {
			return filepath.Join(base, rest)
		}
		return p
	}
	c.Backing = move(c.Backing)
	for i := range c.Tiers {
		c.Tiers[i].Dir = move(c.Tiers[i].Dir)
	}
}

// UserDataDir is where the default backing and file tier directories of
// a daemon that is not root go: $XDG_CACHE_HOME/iowarp, else
// $HOME/.cache/iowarp when $HOME is a directory, else
// $XDG_RUNTIME_DIR/iowarp, else $TMPDIR/iowarp-<uid>.
func UserDataDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "iowarp")
	}
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		if st, err := os.Stat(h); err == nil && st.IsDir() {
			return filepath.Join(h, ".cache", "iowarp")
		}
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "iowarp")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("iowarp-%d", os.Geteuid()))
}

// Load reads the YAML file at path on top of the embedded defaults and
// validates the result.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse reads YAML data (named name in errors) on top of the embedded
// defaults and validates the result.
func Parse(name string, data []byte) (*Config, error) {
	c, err := parse(name, data, Default())
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parse(name string, data []byte, base *Config) (*Config, error) {
	c := base.clone()
	c.File = name
	c.lines = map[string]int{}
	c.flags = map[string]string{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil // empty file: defaults
	}
	d := decoder{file: name, c: c}
	if err := d.top(doc.Content[0]); err != nil {
		return nil, err
	}
	return c, nil
}

func yamlError(name string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: name, Line: line, Msg: "bad YAML: " + m[2]}
	}
	return &Error{File: name, Msg: "bad YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

func (c *Config) clone() *Config {
	n := *c
	n.Tiers = append([]Tier(nil), c.Tiers...)
	n.Modules = append([]string(nil), c.Modules...)
	n.Compress = append([]files.CompressRule(nil), c.Compress...)
	n.Cluster.Etcd = append([]string(nil), c.Cluster.Etcd...)
	n.Cluster.Embed.Peers = append([]string(nil), c.Cluster.Embed.Peers...)
	n.lines = maps.Clone(c.lines)
	n.flags = maps.Clone(c.flags)
	if n.lines == nil {
		n.lines = map[string]int{}
	}
	if n.flags == nil {
		n.flags = map[string]string{}
	}
	return &n
}

// Clone returns a deep copy.
func (c *Config) Clone() *Config { return c.clone() }

// Overridden records that key was set from outside the file (a flag), so
// errors about it no longer point at a line of the file.
func (c *Config) Overridden(key string) {
	delete(c.lines, key)
}

// OverriddenBy records that key was set by the command-line flag flag:
// errors about it name the flag instead of the key.
func (c *Config) OverriddenBy(key, flag string) {
	c.Overridden(key)
	if c.flags == nil {
		c.flags = map[string]string{}
	}
	c.flags[key] = flag
}

// errorf builds an Error about key, located at the line the key was read
// from (if it came from the file).
func (c *Config) errorf(key, format string, args ...any) error {
	e := &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
	if flag, ok := c.flags[key]; ok {
		e.Key = flag
	} else if line, ok := c.lines[key]; ok {
		e.File, e.Line = c.File, line
	} else if c.File != "" {
		// The default (or a flag) supplied the value; locate the error at
		// the enclosing key if the file has it.
		for k := key; k != ""; k = parentKey(k) {
			if line, ok := c.lines[k]; ok {
				e.File, e.Line = c.File, line
				break
			}
		}
	}
	return e
}

func parentKey(k string) string {
	i := strings.LastIndexAny(k, ".[")
	if i < 0 {
		return ""
	}
	return k[:i]
}

// Validate checks values that depend on each other. Each value was
// already checked on its own when it was read.
func (c *Config) Validate() error {
	if !c.NoMount() && !filepath.IsAbs(c.Mount) {
		return c.errorf("mount", "%q is not an absolute path", c.Mount)
	}
	if c.Mode != files.Scratch && !c.NoMount() {
		if c.Backing == "" {
			return c.errorf("backing", "a backing directory is needed unless mode is scratch")
		}
		if !filepath.IsAbs(c.Backing) {
			return c.errorf("backing", "%q is not an absolute path", c.Backing)
		}
		if within(c.Backing, c.Mount) || within(c.Mount, c.Backing) {
			return c.errorf("backing", "%s and the mount point %s must not contain each other", c.Backing, c.Mount)
		}
	}
	if c.ScratchDir != "" && !filepath.IsAbs(c.ScratchDir) {
		return c.errorf("scratch_dir", "%q is not an absolute path", c.ScratchDir)
	}
	if c.ControlDir != "" && !filepath.IsAbs(c.ControlDir) {
		return c.errorf("control_dir", "%q is not an absolute path", c.ControlDir)
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			return c.errorf("metrics_listen", "%q is not HOST:PORT (127.0.0.1:9464, :9464)", c.MetricsListen)
		}
	}
	for i, m := range c.Modules {
		if !filepath.IsAbs(m) {
			return c.errorf(fmt.Sprintf("modules[%d]", i), "%q is not an absolute path", m)
		}
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	return c.validateTiers()
}

// NoMount reports whether c configures a daemon without a mount (mount:
// ""): `iowarp runtime start` then runs the buffer pool, the task runtime
// and the ipc server only (no file layer, no FUSE, no backing directory),
// for clients of the CTE API. `iowarp mount DIR` always sets a mount.
func (c *Config) NoMount() bool { return c.Mount == "" }

func within(dir, parent string) bool {
	rel, err := filepath.Rel(parent, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func (c *Config) validateTiers() error {
	if len(c.Tiers) == 0 {
		return c.errorf("tiers", "at least one tier is needed")
	}
	seen := map[string]int{}
	for i, t := range c.Tiers {
		key := fmt.Sprintf("tiers[%d]", i)
		if t.Name == "" {
			return c.errorf(key+".name", "every tier needs a name")
		}
		if j, dup := seen[t.Name]; dup {
			return c.errorf(key+".name", "%q is already the name of tiers[%d]", t.Name, j)
		}
		seen[t.Name] = i
		if t.Kind == "" {
			return c.errorf(key+".kind", "every tier needs a kind (%s)", strings.Join(tier.Kinds(), " or "))
		}
		tr, ok := tier.TraitsOf(t.Kind)
		if !ok {
			return c.errorf(key+".kind", "%q is not one of %s", t.Kind, strings.Join(tier.Kinds(), ", "))
		}
		if tr.Dir == tier.DirRequired && t.Dir == "" {
			return c.errorf(key+".dir", "a %s tier needs a directory", t.Kind)
		}
		if tr.Dir == tier.DirNone && t.Dir != "" {
			return c.errorf(key+".dir", "a %s tier has no directory", t.Kind)
		}
		if t.Dir != "" && !filepath.IsAbs(t.Dir) {
			return c.errorf(key+".dir", "%q is not an absolute path", t.Dir)
		}
		if t.Capacity < c.PageSize {
			return c.errorf(key+".capacity", "%s is less than one page (page_size %s)",
				units.FormatSize(t.Capacity), units.FormatSize(c.PageSize))
		}
		if t.LowWatermark >= t.HighWatermark {
			return c.errorf(key+".low_watermark", "%g must be below high_watermark %g",
				t.LowWatermark, t.HighWatermark)
		}
	}
	return c.validateRAM(hostMemory())
}

// validateRAM refuses RAM tiers that add up to more than RAMShare of the
// memory the daemon may use (mem.Usable: MemTotal, or the cgroup's limit
// if lower). The error is located at the ram tier that crosses the line.
func (c *Config) validateRAM(mem host.HostMemory) error {
	usable := mem.Usable()
	if usable <= 0 {
		return nil // unknown: nothing to check against
	}
	limit := int64(RAMShare * float64(usable))
	var sum int64
	var parts []string
	for i, t := range c.Tiers {
		if !isMemory(t.Kind) {
			continue
		}
		sum += t.Capacity
		parts = append(parts, fmt.Sprintf("tiers[%d] %s", i, units.FormatSize(t.Capacity)))
		if sum <= limit {
			continue
		}
		what := units.FormatSize(t.Capacity)
		if len(parts) > 1 {
			what = fmt.Sprintf("the ram tiers add up to %s (%s), which", units.FormatSize(sum), strings.Join(parts, " + "))
		}
		return c.errorf(fmt.Sprintf("tiers[%d].capacity", i),
			"%s is more than %g%% of %s: a RAM tier is memory the kernel cannot page out, and filling it "+
				"would make the OOM killer take the daemon and every dirty byte; use at most %s of RAM "+
				"(and a file tier for the rest)",
			what, RAMShare*100, mem.Describe(), units.FormatSize(limit))
	}
	return nil
}

// isMemory reports whether kind is a registered memory kind (ram): its
// capacity counts against RAMShare and may be a percentage of memory.
func isMemory(kind string) bool {
	tr, ok := tier.TraitsOf(kind)
	return ok && tr.Memory
}

// PoolConfig converts c to the buffer pool's configuration.
func (c *Config) PoolConfig() bufferpool.Config {
	pc := bufferpool.Config{
		Placement:         c.Placement,
		OrganizerInterval: c.Organizer.Interval,
		PromoteReads:      c.Organizer.PromoteReads,
		// Dirty pages on file tiers are journaled for replay after a
		// crash, except where nothing is ever written back.
		Journal: c.Mode != files.Scratch && !c.NoMount(),
	}
	for _, t := range c.Tiers {
		pc.Tiers = append(pc.Tiers, bufferpool.TierConfig{
			Name:          t.Name,
			Kind:          t.Kind,
			Dir:           t.Dir,
			Capacity:      t.Capacity,
			HighWatermark: t.HighWatermark,
			LowWatermark:  t.LowWatermark,
		})
	}
	return pc
}

// FilesOptions converts c to the file layer's options.
func (c *Config) FilesOptions() files.Options {
	o := files.Options{
		Backing:          c.Backing,
		Mode:             c.Mode,
		PageSize:         c.PageSize,
		FlushOnClose:     c.FlushOnClose,
		Flushers:         c.Flushers,
		BackingBandwidth: c.BackingBandwidth,
		ScratchDir:       c.ScratchDir,
		NoSpaceWait:      c.NoSpaceWait,
		DrainTimeout:     c.DrainTimeout,
		Readahead:        c.Readahead,
		BufferedStageIn:  !c.DirectStageIn,
		Compress:         c.Compress,
		HistoryDir:       c.HistoryDir(),
		HistoryPages:     c.LearnedPrefetch.MaxPages,
		HistoryFiles:     c.LearnedPrefetch.MaxFiles,
	}
	if o.Readahead == 0 {
		o.Readahead = -1 // off (0 is the file layer's default)
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = -1 // one attempt (0 is the file layer's default)
	}
	if c.Mode == files.Scratch {
		o.Backing = ""
	}
	return o
}

// Level returns the configured logrus level (validated when read).
func (c *Config) Level() logrus.Level {
	l, err := logrus.ParseLevel(c.LogLevel)
	if err != nil {
		return logrus.InfoLevel
	}
	return l
}

// Capacity returns the total capacity of the tiers.
func (c *Config) Capacity() int64 {
	var n int64
	for _, t := range c.Tiers {
		n += t.Capacity
	}
	return n
}

// TierByKind returns the index of the first tier of kind.
func (c *Config) TierByKind(kind string) (int, bool) {
	for i, t := range c.Tiers {
		if t.Kind == kind {
			return i, true
		}
	}
	return -1, false
}
