// Package report reads the IOWARP_REPORT files of the LD_PRELOAD shim
// (adapters/posix/report.c) and sums them for `iowarp report`: a line per
// process (iowarp-report) and, when the report goes to a file, a line per
// file the process opened on the mount (iowarp-report-file) with its
// bytes by path (fast: shared memory, ipc: the daemon's rings, kernel:
// FUSE), calls, time spent in calls and access-size histograms.
//
// Lines of other kinds, and malformed lines, are counted and skipped: a
// report a killed process left half-written never stops a summary.
package report

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
	"strings"
)

// NBins is the number of access-size bins; BinNames names them (the
// bins of Darshan's POSIX module).
const NBins = 10

// BinNames are the access-size bins, smallest first.
var BinNames = [NBins]string{"0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M",
	"10M-100M", "100M-1G", "1G+"}

// Counters are what a process or a file line counts.
type Counters struct {
	Opens, Calls              uint64
	FastRead, FastWrite       uint64
	KernelRead, KernelWrite   uint64
	IPCRead, IPCWrite         uint64
	FastHits, FastMisses      uint64
	Stdio, MPI, HandshakeFail uint64
	ReadNs, WriteNs, MetaNs   uint64
	MaxRead, MaxWrite         uint64
	ReadSizes, WriteSizes     [NBins]uint64
}

// Read is the bytes read, by every path.
func (c *Counters) Read() uint64 { return c.FastRead + c.KernelRead + c.IPCRead }

// Written is the bytes written, by every path.
func (c *Counters) Written() uint64 { return c.FastWrite + c.KernelWrite + c.IPCWrite }

// Bytes is what was read and written.
func (c *Counters) Bytes() uint64 { return c.Read() + c.Written() }

// Ns is the time spent in calls.
func (c *Counters) Ns() uint64 { return c.ReadNs + c.WriteNs + c.MetaNs }

// Add adds o to c (the largest accesses are the larger of both).
func (c *Counters) Add(o *Counters) {
	c.Opens += o.Opens
	c.Calls += o.Calls
	c.FastRead += o.FastRead
	c.FastWrite += o.FastWrite
	c.KernelRead += o.KernelRead
	c.KernelWrite += o.KernelWrite
	c.IPCRead += o.IPCRead
	c.IPCWrite += o.IPCWrite
	c.FastHits += o.FastHits
	c.FastMisses += o.FastMisses
	c.Stdio += o.Stdio
	c.MPI += o.MPI
	c.HandshakeFail += o.HandshakeFail
	c.ReadNs += o.ReadNs
	c.WriteNs += o.WriteNs
	c.MetaNs += o.MetaNs
	c.MaxRead = max(c.MaxRead, o.MaxRead)
	c.MaxWrite = max(c.MaxWrite, o.MaxWrite)
	for i := range NBins {
		c.ReadSizes[i] += o.ReadSizes[i]
		c.WriteSizes[i] += o.WriteSizes[i]
	}
}

// Process is one process line.
type Process struct {
	Pid   int
	Exe   string
	Child bool // a forked child that did not exec (only the kernel path)
	Counters
}

// File is the sum of a file's lines over every process.
type File struct {
	Path  string
	Procs int // processes that opened it
	Counters
}

// Summary is the sum of report files. The zero value is empty and ready.
type Summary struct {
	Processes []Process
	files     map[string]*File
	// Files is the sum of the file lines (exact: each process counts
	// only its own I/O, a forked child's included).
	Files Counters
	// Skipped counts lines that were neither kind or could not be read.
	Skipped int
}

// Parse adds the lines of r to s.
func (s *Summary) Parse(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		s.line(sc.Text())
	}
	return sc.Err()
}

func (s *Summary) line(l string) {
	kind, rest, _ := strings.Cut(l, " ")
	switch kind {
	case "iowarp-report":
		if p, ok := parseProcess(rest); ok {
			s.Processes = append(s.Processes, p)
			return
		}
	case "iowarp-report-file":
		if f, ok := parseFile(rest); ok {
			s.addFile(f)
			return
		}
	}
	s.Skipped++
}

func (s *Summary) addFile(f File) {
	if s.files == nil {
		s.files = map[string]*File{}
	}
	g := s.files[f.Path]
	if g == nil {
		g = &File{Path: f.Path}
		s.files[f.Path] = g
	}
	g.Procs++
	g.Add(&f.Counters)
	s.Files.Add(&f.Counters)
}

// FileList returns the files, sorted by less (nil: by path).
func (s *Summary) FileList(less func(a, b *File) int) []*File {
	out := make([]*File, 0, len(s.files))
	for _, f := range s.files {
		out = append(out, f)
	}
	if less == nil {
		less = func(a, b *File) int { return strings.Compare(a.Path, b.Path) }
	}
	slices.SortFunc(out, func(a, b *File) int {
		return cmp.Or(less(a, b), strings.Compare(a.Path, b.Path))
	})
	return out
}

// ByBytes and ByTime order files most first.
func ByBytes(a, b *File) int { return cmp.Compare(b.Bytes(), a.Bytes()) }
func ByTime(a, b *File) int  { return cmp.Compare(b.Ns(), a.Ns()) }

func parseProcess(rest string) (Process, bool) {
	var p Process
	for _, kv := range strings.Fields(rest) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, false
		}
		switch k {
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil {
				return p, false
			}
			p.Pid = n
		case "exe":
			p.Exe = v
		case "child":
			p.Child = v == "1"
		default:
			if !p.set(k, v) {
				return p, false
			}
		}
	}
	return p, p.Pid != 0
}

func parseFile(rest string) (File, bool) {
	var f File
	head, path, ok := strings.Cut(rest, " path=")
	if !ok || path == "" {
		return f, false
	}
	f.Path = path
	for _, kv := range strings.Fields(head) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return f, false
		}
		switch k {
		case "pid":
		case "read_sizes", "write_sizes":
			b := &f.ReadSizes
			if k == "write_sizes" {
				b = &f.WriteSizes
			}
			if !parseBins(v, b) {
				return f, false
			}
		default:
			if !f.set(k, v) {
				return f, false
			}
		}
	}
	return f, true
}

func parseBins(v string, b *[NBins]uint64) bool {
	parts := strings.Split(v, ",")
	if len(parts) != NBins {
		return false
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return false
		}
		b[i] = n
	}
	return true
}

// set sets the counter named k; unknown names are ignored (a newer shim
// may count more), bad numbers are not.
func (c *Counters) set(k, v string) bool {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return false
	}
	if f := c.field(k); f != nil {
		*f = n
	}
	return true
}

func (c *Counters) field(k string) *uint64 {
	switch k {
	case "opens":
		return &c.Opens
	case "calls":
		return &c.Calls
	case "fast_read":
		return &c.FastRead
	case "fast_write":
		return &c.FastWrite
	case "kernel_read":
		return &c.KernelRead
	case "kernel_write":
		return &c.KernelWrite
	case "ipc_read":
		return &c.IPCRead
	case "ipc_write":
		return &c.IPCWrite
	case "fast_hits":
		return &c.FastHits
	case "fast_misses":
		return &c.FastMisses
	case "stdio":
		return &c.Stdio
	case "mpi":
		return &c.MPI
	case "handshake_fail":
		return &c.HandshakeFail
	case "read_ns":
		return &c.ReadNs
	case "write_ns":
		return &c.WriteNs
	case "meta_ns":
		return &c.MetaNs
	case "max_read":
		return &c.MaxRead
	case "max_write":
		return &c.MaxWrite
	}
	return nil
}
