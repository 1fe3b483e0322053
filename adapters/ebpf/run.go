package ebpf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/iowarp/iowarp/internal/mountinfo"
)

// CgroupRoot is the mount point of the cgroup v2 hierarchy.
func CgroupRoot() (string, error) {
	ms, err := mountinfo.Mounts()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			return m.Point, nil
		}
	}
	return "", fmt.Errorf("%w: no cgroup v2 hierarchy is mounted", ErrUnavailable)
}

// Run starts cmd in a cgroup of its own (so that it and every process it
// starts are traced, and nothing else), calls fn with each event until it
// exits and the last events and the kernel's counts are read, and returns
// cmd's Wait error. The tracer is attached before cmd starts, so its
// first call is seen. Of opt, only Every counts.
func Run(cmd *exec.Cmd, opt Options, fn func(Event)) (err error) {
	root, err := CgroupRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "iowarp-trace-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("%w: make a cgroup for the traced command: %v", ErrUnavailable, err)
	}
	defer func() {
		if rerr := removeCgroup(dir); rerr != nil && err == nil {
			err = rerr
		}
	}()
	cg, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer cg.Close()
	t, err := Open(Options{Cgroup: dir, Every: opt.Every})
	if err != nil {
		return err
	}
	defer t.Close()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	if err := cmd.Start(); err != nil {
		return err
	}
	// The command's fds not seen opened are this process's (stdin,
	// stdout, stderr): its parent names them once it is gone.
	fn(Event{Fork: true, Pid: os.Getpid(), Ret: int64(cmd.Process.Pid), Off: -1})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	for exited := false; ; {
		// The kernel wakes the reader only when much is queued (see
		// bpf/trace.c); the deadline is the polling interval.
		if exited {
			// Everything the command did is in the ring by now; read
			// until it is empty.
			t.SetDeadline(time.Now().Add(100 * time.Millisecond))
		} else {
			t.SetDeadline(time.Now().Add(50 * time.Millisecond))
		}
		e, err := t.Read()
		switch {
		case err == nil:
			fn(e)
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrClosed):
			return werr
		default:
			return err
		}
		if exited {
			return errors.Join(t.Flush(fn), werr)
		}
		select {
		case werr = <-done:
			exited = true
		default:
		}
	}
}

// removeCgroup removes a cgroup once its processes are gone (a
// daemonised child may outlive the command: then the cgroup stays and the
// error says so).
func removeCgroup(dir string) error {
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w (a traced process still runs in it)", dir, err)
}
