package ebpf

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Options choose what a Tracer traces: the processes of one cgroup (and
// its descendants), or a set of processes and the children they fork.
type Options struct {
	// Cgroup is a cgroup v2 directory (/sys/fs/cgroup/.../job_42).
	Cgroup string
	// Pids are processes to trace (with their future children), when
	// Cgroup is "".
	Pids []int
	// Every sends every call as an Event (for a full event log). Without
	// it, successful reads and writes are counted in the kernel per
	// process and fd and come as Counts records (at the fd's close and
	// from Flush), with one Sample event per fd and millisecond for the
	// timeline: the kernel then does no ring-buffer work for them.
	Every bool
}

// Event is one traced syscall, as the kernel saw it.
type Event struct {
	Time    time.Duration // CLOCK_MONOTONIC at exit
	Latency time.Duration
	Pid     int // process (thread group) id
	Tid     int
	Call    Syscall
	Ret     int64
	Args    [5]uint64 // the first five arguments
	Path    string    // the path argument, if the call has one
	// Off is a read's or write's file offset (-1: unknown).
	Off int64
	// Sample: a read or write also in a Counts record, for the timeline
	// only.
	Sample bool
	// Fork: Pid created process Ret (a record of the kernel's fork, not
	// a syscall; it comes before any event of the child).
	Fork bool
	// Counts, when set, is what Pid did on fd Args[0] with the reads and
	// writes counted in the kernel since the last such record of that fd
	// (not a syscall: Call is empty).
	Counts *Counts
	// Block, when set, is the requests issued to each block device while
	// the trace ran, by every process and kernel thread (the last record
	// of Flush; not a syscall).
	Block []BlockIO
	// Lost, on the Block record: calls the kernel could not pass on (a
	// full ring buffer) or follow (no task storage) during the trace.
	Lost uint64
}

// BlockIO is what was issued to one block device.
type BlockIO struct {
	Dev      string   // the device's name (vda, nvme0n1) or major:minor
	Requests [3]int64 // reads, writes, other operations (flush, discard ...)
	Bytes    [3]int64
}

// Counts is what one process did on one fd with reads and writes,
// counted in the kernel. [0] is reads, [1] writes.
type Counts struct {
	Calls   [10]int64 // by RWSyscalls
	Bytes   [2]int64
	Seq     [2]int64 // at an offset past the previous access's last byte
	Consec  [2]int64 // right after it
	Time    [2]time.Duration
	Sizes   [2][10]int64 // by SizeBuckets
	MaxEnd  [2]int64     // highest offset accessed + 1
	First   time.Duration
	Last    time.Duration
	LastOff [2]int64 // the last access's last byte
	// FirstOff is the first access's offset + 1 (0: none known): the
	// kernel judged it sequential or consecutive against the fd's
	// previous access (none: offset 0), the aggregator judges it again
	// against the file's.
	FirstOff [2]int64
}

// RWSyscalls are the reads and writes the kernel counts (Counts.Calls),
// in the order of the programs' index (bpf/trace.c, W_RW_SHIFT).
var RWSyscalls = [10]string{"read", "pread64", "readv", "preadv", "preadv2", "write", "pwrite64", "writev", "pwritev", "pwritev2"}

// Tracer holds the loaded programs and their links. Events are read with
// Read; Close detaches everything.
type Tracer struct {
	objs  traceObjects
	links []link.Link
	rd    *ringbuf.Reader
	rec   ringbuf.Record // reused by Read
	mu    sync.Mutex
}

// ErrUnavailable: BPF cannot be used here (not root, or a kernel without
// what the tracer needs); the error says which.
var ErrUnavailable = errors.New("eBPF tracing unavailable")

// Open loads and attaches the tracer.
func Open(opt Options) (*Tracer, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: tracing needs root (CAP_BPF and CAP_PERFMON)", ErrUnavailable)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("%w: raise RLIMIT_MEMLOCK: %v", ErrUnavailable, err)
	}
	cfg, err := filterOf(opt)
	if err != nil {
		return nil, err
	}
	t := &Tracer{}
	if err := loadTraceObjects(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("%w: load the BPF programs: %v", ErrUnavailable, err)
	}
	if err := t.configure(cfg, opt.Pids); err != nil {
		t.Close()
		return nil, err
	}
	// The fork hook first: a child forked between the attachments is
	// then followed from its first call.
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_fork", t.objs.SchedProcessFork}, {"sys_enter", t.objs.SysEnter}, {"sys_exit", t.objs.SysExit},
		{"block_rq_issue", t.objs.BlockRqIssue}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.prog})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%w: attach tp_btf %s: %v", ErrUnavailable, p.name, err)
		}
		t.links = append(t.links, l)
	}
	if t.rd, err = ringbuf.NewReader(t.objs.Events); err != nil {
		t.Close()
		return nil, fmt.Errorf("ring buffer: %w", err)
	}
	return t, nil
}

