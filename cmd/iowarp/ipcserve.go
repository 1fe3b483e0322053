package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/fusefs"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/config"
	"github.com/iowarp/iowarp/runtime/ipc"
	"github.com/iowarp/iowarp/runtime/modules/cte"
	"github.com/iowarp/iowarp/runtime/modules/fs"
)

// ipcDaemon is the daemon's task runtime (admin, cte, fs and the plugins
// of the config) and the ipc server through which clients (the Go client,
// `iowarp put/get/ls/rm`, the shim) reach it.
type ipcDaemon struct {
	rt  *runtime.Runtime
	srv *ipc.Server
}

// startIPC starts the runtime over pool (and fsys, nil for a daemon
// without a file layer) and listens next to the control socket. admin.stop
// sends the daemon SIGTERM: the same orderly drain as `runtime stop`.
func startIPC(cfg *config.Config, pool *bufferpool.Pool, fsys *files.FS) (*ipcDaemon, error) {
	if r := pool.StoreReport(); r.Buckets > 0 || r.Skipped > 0 || len(r.Errors) > 0 {
		logrus.Infof("blob store %s: recovered %d durable blobs (%d bytes) in %d buckets, %d skipped", r.Path, r.Blobs,
			r.Bytes, r.Buckets, r.Skipped)
		for _, e := range r.Errors {
			logrus.Warnf("blob store: %s", e)
		}
	}
	d := &ipcDaemon{rt: runtime.New(runtime.Options{})}
	if err := d.rt.Initialize(cfg); err != nil {
		d.rt.Shutdown()
		return nil, fmt.Errorf("runtime: %w", err)
	}
	mods := []runtime.Module{cte.New(pool)}
	if fsys != nil {
		mods = append(mods, fs.New(fsys).WithShim(fusefs.ShimHandle))
	}
	for _, m := range mods {
		if err := d.rt.Register(m); err != nil {
			d.rt.Shutdown()
			return nil, fmt.Errorf("runtime: %w", err)
		}
	}
	d.rt.SetStopHook(func() { syscall.Kill(os.Getpid(), syscall.SIGTERM) })
	sock := ipc.SocketPath(cfg.ControlDir, cfg.Mount)
	srv, err := ipc.Listen(sock, d.rt, ipc.Options{})
	if err != nil {
		d.rt.Shutdown()
		return nil, err
	}
	d.srv = srv
	logrus.Debugf("ipc socket %s (%d modules)", sock, len(d.rt.Modules()))
	return d, nil
}

// Close disconnects the clients and stops the runtime.
func (d *ipcDaemon) Close() error {
	if d == nil {
		return nil
	}
	return errors.Join(d.srv.Close(), d.rt.Shutdown())
}
