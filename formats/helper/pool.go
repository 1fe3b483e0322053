package helper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/sys"
)

var (
	// ErrTimeout: the helper missed the request's deadline and was killed.
	ErrTimeout = errors.New("format helper timed out")
	// ErrCrashed: the helper died during the request (signal, abort, OOM).
	ErrCrashed = errors.New("format helper crashed")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("format helper pool closed")
)

// Options configure a Pool.
type Options struct {
	Size        int           // helpers at most (default 2)
	Deadline    time.Duration // per request (default 30s); a ctx deadline that is sooner wins
	MemoryLimit uint64        // address-space limit of a helper in bytes (default DefaultMemoryLimit)
	Exe         string        // binary to run (default /proc/self/exe)
	Logf        func(format string, args ...any)
}

// Pool is a set of helper processes. Safe for concurrent use.
type Pool struct {
	opt   Options
	slots chan struct{} // one token per helper that may run

	cwdOnce sync.Once
	cwd     string // empty directory the helpers run in
	llOnce  sync.Once
	llErr   error // why Landlock is not available, once

	// Helpers started, and those stopped for a library error (retired)
	// or killed for a crash, a timeout or a broken reply (failed): each
	// of those is replaced by a new one at the next request.
	started, retired, failed atomic.Uint64

	mu sync.Mutex
	// guarded by mu:
	idle   []*proc
	live   map[*proc]bool
	closed bool
}

// New returns a pool; helpers start on first use.
func New(opt Options) *Pool {
	if opt.Size <= 0 {
		opt.Size = 2
	}
	if opt.Deadline <= 0 {
		opt.Deadline = 30 * time.Second
	}
	if opt.MemoryLimit == 0 {
		opt.MemoryLimit = DefaultMemoryLimit()
	}
	if opt.Exe == "" {
		opt.Exe = "/proc/self/exe"
	}
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	return &Pool{opt: opt, slots: make(chan struct{}, opt.Size), live: map[*proc]bool{}}
}

// proc is one helper process.
type proc struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	tail *tail
	key  string // As.key of the identity it runs as
	dead bool
}

// Close stops every helper.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	procs := make([]*proc, 0, len(p.live))
	for pr := range p.live {
		procs = append(procs, pr)
	}
	p.live, p.idle = map[*proc]bool{}, nil
	p.mu.Unlock()
	for _, pr := range procs {
		pr.stop()
	}
	if p.cwd != "" {
		os.Remove(p.cwd)
	}
	return nil
}

// stop ends a helper: EOF on its socket, SIGKILL if it lingers.
func (pr *proc) stop() {
	pr.conn.Close() // EOF: the helper exits
	done := make(chan struct{})
	go func() { pr.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		pr.cmd.Process.Kill()
		<-done
	}
}

// Stats counts the helpers of a pool since New.
type Stats struct {
	Started uint64 // helper processes started
	Retired uint64 // stopped after a library error, replaced at the next request
	Failed  uint64 // killed: crashed, timed out or broke the protocol
}

// Stats reads the counters.
func (p *Pool) Stats() Stats {
	return Stats{Started: p.started.Load(), Retired: p.retired.Load(), Failed: p.failed.Load()}
}

// Helpers is the number of running helpers.
func (p *Pool) Helpers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// Runs reports whether pid is the process id of one of the pool's live
// helpers. A daemon that hands helpers paths on its own FUSE mount uses
// it to recognise their requests (fusefs answers their opens with direct
// I/O). It takes the pool's lock only briefly, never across a request.
func (p *Pool) Runs(pid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.live {
		if pr.cmd.Process != nil && pr.cmd.Process.Pid == pid {
			return true
		}
	}
	return false
}

// get returns an idle helper running as a, else starts one; past Size
// helpers an idle one of another identity is stopped first.
func (p *Pool) get(ctx context.Context, a As) (*proc, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	key := a.key()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, ErrClosed
	}
	for i := len(p.idle) - 1; i >= 0; i-- {
		if pr := p.idle[i]; pr.key == key {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.mu.Unlock()
			return pr, nil
		}
	}
	var other *proc
	if len(p.live) >= p.opt.Size && len(p.idle) > 0 {
		other = p.idle[0]
		p.idle = p.idle[1:]
		delete(p.live, other)
	}
	p.mu.Unlock()
	if other != nil {
		other.stop()
	}
	pr, err := p.spawn(a)
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.mu.Lock()
	p.live[pr] = true
	p.mu.Unlock()
	return pr, nil
}

func (p *Pool) put(pr *proc) {
	p.mu.Lock()
	if pr.dead || p.closed {
		delete(p.live, pr)
	} else {
		p.idle = append(p.idle, pr)
	}
	p.mu.Unlock()
	<-p.slots
}

// retire stops a helper that reported a library error: libhdf5 keeps
// state across files (free lists, caches, a half-closed file), and a
// helper that failed on one file must not serve the next.
func (p *Pool) retire(pr *proc) {
	p.retired.Add(1)
	pr.dead = true
	go pr.stop()
}

