package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/bufferpool/tier"
	"github.com/iowarp/iowarp/internal/units"
)

// decoder walks the yaml.Node tree of a config file by hand rather than
// with yaml.Decoder.KnownFields: that way every error names the key path,
// the reason and the line, and a value is checked where it is read.
type decoder struct {
	file string
	c    *Config
}

// field decodes the value node of one key; key is the full key path.
type field func(n *yaml.Node, key string) error

func (d *decoder) errorf(n *yaml.Node, key, format string, args ...any) error {
	return &Error{File: d.file, Line: n.Line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

func (d *decoder) top(n *yaml.Node) error {
	c := d.c
	return d.mapping(n, "", map[string]field{
		"mount":             d.str(&c.Mount),
		"backing":           d.str(&c.Backing),
		"mode":              d.mode(&c.Mode),
		"page_size":         d.pageSize(&c.PageSize),
		"flush_on_close":    d.boolean(&c.FlushOnClose),
		"flushers":          d.integer(&c.Flushers, 1, 1024),
		"backing_bandwidth": d.bandwidth(&c.BackingBandwidth),
		"no_space_wait":     d.duration(&c.NoSpaceWait, false),
		"drain_timeout":     d.duration(&c.DrainTimeout, false),
		"readahead":         d.size(&c.Readahead),
		"direct_stage_in":   d.boolean(&c.DirectStageIn),
		"scratch_dir":       d.str(&c.ScratchDir),
		"tiers":             d.tiers,
		"placement": d.enum(&c.Placement, bufferpool.PlaceMinimizeIOTime,
			bufferpool.PlaceRoundRobin, bufferpool.PlaceRandom),
		"organizer":              d.organizer,
		"learned_prefetch":       d.learnedPrefetch,
		"log_level":              d.logLevel(&c.LogLevel),
		"allow_other":            d.boolean(&c.AllowOther),
		"passthrough":            d.boolean(&c.Passthrough),
		"writeback_cache":        d.boolean(&c.WritebackCache),
		"fuse_io_uring":          d.enum(&c.FuseIoUring, "auto", "on", "off"),
		"control_dir":            d.str(&c.ControlDir),
		"metrics_listen":         d.str(&c.MetricsListen),
		"modules":                d.modules,
		"compress":               d.compress,
		"format_helper_memory":   d.bytes(&c.FormatHelperMemory),
		"format_helper_deadline": d.duration(&c.FormatHelperDeadline, false),
		"oom_score_adj":          d.integer(&c.OOMScoreAdj, -1000, 1000),
		"cluster":                d.cluster,
	})
}

func (d *decoder) organizer(n *yaml.Node, key string) error {
	o := &d.c.Organizer
	return d.mapping(n, key, map[string]field{
		"interval":      d.duration(&o.Interval, true),
		"promote_reads": d.float(&o.PromoteReads, 0, math.MaxFloat64),
	})
}

func (d *decoder) learnedPrefetch(n *yaml.Node, key string) error {
	l := &d.c.LearnedPrefetch
	return d.mapping(n, key, map[string]field{
		"enabled":   d.boolean(&l.Enabled),
		"max_pages": d.integer(&l.MaxPages, 16, 1<<24),
		"max_files": d.integer(&l.MaxFiles, 1, 1<<20),
	})
}

func (d *decoder) tiers(n *yaml.Node, key string) error {
	if n.Kind != yaml.SequenceNode {
		return d.errorf(n, key, "expected a list of tiers, got %s", kindName(n))
	}
	d.c.Tiers = d.c.Tiers[:0]
	for i, tn := range n.Content {
		t := Tier{HighWatermark: 0.9, LowWatermark: 0.7}
		tkey := fmt.Sprintf("%s[%d]", key, i)
		d.c.lines[tkey] = tn.Line
		var capNode *yaml.Node
		err := d.mapping(tn, tkey, map[string]field{
			"name": d.str(&t.Name),
			"kind": d.enum(&t.Kind, tier.Kinds()...),
			"dir":  d.str(&t.Dir),
			"capacity": func(n *yaml.Node, _ string) error {
				capNode = n
				return nil // decoded below, once kind is known
			},
			"high_watermark": d.float(&t.HighWatermark, 0.01, 1),
			"low_watermark":  d.float(&t.LowWatermark, 0, 1),
		})
		if err != nil {
			return err
		}
		if capNode == nil {
			return d.errorf(tn, tkey+".capacity", "every tier needs a capacity")
		}
		if t.Capacity, err = d.capacity(capNode, tkey+".capacity", t.Kind); err != nil {
			return err
		}
		d.c.Tiers = append(d.c.Tiers, t)
	}
	return nil
}

// sizeField reads a size into p. A value ParseSize refuses is reported
// with its error, or, when bad is set, as bad (a hint with examples); a
// value ok refuses is reported as range.
func (d *decoder) sizeField(p *int64, bad string, ok func(int64) bool, rng string) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		v, err := units.ParseSize(s)
		switch {
		case err != nil && bad != "":
			return d.errorf(n, key, "%q %s", s, bad)
		case err != nil:
			return d.errorf(n, key, "%v", err)
		case !ok(v):
			return d.errorf(n, key, "%q%s", s, rng)
		}
		*p = v
		return nil
	}
}

