package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/cluster"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/formats/omni/search"
	"github.com/iowarp/iowarp/fusefs"
	"github.com/iowarp/iowarp/internal/fuseuring"
	"github.com/iowarp/iowarp/internal/host"
	"github.com/iowarp/iowarp/internal/metrics"
	"github.com/iowarp/iowarp/internal/mountinfo"
	"github.com/iowarp/iowarp/internal/sys"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/control"
)

// Info is what the control socket's "info" operation answers.
type Info struct {
	Pid     int        `json:"pid"`
	Version string     `json:"version"`
	Mount   string     `json:"mount"`
	Backing string     `json:"backing"`
	Mode    files.Mode `json:"mode"`
	Config  string     `json:"config"`
	Started time.Time  `json:"started"`
	Metrics string     `json:"metrics,omitempty"` // address of the Prometheus endpoint, if any
}

// daemon is one running mount and what it owns, in the order it is built
// and the reverse order it is torn down.
type daemon struct {
	cfg  *config.Config
	pool *bufferpool.Pool
	fsys *files.FS
	ctl  *control.Server
	srv  *fusefs.Server
	ipc  *ipcDaemon   // runtime and client ipc (ipcserve.go)
	fmts *helper.Pool // format helpers of the /.omni views
	mem  *host.PressureWatcher
	prom *metrics.Server        // the Prometheus endpoint (nil: metrics_listen "")
	reqs *fusefs.RequestMetrics // FUSE request latencies, for prom
	clu  *cluster.Node          // the cluster block (cluster.go); nil: none
	// stopAt is when the stop began (a signal or an external umount): the
	// drain's duration is reported from there.
	stopAt time.Time
	drain  *drainStatus // systemd's view of the drain (notify.go)
	// endDrain stops the drain's progress (nil: none shown).
	endDrain func()

	// search indexes the datasets of the views and the registry (nil
	// without a mount); the control socket's "search" answers from it.
	search atomic.Pointer[search.Service]
}

// serve checks, mounts, reports readiness on ready (if not nil), serves
// until a signal or an external umount, drains and returns.
func serve(cfg *config.Config, ready *os.File) error {
	d := &daemon{cfg: cfg}
	sigs := watchSignals(d.stillDraining)
	if err := preflight(cfg); err != nil {
		return err
	}
	if err := d.open(); err != nil {
		d.close()
		return err
	}
	logrus.Infof("mounted %s (%s, backing %s, %s in %d tiers, pid %d)", cfg.Mount, cfg.Mode,
		backingName(cfg), units.FormatSize(cfg.Capacity()), len(cfg.Tiers), os.Getpid())
	notifyReady(fmt.Sprintf("serving %s (%s, backing %s)", cfg.Mount, cfg.Mode, backingName(cfg)))
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
		os.Chdir("/") // do not keep the caller's directory busy
	}
	d.wait(sigs)
	return d.close()
}

// omniDeadline bounds one format-helper request of the /.omni views
// unless the config's format_helper_deadline says otherwise: a file that
// makes the reader loop costs this, then EIO.
const omniDeadline = 20 * time.Second

func backingName(cfg *config.Config) string {
	if cfg.Mode == files.Scratch {
		return "none"
	}
	return cfg.Backing
}

// preflight checks what the user can fix before anything is mounted:
// one error each, naming the path.
func preflight(cfg *config.Config) error {
	mnt, err := mountinfo.CheckMountPoint(cfg.Mount)
	if err != nil {
		return err
	}
	cfg.Mount = mnt
	if err := checkUserMount(cfg); err != nil {
		return err
	}
	if cfg.Mode != files.Scratch {
		if cfg.Backing == config.Default().Backing {
			// The built-in default is created on first use; a backing
			// directory the user named must exist (a typo must not
			// silently start an empty file system).
			if err := os.MkdirAll(cfg.Backing, 0o755); err != nil {
				return fmt.Errorf("create backing directory: %w", err)
			}
		}
		if cfg.Backing, err = mountinfo.CheckWritable("backing directory", cfg.Backing); err != nil {
			return err
		}
	}
	raiseLimits(cfg)
	return nil
}

