package ipc

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/iowarp/iowarp/internal/unixsock"
	"github.com/iowarp/iowarp/runtime"
	"github.com/iowarp/iowarp/runtime/shm"
)

// Options tune a Server. Zero values pick defaults.
type Options struct {
	MaxClients     int           // default 1024
	MaxSegmentSize int64         // default DefaultMaxSegmentSize
	Spin           time.Duration // pollers' spin before sleeping; default shm.DefaultRingSpin; <0: none
	Log            logrus.FieldLogger
	// ForUser makes this a per-user socket of a daemon that serves
	// several users (a root daemon): it serves UID (and root) instead of
	// the daemon's own user, and Listen gives the socket and its
	// directory, which must be that user's alone (UserSocketPath), to
	// UID:GID. The modules keep users apart by the uid each connection
	// has (SO_PEERCRED), whichever socket it came through.
	ForUser  bool
	UID, GID uint32
}

// UserSocketPath is where a root daemon listening with ForUser puts the
// socket of uid: DIR-users/UID/NAME.ipc for the socket DIR/NAME.ipc of
// SocketPath(dir, mount) (/run/iowarp-users/1000/... for root's
// /run/iowarp): outside the control directory, which stays 0700 and
// root's. Listen makes DIR-users searchable by all (0711, not listable)
// and DIR-users/UID the user's (0700).
func UserSocketPath(dir, mount string, uid uint32) string {
	p := SocketPath(dir, mount)
	cd := filepath.Dir(p)
	return filepath.Join(filepath.Dir(cd), filepath.Base(cd)+userDirSuffix, strconv.FormatUint(uint64(uid), 10),
		filepath.Base(p))
}

const userDirSuffix = "-users"

// Server accepts clients on a Unix socket and serves their rings with the
// modules of a runtime. Safe for concurrent use.
type Server struct {
	rt   *runtime.Runtime
	ln   *net.UnixListener
	path string
	opts Options
	log  logrus.FieldLogger
	uid  int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop and every client's goroutines

	nextID atomic.Uint64
	// mu guards conns and last.
	mu    sync.Mutex
	conns map[uint64]*conn
	last  Reclaim

	accepted, reclaimed, killed, refused atomic.Uint64
	requests, badRequests                atomic.Uint64
	segBytes                             atomic.Int64
}

// Stats describe a Server at one instant.
type Stats struct {
	Clients      int     `json:"clients"`
	SegmentBytes int64   `json:"segment_bytes"` // bytes of client segments mapped now
	Accepted     uint64  `json:"accepted"`
	Refused      uint64  `json:"refused"`
	Reclaimed    uint64  `json:"reclaimed"` // segments of gone clients unmapped
	Killed       uint64  `json:"killed"`    // clients disconnected for breaking the protocol
	Requests     uint64  `json:"requests"`
	BadRequests  uint64  `json:"bad_requests"` // answered with an error before reaching a module
	LastReclaim  Reclaim `json:"last_reclaim"`
}

// Reclaim describes the segment of the last client that went away, as its
// allocator stood when the daemon unmapped it.
type Reclaim struct {
	Client       uint64    `json:"client"`
	PID          int32     `json:"pid"`
	Reason       string    `json:"reason"`
	SegmentBytes int64     `json:"segment_bytes"`
	Allocations  uint64    `json:"allocations"`     // live blocks left (rings included)
	Allocated    uint64    `json:"allocated_bytes"` // bytes in them
	Handles      int       `json:"handles"`         // session handles closed
	At           time.Time `json:"at"`
}

