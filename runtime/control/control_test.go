package control

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSocketPath(t *testing.T) {
	a := SocketPath("/run/iowarp", "/iowarp")
	b := SocketPath("/run/iowarp", "/iowarp/")
	c := SocketPath("/run/iowarp", "/scratch/iowarp")
	if a != b {
		t.Errorf("same mount, different sockets: %s %s", a, b)
	}
	if a == c {
		t.Errorf("different mounts, same socket %s", a)
	}
	if !strings.HasPrefix(a, "/run/iowarp/iowarp-") || !strings.HasSuffix(a, ".sock") {
		t.Errorf("unexpected name %s", a)
	}
	long := SocketPath("/run/user/1000/iowarp", "/"+strings.Repeat("very-long-directory-name/", 20))
	if len(long) >= 108 {
		t.Errorf("socket path of %d bytes exceeds sun_path: %s", len(long), long)
	}
	// A deep control directory (a test's temporary directory, a site's
	// long scratch path) leaves the name less room, down to the hash.
	for _, n := range []int{40, 70, 85, 89} {
		dir := "/" + strings.Repeat("d", n-1)
		p, q := SocketPath(dir, "/tmp/a/mnt"), SocketPath(dir, "/tmp/b/mnt")
		if len(p) > 107 || p == q || !strings.HasPrefix(p, dir+"/") {
			t.Errorf("dir of %d bytes: %s (%d bytes), %s", n, p, len(p), q)
		}
	}
	// And binds there.
	dir := t.TempDir()
	for len(dir) < 85 {
		dir = filepath.Join(dir, "deeper")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(SocketPath(dir, "/"+strings.Repeat("m", 60)), nil)
	if err != nil {
		t.Fatalf("listen in a %d-byte directory: %v", len(dir), err)
	}
	l.Close()
	if SocketPath("/d", "/") != SocketPath("/d", "/") || !strings.Contains(SocketPath("/d", "/"), "root-") {
		t.Errorf("root mount: %s", SocketPath("/d", "/"))
	}
}

type stats struct {
	Used  int64  `json:"used"`
	Label string `json:"label"`
}

func TestCall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ctl")
	path := SocketPath(dir, "/mnt/x")
	s, err := Listen(path, map[string]Handler{
		"stats": func() (any, error) { return stats{Used: 42, Label: "ram"}, nil },
		"fail":  func() (any, error) { return nil, errors.New("pool closed") },
		"panic": func() (any, error) { panic("boom") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", st.Mode().Perm())
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got stats
			if err := Call(path, "stats", &got); err != nil || got != (stats{42, "ram"}) {
				t.Errorf("stats = %+v, %v", got, err)
			}
		}()
	}
	wg.Wait()
	var raw json.RawMessage
	if err := Call(path, "stats", &raw); err != nil || string(raw) != `{"used":42,"label":"ram"}` {
		t.Errorf("raw stats = %s, %v", raw, err)
	}
	for op, want := range map[string]string{
		"fail":  "daemon: pool closed",
		"panic": "daemon: internal error: boom",
		"nope":  `daemon: unknown operation "nope"`,
	} {
		if err := Call(path, op, nil); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", op, err, want)
		}
	}

	// A second daemon on the same mount is refused.
	if _, err := Listen(path, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Listen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	if err := Call(path, "stats", nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("after Close: %v", err)
	}
}

// TestStaleSocket: a socket file left by a killed daemon is replaced.
func TestStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := Call(path, "x", nil); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("stale socket: %v", err)
	}
	s, err := Listen(path, map[string]Handler{"ping": func() (any, error) { return "pong", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got string
	if err := Call(path, "ping", &got); err != nil || got != "pong" {
		t.Errorf("ping = %q, %v", got, err)
	}
}

func TestBadRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	s, err := Listen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, req := range []string{"not json\n", strings.Repeat("x", maxRequest+1000), "\n"} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(req))
		var resp response
		if err := json.NewDecoder(c).Decode(&resp); err != nil || resp.Error == "" {
			t.Errorf("request %.20q: %+v, %v", req, resp, err)
		}
		c.Close()
	}
}

// TestCallNoAnswer: a daemon that accepts but never answers makes Call
// fail with ErrBusy at its bound instead of blocking.
func TestCallNoAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mute.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never read, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	err = CallWithin(path, "stats", nil, 200*time.Millisecond)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("call to a mute daemon: %v, want ErrBusy", err)
	}
}

// TestStuckHandler: a handler that never returns is answered with an
// error after handlerTimeout, and the server keeps answering other
// operations, also once more calls are stuck than it has slots.
func TestStuckHandler(t *testing.T) {
	old := handlerTimeout
	handlerTimeout = 100 * time.Millisecond
	defer func() { handlerTimeout = old }()
	release := make(chan struct{})
	srv, err := Listen(filepath.Join(t.TempDir(), "c.sock"), map[string]Handler{
		"stuck": func() (any, error) { <-release; return nil, nil },
		"ok":    func() (any, error) { return "fine", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer close(release)
	for i := range maxConns + 2 {
		if err := Call(srv.Path(), "stuck", nil); err == nil || !strings.Contains(err.Error(), ErrBusy.Error()) {
			t.Fatalf("stuck call %d: %v", i, err)
		}
	}
	var got string
	if err := Call(srv.Path(), "ok", &got); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("with %d stuck handlers: %v %q", maxConns, err, got)
	}
}
