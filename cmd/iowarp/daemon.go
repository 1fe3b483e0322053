package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/control"
)

// --daemon re-executes the binary with the same arguments in a new
// session, its stdio on a log file, and IOWARP_READY_FD naming a pipe.
// The child writes "ready" on the pipe once the mount is up, or
// "error: ..." if it fails first; the parent relays that and exits.

const readyEnv = "IOWARP_READY_FD"

func isDaemonChild() bool { return os.Getenv(readyEnv) != "" }

// daemonReadyFile is the readiness pipe of a daemon child, or nil.
func daemonReadyFile() *os.File {
	if os.Getenv(readyEnv) != "3" {
		return nil
	}
	return readyFile
}

// readyFile is fd 3 of a daemon child, taken at start-up so that nothing
// else can take the number.
var readyFile = func() *os.File {
	if os.Getenv(readyEnv) != "3" {
		return nil
	}
	syscall.CloseOnExec(3)
	return os.NewFile(3, "ready")
}()

// notifyParent tells the waiting parent why the child failed.
func notifyParent(err error) {
	if f := daemonReadyFile(); f != nil {
		fmt.Fprintf(f, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		f.Close()
	}
}

// defaultLogFile is the log of a --daemon without --log-file: next to
// its control socket.
func defaultLogFile(cfg *config.Config) string {
	return strings.TrimSuffix(control.SocketPath(cfg.ControlDir, cfg.Mount), ".sock") + ".log"
}

// openLog points the log at the daemon's log file, if it has one: the
// --log-file (also in the foreground), or for a daemon child the file its
// parent opened for it. SIGHUP reopens it (reopenLog).
func openLog(cfg *config.Config, logFile string) error {
	if logFile == "" && !isDaemonChild() {
		return nil
	}
	if logFile == "" {
		logFile = defaultLogFile(cfg)
	}
	abs, err := filepath.Abs(logFile)
	if err != nil {
		return err
	}
	return sink.UseFile(abs, isDaemonChild())
}

// reopenLog is the daemon's answer to SIGHUP: open the log file again
// (after logrotate renamed it) and nothing else.
func reopenLog(s os.Signal) {
	p := sink.Path()
	if p == "" {
		logrus.Infof("%v: the log goes to stderr, no log file to reopen; still serving", s)
		return
	}
	if err := sink.Reopen(); err != nil {
		logrus.Errorf("%v: reopen log %s: %v; logging to the old file", s, p, err)
		return
	}
	logrus.Infof("%v: reopened log %s", s, p)
}

func daemonize(cfg *config.Config, logFile string) error {
	if logFile == "" {
		logFile = defaultLogFile(cfg)
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	logf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	child := exec.Command(exe, os.Args[1:]...)
	child.Env = append(os.Environ(), readyEnv+"=3")
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{w}
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		w.Close()
		return fmt.Errorf("start daemon: %w", err)
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case line == "ready":
		logrus.Infof("iowarp daemon pid %d serves %s; log %s", child.Process.Pid, cfg.Mount, logFile)
		child.Process.Release()
		return nil
	case strings.HasPrefix(line, "error: "):
		child.Wait()
		return errors.New(strings.TrimPrefix(line, "error: "))
	default:
		err := child.Wait()
		return fmt.Errorf("daemon exited before the mount was ready (%v); see %s", err, logFile)
	}
}
