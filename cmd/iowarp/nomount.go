package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/internal/metrics"
	"github.com/iowarp/iowarp/internal/units"
	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/control"
)

// serveNoMount runs a daemon without a mount (config mount: ""): the
// buffer pool, the task runtime and the ipc server (admin and cte modules,
// the config's plugins), and the control socket (info, stats) that
// `iowarp runtime status|stop` use. Both sockets are named as for mount
// "/". It reports readiness on ready (if not nil) and serves until
// SIGTERM/SIGINT (`iowarp runtime stop`, admin.stop); SIGHUP reopens the
// log file. Blobs live in the pool only: they are gone when the daemon
// stops.
func serveNoMount(cfg *config.Config, ready *os.File) error {
	sigs := watchSignals(func(s os.Signal) { logrus.Warnf("%v: still stopping", s) })
	raiseLimits(cfg)
	pool, err := bufferpool.New(cfg.PoolConfig())
	if err != nil {
		return fmt.Errorf("buffer pool: %w", err)
	}
	mem := watchPressure(pool)
	defer mem.Close()
	info := Info{Pid: os.Getpid(), Version: version, Config: cfg.File, Started: time.Now()}
	prom, err := bindMetrics(cfg, &info)
	if err != nil {
		return errors.Join(err, pool.Close())
	}
	if prom != nil {
		defer prom.Close()
	}
	ctl, err := listenControl(cfg, "", map[string]control.Handler{
		"stats": func() (any, error) { return files.Stats{Pool: pool.Stats()}, nil },
		"info":  func() (any, error) { return info, nil },
	}, nil)
	if err != nil {
		return errors.Join(err, pool.Close())
	}
	ipcd, err := startIPC(cfg, pool, nil)
	if err != nil {
		return errors.Join(err, ctl.Close(), pool.Close())
	}
	if prom != nil {
		prom.Serve(metrics.Sources{Pool: pool.Stats, IPC: ipcd.srv.Stats})
		logrus.Infof("metrics on http://%s/metrics", prom.Addr())
	}
	logrus.Infof("runtime without a mount: ipc %s, %s in %d tiers, pid %d", ipcd.srv.Path(),
		units.FormatSize(cfg.Capacity()), len(cfg.Tiers), os.Getpid())
	notifyReady("serving the runtime without a mount, ipc " + ipcd.srv.Path())
	if ready != nil {
		fmt.Fprintln(ready, "ready")
		ready.Close()
		os.Chdir("/")
	}
	logrus.Infof("%v: stopping", <-sigs.stop)
	notify("STOPPING=1")
	mem.Close()
	return errors.Join(ipcd.Close(), pool.Close(), ctl.Close())
}