// Listen serves rt's modules on a socket at path (its directory is made
// with mode 0700; the socket is 0600). A stale socket is replaced; one a
// live daemon answers on is an error.
func Listen(path string, rt *runtime.Runtime, opts Options) (*Server, error) {
	if opts.MaxClients <= 0 {
		opts.MaxClients = 1024
	}
	if opts.MaxSegmentSize <= 0 {
		opts.MaxSegmentSize = DefaultMaxSegmentSize
	}
	if opts.Spin == 0 {
		opts.Spin = shm.DefaultRingSpin
	}
	if opts.Log == nil {
		opts.Log = logrus.StandardLogger()
	}
	ln, err := unixsock.Listen(path, "ipc socket")
	if err != nil {
		return nil, err
	}
	uid := os.Geteuid()
	if opts.ForUser {
		if err := giveToUser(path, opts.UID, opts.GID); err != nil {
			ln.Close()
			return nil, err
		}
		uid = int(opts.UID)
	}
	s := &Server{rt: rt, ln: ln, path: path, opts: opts, log: opts.Log.WithField("ipc", path),
		uid: uid, conns: map[uint64]*conn{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	rt.AddStatus("ipc", func() any { return s.Stats() })
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Path is the socket path.
func (s *Server) Path() string { return s.path }

// Stats returns a snapshot.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n, last := len(s.conns), s.last
	s.mu.Unlock()
	return Stats{Clients: n, SegmentBytes: s.segBytes.Load(), Accepted: s.accepted.Load(),
		Refused: s.refused.Load(), Reclaimed: s.reclaimed.Load(), Killed: s.killed.Load(),
		Requests: s.requests.Load(), BadRequests: s.badRequests.Load(), LastReclaim: last}
}

// Close stops accepting, disconnects every client (their waiting calls fail
// with ErrDaemonGone), waits for their tasks and unmaps their segments.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.cancel()
	s.mu.Lock()
	for _, c := range s.conns {
		c.hangUp("server closing")
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
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

// serveConn runs the handshake and then the client until it goes away.
func (s *Server) serveConn(sock *net.UnixConn) {
	c, status, err := s.handshake(sock)
	if err != nil {
		s.refused.Add(1)
		s.log.Debugf("refused client: %v", err)
		sock.SetWriteDeadline(time.Now().Add(time.Second))
		sendFd(sock, welcome{magic: helloMagic, status: status}.encode(), nil)
		sock.Close()
		return
	}
	s.accepted.Add(1)
	go c.watch()
	c.poll()
	c.teardown()
}

func (s *Server) handshake(sock *net.UnixConn) (*conn, uint32, error) {
	cred, err := peerCred(sock)
	if err != nil {
		return nil, statusError, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	if int(cred.Uid) != s.uid && cred.Uid != 0 {
		return nil, statusDenied, fmt.Errorf("uid %d (pid %d) is not the daemon's user %d", cred.Uid, cred.Pid, s.uid)
	}
	sock.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, f, err := recvFd(sock, helloLen)
	if f != nil {
		f.Close()
	}
	if err != nil {
		return nil, statusBadHello, fmt.Errorf("read hello: %w", err)
	}
	h, err := decodeHello(b)
	if err != nil {
		return nil, statusBadHello, err
	}
	sock.SetReadDeadline(time.Time{})
	size := int64(h.size)
	if h.size == 0 {
		size = DefaultSegmentSize
	}
	size = min(max(size, MinSegmentSize), s.opts.MaxSegmentSize)
	id := s.nextID.Add(1)
	c, err := s.newConn(id, sock, cred, size)
	if err != nil {
		return nil, statusError, err
	}
	if h.flags&helloNoSpin != 0 {
		c.rq.Spin = 0
	}
	if !s.add(c) {
		c.unmap()
		return nil, statusBusy, fmt.Errorf("%d clients already", s.opts.MaxClients)
	}
	w := welcome{magic: helloMagic, status: statusOK, id: id, size: uint64(size), pid: uint64(os.Getpid())}
	if err := sendFd(sock, w.encode(), c.mem.File()); err != nil {
		s.remove(c)
		c.unmap()
		return nil, statusError, fmt.Errorf("send segment: %w", err)
	}
	return c, statusOK, nil
}

func (s *Server) add(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) >= s.opts.MaxClients || s.ctx.Err() != nil {
		return false
	}
	s.conns[c.id] = c
	s.segBytes.Add(c.size)
	return true
}

func (s *Server) remove(c *conn) {
	s.mu.Lock()
	if s.conns[c.id] == c {
		delete(s.conns, c.id)
		s.segBytes.Add(-c.size)
	}
	s.mu.Unlock()
}

var _ io.Closer = (*Server)(nil)

// giveToUser chowns a per-user socket and its directory to uid:gid (the
// directory stays 0700, now the user's). For a UserSocketPath it also
// makes DIR-users searchable (0711, not listable) so that the user can
// reach it.
func giveToUser(path string, uid, gid uint32) error {
	dir := filepath.Dir(path)
	for _, p := range []string{path, dir} {
		if err := os.Chown(p, int(uid), int(gid)); err != nil {
			return fmt.Errorf("per-user ipc socket for uid %d: %w", uid, err)
		}
	}
	users := filepath.Dir(dir)
	if !strings.HasSuffix(filepath.Base(users), userDirSuffix) {
		return nil
	}
	if err := os.Chmod(users, 0o711); err != nil {
		return fmt.Errorf("per-user ipc socket for uid %d: %w", uid, err)
	}
	return nil
}