// filterOf is the kernel-side filter of opt.
func filterOf(opt Options) (traceConfig, error) {
	cfg := traceConfig{Self: uint32(os.Getpid())}
	if opt.Every {
		cfg.Every = 1
	}
	switch {
	case opt.Cgroup != "":
		id, level, err := cgroupID(opt.Cgroup)
		if err != nil {
			return cfg, err
		}
		cfg.Mode, cfg.Cgid, cfg.CgroupLevel = modeCgroup, id, uint32(level)
	case len(opt.Pids) > 0:
		cfg.Mode = modePids
	default:
		return cfg, errors.New("trace: name a cgroup or processes to trace")
	}
	return cfg, nil
}

const (
	modeCgroup = 1
	modePids   = 2
)

func (t *Tracer) configure(cfg traceConfig, pids []int) error {
	for _, s := range syscalls {
		if err := t.objs.Wanted.Put(s.Nr, wantedBits(s)); err != nil {
			return fmt.Errorf("wanted[%d]: %w", s.Nr, err)
		}
	}
	for _, p := range pids {
		if err := t.objs.Pids.Put(uint32(p), uint8(1)); err != nil {
			return fmt.Errorf("pids[%d]: %w", p, err)
		}
	}
	if err := t.objs.Cfg.Put(uint32(0), cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// wantedBits is what the kernel does with s (bpf/trace.c, W_*).
func wantedBits(s Syscall) uint32 {
	const (
		traced, flushRet, flushArg0, flushDup = 1, 1 << 3, 1 << 4, 1 << 5
		rwShift, positioned                   = 8, 1 << 12
	)
	w := uint32(traced) | uint32(s.Path)<<1
	switch s.Kind {
	case KindOpen:
		w |= flushRet
	case KindClose:
		w |= flushArg0
	case KindDup:
		w |= flushDup
	case KindPRead, KindPWrite:
		w |= positioned
	}
	for i, n := range RWSyscalls {
		if n == s.Name {
			w |= uint32(i+1) << rwShift
		}
	}
	return w
}

// cgroupID returns the id of the cgroup v2 directory dir (its inode
// number) and its depth below the root of the hierarchy: the kernel
// compares the traced task's ancestor at that depth, so the processes of
// nested cgroups (a Slurm job's steps) are traced too.
func cgroupID(dir string) (uint64, int, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, 0, fmt.Errorf("%s is not a cgroup v2 directory", dir)
	}
	level, err := cgroupLevel(dir)
	if err != nil {
		return 0, 0, err
	}
	return st.Ino, level, nil
}

// cgroupLevel counts the directories between dir and the root of its
// cgroup2 mount (the root is level 0).
func cgroupLevel(dir string) (int, error) {
	level := 0
	for d := dir; ; {
		var fs unix.Statfs_t
		parent := d + "/.."
		if err := unix.Statfs(parent, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
			return level, nil
		}
		var a, b unix.Stat_t
		if unix.Stat(d, &a) != nil || unix.Stat(parent, &b) != nil || a.Ino == b.Ino {
			return level, nil
		}
		level++
		d = parent
		if level > 64 {
			return 0, fmt.Errorf("cgroup %s: nested deeper than 64", dir)
		}
	}
}

// Read returns the next event; it blocks until one comes, the deadline
// set by SetDeadline passes (os.ErrDeadlineExceeded) or Close.
func (t *Tracer) Read() (Event, error) {
	if err := t.rd.ReadInto(&t.rec); err != nil {
		return Event{}, err
	}
	return decode(t.rec.RawSample)
}

// Flush passes fn a Counts record for every fd with reads or writes
// counted in the kernel since its last record (fds still open, or closed
// with their process), and forgets them; then one Block record, the
// requests issued to block devices since Open (or the last Flush). Call
// it once the events are read. The records come in the order of their first access (the order
// the aggregator judges sequential accesses to a file across fds in).
func (t *Tracer) Flush(fn func(Event)) error {
	var (
		k    traceFdkey
		v    traceAgg
		keys []traceFdkey
		evs  []Event
	)
	it := t.objs.Fdagg.Iterate()
	for it.Next(&k, &v) {
		evs = append(evs, Event{Pid: int(k.Pid), Args: [5]uint64{uint64(int64(k.Fd))}, Off: -1, Counts: countsOf(&v), Time: time.Duration(v.End)})
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the kernel's counts: %w", err)
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Counts.First, b.Counts.First) })
	for _, e := range evs {
		fn(e)
	}
	for _, k := range keys {
		t.objs.Fdagg.Delete(k)
	}
	blk, err := t.block()
	if err != nil {
		return err
	}
	events, entries := t.Dropped()
	fn(Event{Block: blk, Lost: events + entries, Time: Now(), Off: -1})
	return nil
}

