// Package metrics is the daemon's Prometheus endpoint (config
// metrics_listen): GET /metrics in the text exposition format.
//
// Nothing here sits on an I/O path. Every value is read at scrape time
// from counters the layers keep anyway (files.Stats, ipc.Stats,
// helper.Stats) and from the lock-free histograms of internal/hist that
// the file layer and the FUSE door fill (files.FS.Latencies,
// fusefs.RequestMetrics); a scrape costs what `iowarp stat` costs, plus
// one pass over the opcodes. A Source that is nil is left out (a daemon
// without a mount has no file layer and no FUSE).
package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iowarp/iowarp/bufferpool"
	"github.com/iowarp/iowarp/bufferpool/files"
	"github.com/iowarp/iowarp/formats/helper"
	"github.com/iowarp/iowarp/internal/hist"
	"github.com/iowarp/iowarp/runtime/ipc"
)

// Sources are what a scrape reads; each is called once per scrape.
type Sources struct {
	Files     func() files.Stats                        // the file layer (its Pool too)
	Pool      func() bufferpool.Stats                   // the pool alone, when there is no file layer
	Latencies func() (writeBack, stageIn hist.Snapshot) // files.FS.Latencies
	FUSE      func(func(string, hist.Snapshot, uint64)) // fusefs.RequestMetrics.Each
	IPC       func() ipc.Stats                          // ipc.Server.Stats
	Helpers   func() helper.Stats                       // helper.Pool.Stats
}

// Server serves the endpoint. Close stops it.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Bind binds addr (HOST:PORT; port 0 picks one, see Addr) without serving
// yet: a daemon binds before it mounts (a port in use fails the start
// before anything is mounted) and serves once its Sources exist.
func Bind(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_listen %s: %w", addr, err)
	}
	return &Server{ln: ln}, nil
}

// Serve serves /metrics over src in the background; once only.
func (s *Server) Serve(src Sources) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(src))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(s.ln)
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server (or the bound listener, if Serve was never
// called); scrapes in progress are cut.
func (s *Server) Close() error {
	if s.srv == nil {
		return s.ln.Close()
	}
	if err := s.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is the /metrics handler over src, with the Go runtime's and
// the process's own collectors.
func Handler(src Sources) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{src: src}, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
