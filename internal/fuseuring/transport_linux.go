//go:build linux

package fuseuring

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// enableParam is the fuse module's switch for io_uring; the kernel offers
// FUSE_OVER_IO_URING in INIT only while it reads Y.
const enableParam = "/sys/module/fuse/parameters/enable_uring"

// ErrUnsupported means the kernel cannot serve FUSE over io_uring: not
// built in, switched off, or io_uring itself is disabled.
var ErrUnsupported = errors.New("fuse over io_uring unsupported")

// Enabled reports whether the fuse module offers io_uring now.
func Enabled() bool {
	b, err := os.ReadFile(enableParam)
	return err == nil && strings.TrimSpace(string(b)) == "Y"
}

// Enable switches the fuse module's enable_uring parameter on (root only;
// it is system-wide and stays on until reboot).
func Enable() error {
	if Enabled() {
		return nil
	}
	if err := os.WriteFile(enableParam, []byte("Y"), 0); err != nil {
		return fmt.Errorf("%w: set %s: %v", ErrUnsupported, enableParam, err)
	}
	return nil
}

// Preserve runs fn and puts the enable_uring parameter back as it found
// it, for tests: enabling it is system-wide, and a test run must not
// leave the machine's other FUSE servers changed.
func Preserve(fn func() int) int {
	was := Enabled()
	code := fn()
	if !was && Enabled() {
		os.WriteFile(enableParam, []byte("N"), 0)
	}
	return code
}

// Config sizes the queues.
type Config struct {
	// Threads is the number of threads serving each CPU's queue (0 = 4 up
	// to 16 possible CPUs, then fewer, down to 1 from 64: about 64 in all),
	// each with its own ring and one entry: the kernel hands a request
	// only to an idle entry, so a handler that blocks (a backing-store
	// read, a wait for room in the pool) holds up one thread, not the
	// CPU's queue, and up to Threads requests of one CPU run at once.
	// More wait in the kernel for the next idle entry.
	Threads int
	// Payload is the size of an entry's payload buffer: at least the
	// kernel's max(8 KiB, max_write, max_pages*page size), or registration
	// fails with EINVAL. 0 = 1 MiB.
	Payload int
}

// Transport serves one FUSE connection's requests on per-CPU io_uring
// queues. Safe for concurrent use.
type Transport struct {
	devFd  int
	queues []*queue
	wg     sync.WaitGroup
	served atomic.Uint64

	mu  sync.Mutex
	err error // first queue error
}

// Start registers one queue per possible CPU on the FUSE connection devFd
// (cfg.Threads rings each) and serves them until the connection ends (unmount) or Close. It must be
// called after the INIT reply negotiated CapOverIoUring: until every queue
// is registered the kernel holds every request back. On error nothing is
// left registered that could serve, and the caller must unmount: the
// connection cannot go back to /dev/fuse.
func Start(devFd int, h HandlerFunc, cfg Config) (*Transport, error) {
	n, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	threads, payload := cfg.Threads, cfg.Payload
	if threads <= 0 {
		threads = min(4, max(1, 64/n))
	}
	if payload <= 0 {
		payload = 1 << 20
	}
	payload = max(payload, minPayload)
	// Our own reference to the connection: the fuse.Server closes its fd
	// when its loop ends, possibly before the last commits, and the number
	// could by then name another file.
	devFd, err = unix.FcntlInt(uintptr(devFd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup /dev/fuse fd: %w", err)
	}
	t := &Transport{devFd: devFd}
	ready := make(chan error, n*threads)
	for qid := 0; qid < n; qid++ {
		for range threads {
			t.wg.Add(1)
			go t.run(qid, devFd, 1, payload, h, ready)
		}
	}
	var first error
	for i := 0; i < n*threads; i++ {
		if err := <-ready; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		t.Close()
		return nil, first
	}
	return t, nil
}

// run is one thread of a CPU's queue: set up its ring, register, serve.
func (t *Transport) run(qid, devFd, depth, payload int, h HandlerFunc, ready chan<- error) {
	defer t.wg.Done()
	q, err := newQueue(qid, devFd, depth, payload, h, &t.served)
	if err == nil {
		q.pin()
		t.mu.Lock()
		t.queues = append(t.queues, q)
		t.mu.Unlock()
		err = q.register()
	}
	ready <- err
	if err != nil {
		return
	}
	if err := q.serve(); err != nil {
		t.mu.Lock()
		if t.err == nil {
			t.err = err
		}
		t.mu.Unlock()
	}
}

// Served is the number of requests answered over the rings.
func (t *Transport) Served() uint64 { return t.served.Load() }

// Wait returns when every queue has stopped, with the first queue error.
func (t *Transport) Wait() error {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Close stops the queues and frees the rings. Call it after the unmount:
// a connection whose queues are gone but which is still mounted holds
// every new request back.
func (t *Transport) Close() error {
	t.mu.Lock()
	qs := t.queues
	t.mu.Unlock()
	for _, q := range qs {
		q.stop()
	}
	err := t.Wait()
	for _, q := range qs {
		q.close()
	}
	if t.devFd >= 0 {
		unix.Close(t.devFd)
		t.devFd = -1
	}
	return err
}

// possibleCPUs is the kernel's nr_queues: one queue per possible CPU
// (/sys/devices/system/cpu/possible, "0-N" or a list of ranges).
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("possible cpus: %w", err)
	}
	last := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		hi := r
		if i := strings.IndexByte(r, '-'); i >= 0 {
			hi = r[i+1:]
		}
		v, err := strconv.Atoi(hi)
		if err != nil {
			return 0, fmt.Errorf("possible cpus %q: %w", b, err)
		}
		last = max(last, v)
	}
	return last + 1, nil
}