// raiseLimits raises the open-file limit and lowers the daemon's
// oom_score_adj (it holds dirty data that exists nowhere else); failures
// are warnings.
func raiseLimits(cfg *config.Config) {
	if n, err := sys.RaiseNofile(); err != nil {
		logrus.Warnf("cannot raise the open-file limit: %v", err)
	} else {
		logrus.Debugf("open-file limit %d", n)
	}
	if err := host.SetOOMScoreAdj(cfg.OOMScoreAdj); err != nil && os.Geteuid() != 0 {
		logrus.Infof("%v (a user daemon cannot lower it)", err)
	} else if err != nil {
		logrus.Warnf("%v: the OOM killer may take the daemon before other processes", err)
	} else {
		logrus.Debugf("oom_score_adj %d", cfg.OOMScoreAdj)
	}
}

func (d *daemon) open() error {
	cfg := d.cfg
	var err error
	if d.pool, err = bufferpool.New(cfg.PoolConfig()); err != nil {
		return fmt.Errorf("buffer pool: %w", err)
	}
	d.mem = watchPressure(d.pool)
	if d.fsys, err = files.New(d.pool, cfg.FilesOptions()); err != nil {
		return fmt.Errorf("file system over %s: %w", backingName(cfg), err)
	}
	if d.clu, err = startCluster(cfg, d.pool, d.fsys); err != nil {
		return err
	}
	info := Info{Pid: os.Getpid(), Version: version, Mount: cfg.Mount, Backing: backingName(cfg),
		Mode: cfg.Mode, Config: cfg.File, Started: time.Now()}
	if d.prom, err = bindMetrics(cfg, &info); err != nil {
		return err
	}
	if d.prom != nil {
		d.reqs = &fusefs.RequestMetrics{}
	}
	d.ctl, err = listenControl(cfg, cfg.Mount, map[string]control.Handler{
		"stats": func() (any, error) { return d.fsys.Stats(), nil },
		"info":  func() (any, error) { return info, nil },
		"top":   func() (any, error) { return d.fsys.TopDirty(topFiles), nil },
		// What the pool did per file (iowarp trace joins it).
		"fileio": func() (any, error) { return d.fsys.FileIO(), nil },
	}, withSearch(mergeStreams(stageStreams(d.fsys), snapshotStreams(d.fsys, cfg.Mount)), &d.search))
	if err != nil {
		return err
	}
	if d.ipc, err = startIPC(cfg, d.pool, d.fsys); err != nil {
		return err
	}
	// The views log helper failures themselves, one line each.
	deadline := omniDeadline
	if cfg.FormatHelperDeadline > 0 {
		deadline = cfg.FormatHelperDeadline
	}
	d.fmts = helper.New(helper.Options{Size: 2, Deadline: deadline, MemoryLimit: uint64(cfg.FormatHelperMemory)})
	uring, err := fuseuring.ParseMode(cfg.FuseIoUring)
	if err != nil {
		return err
	}
	d.srv, err = fusefs.Mount(cfg.Mount, d.fsys, fusefs.Options{
		IoUring:        uring,
		AllowOther:     cfg.AllowOther,
		Debug:          logrus.IsLevelEnabled(logrus.TraceLevel),
		Passthrough:    cfg.Passthrough,
		WritebackCache: cfg.WritebackCache,
		IPCSocket:      d.ipc.srv.Path(),
		OMNI:           d.omniOptions(),
		Metrics:        d.reqs,
	})
	if errors.Is(err, syscall.EPERM) && os.Geteuid() != 0 {
		return fmt.Errorf("%w (iowarp mount needs root)", err)
	}
	if s := d.search.Load(); err == nil && s != nil {
		s.SetEngine(d.srv.OMNIEngine())
	}
	if err == nil && d.prom != nil {
		d.prom.Serve(metrics.Sources{Files: d.fsys.Stats, Latencies: d.fsys.Latencies, FUSE: d.reqs.Each,
			IPC: d.ipc.srv.Stats, Helpers: d.fmts.Stats})
		logrus.Infof("metrics on http://%s/metrics", d.prom.Addr())
	}
	return err
}