// size reads a size of 0 or more bytes.
func (d *decoder) size(p *int64) field {
	const bad = "is not a size (like 0, 4MiB, 32MiB)"
	return d.sizeField(p, bad, func(v int64) bool { return v >= 0 }, " "+bad)
}

// bytes reads a size of 0 (the default) or at least 1 GiB.
func (d *decoder) bytes(p *int64) field {
	return d.sizeField(p, "", func(v int64) bool { return v == 0 || v >= 1<<30 }, ": 0 (the default) or at least 1GiB")
}

// capacity reads a size, or for a ram tier also a percentage of the
// memory the daemon may use ("25%").
func (d *decoder) capacity(n *yaml.Node, key, kind string) (int64, error) {
	s, err := d.scalar(n, key)
	if err != nil {
		return 0, err
	}
	v, err := ParseCapacity(s, kind)
	if err != nil {
		return 0, d.errorf(n, key, "%v", err)
	}
	return v, nil
}

// mapping decodes a mapping node key by key: unknown and repeated keys are
// errors at their line.
func (d *decoder) mapping(n *yaml.Node, key string, fields map[string]field) error {
	if n.Kind != yaml.MappingNode {
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil // "organizer:" with nothing under it
		}
		what := "the config file"
		if key != "" {
			what = key
		}
		return &Error{File: d.file, Line: n.Line,
			Msg: fmt.Sprintf("%s: expected a mapping of keys, got %s", what, kindName(n))}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := join(key, kn.Value)
		f, ok := fields[kn.Value]
		if !ok {
			return d.errorf(kn, name, "unknown key (known: %s)", knownKeys(fields))
		}
		if seen[kn.Value] {
			return d.errorf(kn, name, "key given twice")
		}
		seen[kn.Value] = true
		d.c.lines[name] = kn.Line
		if err := f(vn, name); err != nil {
			return err
		}
	}
	return nil
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

func knownKeys(fields map[string]field) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	default:
		return fmt.Sprintf("%q", n.Value)
	}
}

// scalar returns the text of a scalar node.
func (d *decoder) scalar(n *yaml.Node, key string) (string, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return "", d.errorf(n, key, "expected a value, got %s", kindName(n))
	}
	return n.Value, nil
}

func (d *decoder) str(p *string) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		if n.Tag == "!!null" {
			s = ""
		}
		*p = s
		return nil
	}
}

func (d *decoder) enum(p *string, allowed ...string) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		if !slices.Contains(allowed, s) {
			return d.errorf(n, key, "%q is not one of %s", s, strings.Join(allowed, ", "))
		}
		*p = s
		return nil
	}
}

func (d *decoder) mode(p *files.Mode) field {
	var s string
	f := d.enum(&s, string(files.Writeback), string(files.Writethrough), string(files.Scratch))
	return func(n *yaml.Node, key string) error {
		if err := f(n, key); err != nil {
			return err
		}
		*p = files.Mode(s)
		return nil
	}
}

func (d *decoder) logLevel(p *string) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		if _, err := logrus.ParseLevel(s); err != nil {
			return d.errorf(n, key, "%q is not one of panic, fatal, error, warn, info, debug, trace", s)
		}
		*p = s
		return nil
	}
}

func (d *decoder) boolean(p *bool) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			*p = true
		case "false", "no", "off":
			*p = false
		default:
			return d.errorf(n, key, "%q is not true or false", s)
		}
		return nil
	}
}

func (d *decoder) integer(p *int, lo, hi int) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return d.errorf(n, key, "%q is not a whole number", s)
		}
		if v < lo || v > hi {
			return d.errorf(n, key, "%d is not between %d and %d", v, lo, hi)
		}
		*p = v
		return nil
	}
}

func (d *decoder) float(p *float64, lo, hi float64) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return d.errorf(n, key, "%q is not a number", s)
		}
		if v < lo || v > hi {
			return d.errorf(n, key, "%g is not between %g and %g", v, lo, hi)
		}
		*p = v
		return nil
	}
}

// duration reads a Go duration ("200ms", "30s"); with canDisable, "off"
// (or "false", "disabled") stores -1.
func (d *decoder) duration(p *time.Duration, canDisable bool) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		switch strings.ToLower(s) {
		case "off", "false", "disabled":
			if canDisable {
				*p = -1
				return nil
			}
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return d.errorf(n, key, "%q is not a duration (like 200ms, 30s, 5m)", s)
		}
		if v < 0 {
			return d.errorf(n, key, "%q is negative", s)
		}
		*p = v
		return nil
	}
}

// pageSize reads a page size: a power of two from 4 KiB to 64 MiB.
func (d *decoder) pageSize(p *int64) field {
	return d.sizeField(p, "", func(v int64) bool { return v >= 4096 && v <= 64<<20 && v&(v-1) == 0 },
		" is not a power of two between 4KiB and 64MiB")
}

// bandwidth reads bytes per second: "20MiB", "20MiB/s", 0 = unlimited.
func (d *decoder) bandwidth(p *int64) field {
	return func(n *yaml.Node, key string) error {
		s, err := d.scalar(n, key)
		if err != nil {
			return err
		}
		v, err := units.ParseSize(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
		if err != nil {
			return d.errorf(n, key, "%q is not a bandwidth (like 20MiB/s, 0 = unlimited)", s)
		}
		*p = v
		return nil
	}
}