func (p *Pool) spawn(a As) (*proc, error) {
	parent, child, err := socketpair()
	if err != nil {
		return nil, err
	}
	defer child.Close()
	cmd := exec.Command(p.opt.Exe)
	cmd.Env = p.env(a)
	cmd.Dir = p.emptyDir()
	cmd.ExtraFiles = []*os.File{child}
	t := &tail{}
	cmd.Stderr = t
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if a.Set {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.Uid, Gid: a.Gid, Groups: a.Groups}
	}
	if err := cmd.Start(); err != nil {
		parent.Close()
		return nil, fmt.Errorf("start format helper %s: %w", p.opt.Exe, err)
	}
	c, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	p.started.Add(1)
	return &proc{cmd: cmd, conn: c.(*net.UnixConn), tail: t, key: a.key()}, nil
}

// env is a helper's environment. Helpers only read, and may keep a file
// open between requests: HDF5 file locks would make a writer of that
// file fail (EAGAIN) where the file is the one it writes (a path on a
// mount). External storage and virtual-dataset sources with relative
// names are looked up next to the file, never in the helper's cwd.
func (p *Pool) env(a As) []string {
	env := append(os.Environ(), envHelper+"=1", fmt.Sprintf("%s=%d", envMemory, p.opt.MemoryLimit),
		"HDF5_USE_FILE_LOCKING=FALSE", "HDF5_EXTFILE_PREFIX=${ORIGIN}", "HDF5_VDS_PREFIX=${ORIGIN}",
		// glibc's per-thread arenas reserve 64 MiB of address space
		// each: without a cap they, not the data, meet MemoryLimit.
		"MALLOC_ARENA_MAX=2")
	if a.Root != "" {
		env = append(env, envRoot+"="+a.Root)
		if p.landlock() == nil {
			env = append(env, envLandlock+"=1")
		}
	}
	return env
}

// landlock reports, and logs once, whether helpers can be confined by
// Landlock; without it they still run as the caller.
func (p *Pool) landlock() error {
	p.llOnce.Do(func() {
		if _, p.llErr = sys.LandlockABI(); p.llErr != nil {
			p.opt.Logf("omni: format helpers run as the caller, without Landlock: %v", p.llErr)
		}
	})
	return p.llErr
}

// emptyDir is the helpers' working directory: empty, so that nothing
// resolves relative to it ("/" is the default of a process that never
// chose).
func (p *Pool) emptyDir() string {
	p.cwdOnce.Do(func() {
		d, err := os.MkdirTemp("", "iowarp-helper-")
		if err == nil && os.Chmod(d, 0o111) == nil {
			p.cwd = d
		}
	})
	return p.cwd
}

