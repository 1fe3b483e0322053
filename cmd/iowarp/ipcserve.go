package main

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
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
	rt    *runtime.Runtime
	srv   *ipc.Server
	users []*ipc.Server // per-user sockets (envIPCUsers)
}

// envIPCUsers lists the uids (comma-separated) a root daemon serves on
// sockets of their own (ipc.UserSocketPath), beside its own socket: the
// cte module keeps their buckets apart by the connection's uid.
const envIPCUsers = "IOWARP_IPC_USERS"

// userSockets listens on a per-user socket for each uid of envIPCUsers.
func (d *ipcDaemon) userSockets(cfg *config.Config) error {
	list := os.Getenv(envIPCUsers)
	if list == "" {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s=%s: only a root daemon serves other users", envIPCUsers, list)
	}
	for _, f := range strings.Split(list, ",") {
		uid, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return fmt.Errorf("%s: %q is not a uid", envIPCUsers, f)
		}
		gid := uid
		if u, err := user.LookupId(strconv.FormatUint(uid, 10)); err == nil {
			if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
				gid = g
			}
		}
		path := ipc.UserSocketPath(cfg.ControlDir, cfg.Mount, uint32(uid))
		srv, err := ipc.Listen(path, d.rt, ipc.Options{ForUser: true, UID: uint32(uid), GID: uint32(gid)})
		if err != nil {
			return err
		}
		d.users = append(d.users, srv)
		logrus.Infof("ipc socket %s for uid %d", path, uid)
	}
	return nil
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
	if err := d.userSockets(cfg); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close disconnects the clients and stops the runtime.
func (d *ipcDaemon) Close() error {
	if d == nil {
		return nil
	}
	var errs []error
	for _, u := range d.users {
		errs = append(errs, u.Close())
	}
	return errors.Join(append(errs, d.srv.Close(), d.rt.Shutdown())...)
}