// bindMetrics binds the Prometheus endpoint of metrics_listen (nil if
// none) and records its address in info.
func bindMetrics(cfg *config.Config, info *Info) (*metrics.Server, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	s, err := metrics.Bind(cfg.MetricsListen)
	if err != nil {
		return nil, err
	}
	info.Metrics = s.Addr()
	return s, nil
}

// topFiles is how many files the control socket's "top" operation lists.
const topFiles = 20

// listenControl listens on the control socket of mount after checking its
// directory: a loose one is set to 0700 with a warning, another user's is
// refused.
func listenControl(cfg *config.Config, mount string, h map[string]control.Handler,
	streams map[string]control.StreamHandler) (*control.Server, error) {
	sock := control.SocketPath(cfg.ControlDir, mount)
	msg, err := control.SecureDir(filepath.Dir(sock))
	if msg != "" {
		logrus.Warn(msg)
	}
	if err != nil {
		return nil, err
	}
	return control.ListenStreams(sock, h, streams)
}

// wait returns after a SIGTERM/SIGINT has been handled (drained and
// unmounted) or the mount went away from outside.
func (d *daemon) wait(sigs *signals) {
	gone := make(chan struct{})
	go func() { d.srv.Wait(); close(gone) }()
	select {
	case <-gone:
		d.beginStop()
		logrus.Infof("%s was unmounted; draining to %s", d.cfg.Mount, backingName(d.cfg))
		d.showDrain()
		d.srv = nil
		return
	case s := <-sigs.stop:
		d.beginStop()
		if st := d.fsys.Stats(); st.Mode == files.Scratch {
			logrus.Infof("%v: unmounting %s; scratch mode: its %s of data are dropped", s,
				d.cfg.Mount, units.FormatSize(st.DirtyBytes))
		} else {
			logrus.Infof("%v: draining %s of dirty data to %s, then unmounting %s", s,
				units.FormatSize(st.DirtyBytes), backingName(d.cfg), d.cfg.Mount)
		}
	}
	d.showDrain()
	// Drain while still mounted so that the unmount itself is quick; what
	// is written in between is drained by Close.
	if err := d.fsys.Sync(); err != nil {
		logrus.Warnf("drain to %s: %v; retried after the unmount", backingName(d.cfg), err)
	}
	// Format helpers may hold files open through the mount (scratch
	// mode): stop them first, or the unmount finds the mount busy.
	d.closeSearch()
	if d.fmts != nil {
		d.fmts.Close()
	}
	d.unmount(gone)
}

// beginStop records when the stop began and tells systemd (STOPPING=1).
func (d *daemon) beginStop() {
	d.stopAt = time.Now()
	d.drain = startDrainStatus(d.fsys.Stats, backingName(d.cfg))
}

// drainEvery is how often the drain's progress looks at the dirty bytes.
const drainEvery = 250 * time.Millisecond

// showDrain shows the drain's progress from d.stopAt until endDrain: a
// bar on the daemon's terminal (a foreground `iowarp mount` logging to
// stderr), else a log line every progressInterval (bytes left, rate, ETA).
func (d *daemon) showDrain() {
	if d.fsys == nil || d.fsys.Mode() == files.Scratch {
		return
	}
	var tty io.Writer = io.Discard
	if sink != nil && sink.Path() == "" && !isDaemonChild() {
		tty = os.Stderr
	}
	st := d.fsys.Stats()
	p := newLogProgress(tty, "drain", st.DirtyBytes, func(s string) { logrus.Info(s) })
	p.start, p.last = d.stopAt, d.stopAt
	w := newDrainWatch(st)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(drainEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			p.Update(w.next(d.fsys.Stats()))
		}
	}()
	d.endDrain = func() {
		close(stop)
		<-done
		p.Update(w.total, w.total)
		p.Finish()
	}
}