// call sends one request and waits for the reply within the deadline. A
// transport failure kills the helper and explains why it died.
func (p *Pool) call(ctx context.Context, req *request, fd *os.File) (*response, *os.File, error) {
	if !filepath.IsAbs(req.Path) {
		abs, err := filepath.Abs(req.Path)
		if err != nil {
			return nil, nil, err
		}
		req.Path = abs
	}
	a := asOf(ctx)
	if a.Set {
		req.Uid = &a.Uid
	}
	pr, err := p.get(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	defer p.put(pr)
	deadline := time.Now().Add(p.opt.Deadline)
	byCtx := false
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, byCtx = d, true
	}
	pr.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { pr.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var resp response
	err = send(pr.conn, req, fd)
	var out *os.File
	if err == nil {
		out, err = recv(pr.conn, &resp)
	}
	if err != nil {
		if byCtx && errors.Is(err, os.ErrDeadlineExceeded) {
			err = context.DeadlineExceeded
		}
		return nil, nil, p.fail(ctx, pr, req, err)
	}
	if resp.Retire {
		p.retire(pr)
	}
	if e := resp.err(); e != nil {
		if out != nil {
			out.Close()
		}
		return nil, nil, e
	}
	return &resp, out, nil
}

// fail kills pr and returns the error of the request it was serving.
func (p *Pool) fail(ctx context.Context, pr *proc, req *request, cause error) error {
	p.failed.Add(1)
	pr.dead = true
	timedOut := errors.Is(cause, os.ErrDeadlineExceeded)
	pr.cmd.Process.Kill()
	pr.cmd.Wait()
	pr.conn.Close()
	why := pr.tail.lastWords()
	var err error
	switch {
	case ctx.Err() != nil || errors.Is(cause, context.DeadlineExceeded):
		err = fmt.Errorf("%s %s: %w; helper killed", req.Op, req.Path, context.Cause(ctx))
		if ctx.Err() == nil {
			err = fmt.Errorf("%s %s: %w; helper killed", req.Op, req.Path, context.DeadlineExceeded)
		}
	case timedOut:
		err = fmt.Errorf("%s %s: %w after %v; helper killed", req.Op, req.Path, ErrTimeout, p.opt.Deadline)
	default:
		err = fmt.Errorf("%s %s: %w (%s)%s", req.Op, req.Path, ErrCrashed, pr.cmd.ProcessState, why)
	}
	p.opt.Logf("omni: %v", err)
	return err
}

// maxSchema bounds the schema a helper may send (its attributes are
// capped by omni.CapAttrs; the rest is one entry per variable, group and
// dimension, bounded by the readers).
const maxSchema = 256 << 20

// maxStrings bounds a variable-length string read (the caller copies it
// into its own memory).
const maxStrings = 256 << 20

// Open opens the dataset at path in a helper and returns its schema.
func (p *Pool) Open(ctx context.Context, path string) (*omni.Dataset, error) {
	resp, f, err := p.call(ctx, &request{Op: "open", Path: path}, nil)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("open %s: helper sent no schema: %w", path, omni.ErrInvalid)
	}
	defer f.Close()
	if resp.Size < 0 || resp.Size > maxSchema {
		return nil, fmt.Errorf("open %s: schema of %d bytes: %w", path, resp.Size, omni.ErrInvalid)
	}
	b := make([]byte, resp.Size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return omni.DecodeSchema(b)
}

// ReadTo reads the selection h of the fixed-size variable v of the dataset
// at path straight into dst at off (dst must be a shared-memory or regular
// file at least off + h.Bytes(v.DType) long). It returns the bytes written.
func (p *Pool) ReadTo(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab, dst *os.File, off int64) (int64, error) {
	if v.DType == omni.String {
		return 0, fmt.Errorf("%s: variable-length strings: use Read: %w", v.Path, omni.ErrNotSupported)
	}
	if err := h.Check(v.Shape); err != nil {
		return 0, err
	}
	resp, f, err := p.call(ctx, &request{Op: "read", Path: path, Var: v.Path, Slab: &h, Off: off}, dst)
	if f != nil {
		f.Close()
	}
	if err != nil {
		return 0, err
	}
	return resp.Size, nil
}

// Data is a read result in shared memory. Close releases it.
type Data struct {
	f *os.File
	m *mapping
}

// Bytes is the data, C order, native byte order (EncodeStrings form for
// variable-length strings). Valid until Close.
func (d *Data) Bytes() []byte {
	if d.m == nil {
		return nil
	}
	return d.m.b
}

// File is the memfd holding the data (for passing on); owned by d.
func (d *Data) File() *os.File { return d.f }

// Close unmaps and closes the data.
func (d *Data) Close() error {
	if d.m != nil {
		d.m.unmap()
	}
	if d.f != nil {
		return d.f.Close()
	}
	return nil
}

// Read reads the selection h of v from the dataset at path into a fresh
// memfd, mapped read-only.
func (p *Pool) Read(ctx context.Context, path string, v *omni.Variable, h omni.Hyperslab) (*Data, error) {
	if err := h.Check(v.Shape); err != nil {
		return nil, err
	}
	if v.DType == omni.String {
		resp, f, err := p.call(ctx, &request{Op: "read", Path: path, Var: v.Path, Slab: &h}, nil)
		if err != nil {
			return nil, err
		}
		if resp.Size > maxStrings {
			if f != nil {
				f.Close()
			}
			return nil, fmt.Errorf("%s: %d bytes of strings, more than %d: %w", v.Path, resp.Size, int64(maxStrings), omni.ErrNotSupported)
		}
		return mapped(f, resp.Size)
	}
	n := h.Bytes(v.DType)
	f, err := newMemfd("omni-data", n)
	if err != nil {
		return nil, err
	}
	if _, err := p.ReadTo(ctx, path, v, h, f, 0); err != nil {
		f.Close()
		return nil, err
	}
	return mapped(f, n)
}

func mapped(f *os.File, n int64) (*Data, error) {
	if f == nil {
		return nil, fmt.Errorf("helper sent no data: %w", omni.ErrInvalid)
	}
	st, err := f.Stat()
	if err != nil || st.Size() < n {
		f.Close()
		return nil, fmt.Errorf("data memfd shorter than %d bytes: %w", n, omni.ErrInvalid)
	}
	m, err := mapFile(f, 0, n, false)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Data{f: f, m: m}, nil
}

// ReadAll reads a whole variable into Go memory (a copy; for writers).
func (p *Pool) ReadAll(ctx context.Context, path string, v *omni.Variable) ([]byte, error) {
	d, err := p.Read(ctx, path, v, omni.All(v.Shape))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return bytes.Clone(d.Bytes()), nil
}

// tail keeps the last bytes a helper wrote to stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 16 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailMax {
		t.buf = t.buf[len(t.buf)-tailMax:]
	}
	return len(b), nil
}

// lastWords picks the line of a crash report that says what happened.
func (t *tail) lastWords() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last string
	for _, l := range strings.Split(string(t.buf), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "SIG"), strings.HasPrefix(l, "fatal error"), strings.HasPrefix(l, "panic:"),
			strings.Contains(l, "Assertion"), strings.HasPrefix(l, "runtime:"):
			return ": " + l
		case l != "" && !strings.HasPrefix(l, "goroutine") && last == "":
			last = l
		}
	}
	if last != "" {
		return ": " + last
	}
	return ""
}
