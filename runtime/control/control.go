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
// The protocol is one JSON request line, {"op":"stats"}, answered by one
// JSON line, {"result":...} or {"error":"..."}; then the server closes the
// connection. A Server is safe for concurrent use; it handles at most
// maxConns connections at a time.
package control

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iowarp/iowarp/internal/unixsock"
)

const (
	maxConns   = 8
	ioTimeout  = 5 * time.Second
	maxRequest = 4096
)

// ErrNoDaemon: nothing listens on the socket of a mount point.
var ErrNoDaemon = errors.New("no iowarp daemon serves this mount")

// DefaultDir is the directory of control sockets for this user.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/run/iowarp"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "iowarp")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("iowarp-%d", os.Geteuid()))
}

// SocketPath is the socket of the mount at mount (an absolute path; "" for
// a daemon without a mount, named as "/" is) in dir ("" = DefaultDir()). The name keeps a readable tail of the path and
// a hash of all of it, so it stays unique and under the 108-byte limit of
// a socket address.
func SocketPath(dir, mount string) string {
	if dir == "" {
		dir = DefaultDir()
	}
	if mount == "" {
		mount = "/"
	}
	clean := filepath.Clean(mount)
	sum := sha256.Sum256([]byte(clean))
	tail := strings.Trim(strings.ReplaceAll(clean, "/", "-"), "-")
	if tail == "" {
		tail = "root"
	}
	if len(tail) > 32 {
		tail = tail[len(tail)-32:]
	}
	return filepath.Join(dir, tail+"-"+hex.EncodeToString(sum[:6])+".sock")
}

// Handler answers one operation.
type Handler func() (any, error)

// Server serves a control socket.
type Server struct {
	path     string
	ln       *net.UnixListener
	handlers map[string]Handler
	sem      chan struct{}
	wg       sync.WaitGroup
}

type request struct {
	Op string `json:"op"`
}

type response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Listen creates the socket at path (and its directory, mode 0700) and
// serves handlers on it. A socket left behind by a dead daemon is
// replaced; one that a live daemon answers on is an error.
func Listen(path string, handlers map[string]Handler) (*Server, error) {
	ln, err := unixsock.Listen(path, "control socket")
	if err != nil {
		return nil, err
	}
	s := &Server{path: path, ln: ln, handlers: handlers, sem: make(chan struct{}, maxConns)}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Path returns the socket path.
func (s *Server) Path() string { return s.path }

// Close stops accepting, waits for connections in progress and removes
// the socket.
func (s *Server) Close() error {
	err := s.ln.Close()
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
		s.sem <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			s.handle(c)
		}()
	}
}

func (s *Server) handle(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	var resp response
	if err := checkPeer(c); err != nil {
		resp.Error = err.Error()
	} else {
		resp = s.answer(c)
	}
	b, _ := json.Marshal(resp)
	c.Write(append(b, '\n'))
}

func (s *Server) answer(c *net.UnixConn) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			resp = response{Error: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	line, err := bufio.NewReader(&limitedReader{c, maxRequest}).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return response{Error: "no request"}
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{Error: "bad request: " + err.Error()}
	}
	h, ok := s.handlers[req.Op]
	if !ok {
		return response{Error: fmt.Sprintf("unknown operation %q", req.Op)}
	}
	v, err := h()
	if err != nil {
		return response{Error: err.Error()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return response{Error: "encode result: " + err.Error()}
	}
	return response{Result: b}
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
// (may be nil). A missing socket or a refused connection is ErrNoDaemon.
func Call(path, op string, result any) error {
	c, err := net.DialTimeout("unix", path, ioTimeout)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("%w (no socket at %s)", ErrNoDaemon, path)
		}
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	b, _ := json.Marshal(request{Op: op})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return fmt.Errorf("control socket %s: bad answer: %w", path, err)
	}
	if resp.Error != "" {
		return fmt.Errorf("daemon: %s", resp.Error)
	}
	if result == nil {
		return nil
	}
	return json.Unmarshal(resp.Result, result)
}