// block sums the per-CPU counts of the block devices, by name.
func (t *Tracer) block() ([]BlockIO, error) {
	var (
		dev  uint32
		per  []traceBlkio
		out  []BlockIO
		devs []uint32
	)
	it := t.objs.Blk.Iterate()
	for it.Next(&dev, &per) {
		b := BlockIO{Dev: blockName(dev)}
		for _, c := range per {
			for i := range 3 {
				b.Requests[i] += int64(c.Requests[i])
				b.Bytes[i] += int64(c.Bytes[i])
			}
		}
		out = append(out, b)
		devs = append(devs, dev)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the block devices' counts: %w", err)
	}
	for _, d := range devs {
		t.objs.Blk.Delete(d)
	}
	slices.SortFunc(out, func(a, b BlockIO) int { return cmp.Compare(a.Dev, b.Dev) })
	return out, nil
}

// blockName is the name of the block device dev (the kernel's dev_t:
// major in the high 12 bits of 32, minor in the low 20), or
// "major:minor" where sysfs does not know it.
func blockName(dev uint32) string {
	mm := fmt.Sprintf("%d:%d", dev>>20, dev&(1<<20-1))
	if p, err := os.Readlink("/sys/dev/block/" + mm); err == nil {
		return filepath.Base(p)
	}
	return mm
}

func countsOf(a *traceAgg) *Counts {
	c := &Counts{First: time.Duration(a.First), Last: time.Duration(a.End)}
	for i, n := range a.Calls {
		c.Calls[i] = int64(n)
	}
	for d := range 2 {
		c.Bytes[d], c.Seq[d], c.Consec[d] = int64(a.Bytes[d]), int64(a.Seq[d]), int64(a.Consec[d])
		c.Time[d], c.MaxEnd[d], c.LastOff[d] = time.Duration(a.Time[d]), a.MaxEnd[d], a.Last[d]
		c.FirstOff[d] = a.FirstOff[d]
		for b, n := range a.Sizes[d] {
			c.Sizes[d][b] = int64(n)
		}
	}
	return c
}

// SetDeadline bounds the next Reads.
func (t *Tracer) SetDeadline(d time.Time) { t.rd.SetDeadline(d) }

// Dropped returns the events the kernel could not queue (a full ring
// buffer) and the calls it could not follow (no task storage). (Reads
// and writes it could not count for a full table come as events.)
func (t *Tracer) Dropped() (events, entries uint64) {
	var per []uint64
	for i, p := range []*uint64{&events, &entries} {
		if t.objs.Dropped.Lookup(uint32(i), &per) == nil {
			for _, v := range per {
				*p += v
			}
		}
	}
	return events, entries
}

// Close detaches the programs and frees the maps.
func (t *Tracer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
		t.rd = nil
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// Record flags (bpf/trace.c, F_*).
const (
	flagPath   = 1
	flagSample = 2
	flagAgg    = 4
	flagFork   = 8
)

func decode(b []byte) (Event, error) {
	if len(b) < int(sizeofEvent) {
		return Event{}, fmt.Errorf("event of %d bytes, want %d", len(b), sizeofEvent)
	}
	raw := *(*traceEvent)(unsafePointer(b))
	e := Event{Time: time.Duration(raw.Ts), Latency: time.Duration(raw.Lat), Pid: int(raw.Pid), Tid: int(raw.Tid),
		Ret: raw.Ret, Args: raw.Args, Off: raw.Off, Sample: raw.Flags&flagSample != 0}
	switch {
	case raw.Flags&flagAgg != 0:
		if len(b) < int(sizeofAggEvent) {
			return Event{}, fmt.Errorf("counts record of %d bytes, want %d", len(b), sizeofAggEvent)
		}
		e.Counts = countsOf(&(*traceAggEvent)(unsafePointer(b)).A)
		return e, nil
	case raw.Flags&flagFork != 0:
		e.Fork = true
		return e, nil
	}
	e.Call = SyscallOf(raw.Nr)
	if e.Call.Name == "" {
		e.Call = Syscall{Nr: raw.Nr, Name: fmt.Sprintf("syscall_%d", raw.Nr)}
	}
	if raw.Flags&flagPath != 0 {
		if len(b) < int(sizeofPathEvent) {
			return Event{}, fmt.Errorf("path event of %d bytes, want %d", len(b), sizeofPathEvent)
		}
		path := b[sizeofEvent:sizeofPathEvent]
		if i := bytes.IndexByte(path, 0); i >= 0 {
			path = path[:i]
		}
		e.Path = string(path)
	}
	return e, nil
}
