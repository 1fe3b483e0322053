// Package control is the daemon's control socket: a Unix stream socket,
// one per mount, through which `iowarp stat` and `iowarp runtime status`
// ask a running daemon questions.
//
// The socket lives in a per-user directory (mode 0700; the socket itself
// 0600): /run/iowarp for root, $XDG_RUNTIME_DIR/iowarp otherwise, and
// its name is derived from the absolute mount point, so a client that
// knows the mount point finds the daemon. The daemon also checks the
// peer's credentials (SO_PEERCRED): only its own user and root are
// answered.
//
// The protocol is one JSON request line, {"op":"stats"} (with its
// arguments in "args" when the operation takes some), answered by one
// JSON line, {"result":...} or {"error":"..."}; then the server closes the
// connection. A long operation (a stream: stage-in, stage-out) answers
// {"progress":...} lines first, at most a few a second and at least one
// every streamKeepalive, and is cancelled when its client goes away
// (stream.go). A Server is safe for concurrent use; it handles at most
// maxConns connections at a time, of which at most maxStreams streams.
//
// Every wait is bounded. The client gives up after CallTimeout (ErrBusy)
// for the whole exchange. The server answers an error when a handler
// runs past handlerTimeout (the handler goes on in the background; with
// maxConns of them still running, no new one starts) and when a
// connection finds no free slot within handlerTimeout, so one stuck
// handler never silences `iowarp stat` or `runtime status`.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/unixsock"
)

const (
	maxConns = 8
	// maxRequest bounds a request line: a stage-in of a job's input
	// list carries its paths.
	maxRequest = 1 << 20
	// CallTimeout bounds a whole exchange on the client side (connect,
	// request, answer).
	CallTimeout = 5 * time.Second
)

// handlerTimeout bounds a handler: past it the server answers ErrBusy,
// well inside the client's bound, and the connection slot is free again.
var handlerTimeout = 3 * time.Second

var (
	// ErrNoDaemon: nothing listens on the socket of a mount point.
	ErrNoDaemon = errors.New("no iowarp daemon serves this mount")
	// ErrBusy: the daemon is there but did not answer in time (its
	// handler is stuck, or every connection slot is taken).
	ErrBusy = errors.New("the iowarp daemon is not answering")
)

// DefaultDir is the directory of control sockets for this user
// (unixsock.DefaultDir).
func DefaultDir() string { return unixsock.DefaultDir() }

// SocketPath is the control socket of the mount at mount (an absolute
// path; "" for a daemon without a mount) in dir ("" = DefaultDir()); see
// unixsock.Path.
func SocketPath(dir, mount string) string { return unixsock.Path(dir, mount, ".sock") }

// Handler answers one operation.
type Handler func() (any, error)

// Server serves a control socket.
type Server struct {
	path     string
	ln       *net.UnixListener
	handlers map[string]Handler
	streams  map[string]StreamHandler
	sem      chan struct{} // connections being served
	stuck    chan struct{} // handlers still running past handlerTimeout
	running  chan struct{} // streams running
	quit     context.Context
	stop     context.CancelFunc // cancels the streams at Close
	wg       sync.WaitGroup
}

type request struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

type response struct {
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Listen creates the socket at path (and its directory, mode 0700) and
// serves handlers on it. A socket left behind by a dead daemon is
// replaced; one that a live daemon answers on is an error.
func Listen(path string, handlers map[string]Handler) (*Server, error) {
	return ListenStreams(path, handlers, nil)
}

// ListenStreams is Listen with long operations (streams) besides the
// handlers.
func ListenStreams(path string, handlers map[string]Handler, streams map[string]StreamHandler) (*Server, error) {
	ln, err := unixsock.Listen(path, "control socket")
	if err != nil {
		return nil, err
	}
	s := &Server{path: path, ln: ln, handlers: handlers, streams: streams, sem: make(chan struct{}, maxConns),
		stuck: make(chan struct{}, maxConns), running: make(chan struct{}, maxStreams)}
	s.quit, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Path returns the socket path.
func (s *Server) Path() string { return s.path }

// Close stops accepting, cancels the streams, waits for connections in
// progress and removes the socket.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.stop()
	s.wg.Wait()
	return err
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c := unixsock.Accept(s.ln)
		if c == nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
		}()
	}
}

// serveConn waits (bounded) for one of the maxConns slots and handles c;
// a connection that gets none is told the daemon is busy.
func (s *Server) serveConn(c *net.UnixConn) {
	t := time.NewTimer(handlerTimeout)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
		s.handle(c)
	case <-t.C:
		s.refuse(c)
	}
}

// refuse answers ErrBusy without reading the request.
func (s *Server) refuse(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	b, _ := json.Marshal(response{Error: ErrBusy.Error() + ": all connections busy"})
	c.Write(append(b, '\n'))
}

func (s *Server) handle(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(CallTimeout))
	var resp response
	if err := checkPeer(c); err != nil {
		resp.Error = err.Error()
	} else if req, err := readRequest(c); err != nil {
		resp.Error = err.Error()
	} else if h, ok := s.streams[req.Op]; ok {
		s.stream(c, h, req.Args)
		return
	} else {
		resp = s.answer(req)
	}
	b, _ := json.Marshal(resp)
	c.Write(append(b, '\n'))
}

func readRequest(c *net.UnixConn) (request, error) {
	var req request
	line, err := bufio.NewReader(&limitedReader{c, maxRequest}).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return req, errors.New("no request")
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("bad request: %w", err)
	}
	return req, nil
}

func (s *Server) answer(req request) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			resp = response{Error: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	h, ok := s.handlers[req.Op]
	if !ok {
		return response{Error: fmt.Sprintf("unknown operation %q", req.Op)}
	}
	v, err := s.run(h)
	if err != nil {
		return response{Error: err.Error()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return response{Error: "encode result: " + err.Error()}
	}
	return response{Result: b}
}

// run calls h, giving up after handlerTimeout (the handler goes on, and
// counts as stuck until it returns; with maxConns stuck ones, no new
// handler is started).
func (s *Server) run(h Handler) (any, error) {
	select {
	case s.stuck <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w: %d requests still running", ErrBusy, maxConns)
	}
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() { <-s.stuck }()
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("internal error: %v", r)}
			}
		}()
		v, err := h()
		done <- result{v, err}
	}()
	t := time.NewTimer(handlerTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		return nil, fmt.Errorf("%w: no answer in %v", ErrBusy, handlerTimeout)
	}
}

// checkPeer answers only our own user and root.
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("permission denied for uid %d", cred.Uid)
	}
	return nil
}

// timedOut adds ErrBusy to a deadline error.
func timedOut(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

type limitedReader struct {
	c *net.UnixConn
	n int
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("request too long")
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.c.Read(p)
	l.n -= n
	return n, err
}

// Call sends op to the daemon at path and decodes its result into result
// (may be nil). A missing socket or a refused connection is ErrNoDaemon;
// no answer within CallTimeout is ErrBusy.
func Call(path, op string, result any) error {
	return CallWithin(path, op, result, CallTimeout)
}

// CallWithin is Call with its own bound on the whole exchange.
func CallWithin(path, op string, result any, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	c, err := net.DialTimeout("unix", path, limit)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("%w (no socket at %s)", ErrNoDaemon, path)
		}
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	b, _ := json.Marshal(request{Op: op})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("control socket %s: %w", path, timedOut(err))
	}
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return fmt.Errorf("control socket %s: bad answer: %w", path, timedOut(err))
	}
	if resp.Error != "" {
		return fmt.Errorf("daemon: %s", resp.Error)
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(resp.Result, result)
}