// stillDraining answers a SIGTERM or SIGINT after the first.
func (d *daemon) stillDraining(s os.Signal) {
	var dirty int64
	if d.fsys != nil {
		dirty = d.fsys.Stats().DirtyBytes
	}
	logrus.Warnf("%v: still draining (%s dirty); kill -9 to abort, losing what is not fsynced", s,
		units.FormatSize(dirty))
}

// signals is a daemon's signal handling from start to exit: SIGHUP
// reopens the log file and does nothing else (logrotate's postrotate
// `kill -HUP` must not unmount anything, nor a closed terminal); the
// first SIGTERM or SIGINT is sent on stop; later ones are passed to
// again (a warning: the drain goes on). The handlers stay installed until
// the process exits, so that no signal kills it in the middle of the
// final drain.
type signals struct {
	stop chan os.Signal
}

func watchSignals(again func(os.Signal)) *signals {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	sg := &signals{stop: make(chan os.Signal, 1)}
	go func() {
		stopping := false
		for s := range ch {
			switch {
			case s == syscall.SIGHUP:
				reopenLog(s)
			case !stopping:
				stopping = true
				sg.stop <- s
			default:
				again(s)
			}
		}
	}()
	return sg
}

// unmount detaches the mount. A busy mount (open files, a shell inside)
// is detached lazily, as umount -l would; its open files then fail.
func (d *daemon) unmount(gone chan struct{}) {
	err := d.srv.Unmount()
	if err != nil {
		logrus.Warnf("unmount %s: %v; detaching it lazily", d.cfg.Mount, err)
		if err := lazyUnmount(d.cfg.Mount); err != nil {
			logrus.Error(err)
		}
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		logrus.Warnf("%s: FUSE server still running 10s after unmount; exiting anyway", d.cfg.Mount)
	}
	d.srv = nil
}

// close drains and releases everything open. The first error is returned;
// the others are logged.
func (d *daemon) close() error {
	var first error
	note := func(what string, err error) {
		if err == nil {
			return
		}
		if first == nil {
			first = fmt.Errorf("%s: %w", what, err)
		} else {
			logrus.Errorf("%s: %v", what, err)
		}
	}
	if d.srv != nil {
		note("unmount "+d.cfg.Mount, d.srv.Unmount())
	}
	note("stop ipc", d.ipc.Close())
	d.closeSearch()
	if d.fmts != nil {
		note("stop format helpers", d.fmts.Close())
	}
	if d.clu != nil {
		d.clu.CloseFiles() // its handles on owned files; it serves on during the drain
	}
	if d.fsys != nil {
		start := d.stopAt
		if start.IsZero() {
			start = time.Now()
		}
		err := d.fsys.Close()
		if d.endDrain != nil {
			d.endDrain()
		}
		note("drain to "+backingName(d.cfg), err)
		st := d.fsys.Stats()
		took := time.Since(start).Round(time.Millisecond)
		if err != nil {
			logrus.Errorf("drain INCOMPLETE after %v: %s left dirty (%s written back in total, %d flush errors)",
				took, units.FormatSize(st.DirtyBytes), units.FormatSize(int64(st.FlushedBytes)), st.FlushErrors)
			d.drain.Close(fmt.Sprintf("drain INCOMPLETE: %s (%d bytes) left dirty", units.FormatSize(st.DirtyBytes), st.DirtyBytes))
		} else {
			logrus.Infof("drained in %v (%s written back in total, %d flush errors)",
				took, units.FormatSize(int64(st.FlushedBytes)), st.FlushErrors)
			d.drain.Close(fmt.Sprintf("drained in %v: 0 bytes dirty", took))
		}
	}
	if d.clu != nil {
		note("leave cluster", d.clu.Close()) // after the drain: others read what it wrote from the backing store
	}
	if d.mem != nil {
		d.mem.Close() // after the drain: pressure during it still moves pages down
	}
	if d.pool != nil {
		note("close buffer pool", d.pool.Close())
	}
	if d.ctl != nil {
		note("close control socket", d.ctl.Close())
	}
	if d.prom != nil {
		note("close metrics endpoint", d.prom.Close())
	}
	return first
}
