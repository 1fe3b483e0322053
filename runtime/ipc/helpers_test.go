package ipc

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/runtime"
)

// quietLog discards log output of servers under test.
func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// newServer starts a runtime (admin module only, plus extra) and an ipc
// server on a socket in a temporary directory; both stop at cleanup.
func newServer(tb testing.TB, extra ...runtime.Module) (*Server, *runtime.Runtime) {
	tb.Helper()
	rt := runtime.New(runtime.Options{Log: quietLog()})
	if err := rt.Initialize(nil); err != nil {
		tb.Fatal(err)
	}
	for _, m := range extra {
		if err := rt.Register(m); err != nil {
			tb.Fatal(err)
		}
	}
	dir := tb.TempDir()
	srv, err := Listen(filepath.Join(dir, "d.ipc"), rt, Options{Log: quietLog()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		srv.Close()
		rt.Shutdown()
	})
	return srv, rt
}

func dial(tb testing.TB, srv *Server) *Client {
	tb.Helper()
	c, err := Dial(srv.Path(), DialOptions{SegmentSize: 4 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

var (
	mNoop = Method{runtime.AdminID, 0}
	mEcho = Method{runtime.AdminID, 1}
)
