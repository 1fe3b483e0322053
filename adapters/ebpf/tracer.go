package ebpf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
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
}

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
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sys_enter", t.objs.SysEnter}, {"sys_exit", t.objs.SysExit}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: p.name, Program: p.prog})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%w: attach raw tracepoint %s: %v", ErrUnavailable, p.name, err)
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
		w := uint32(1) | uint32(s.Path)<<1
		if err := t.objs.Wanted.Put(s.Nr, w); err != nil {
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

// SetDeadline bounds the next Reads.
func (t *Tracer) SetDeadline(d time.Time) { t.rd.SetDeadline(d) }

// Dropped returns the events the kernel could not queue (a full ring
// buffer) and the entries it could not record (a full table).
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

func decode(b []byte) (Event, error) {
	if len(b) < int(sizeofEvent) {
		return Event{}, fmt.Errorf("event of %d bytes, want %d", len(b), sizeofEvent)
	}
	raw := *(*traceEvent)(unsafePointer(b))
	e := Event{Time: time.Duration(raw.Ts), Latency: time.Duration(raw.Lat), Pid: int(raw.Pid), Tid: int(raw.Tid),
		Call: SyscallOf(raw.Nr), Ret: raw.Ret, Args: raw.Args}
	if e.Call.Name == "" {
		e.Call = Syscall{Nr: raw.Nr, Name: fmt.Sprintf("syscall_%d", raw.Nr)}
	}
	if raw.Flags&1 != 0 {
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
