package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// maxStreams bounds the long operations running at once: the other
	// connection slots stay free for stat and status.
	maxStreams = 4
	// streamEvery is the most often a stream sends its progress.
	streamEvery = 250 * time.Millisecond
	// streamKeepalive is the longest a stream stays silent: the last
	// progress is sent again.
	streamKeepalive = 2 * time.Second
	// StreamIdle is how long the client waits for the next line of a
	// stream before it gives up (ErrBusy).
	StreamIdle = 30 * time.Second
)

// StreamHandler runs one long operation with its arguments (the request's
// "args", nil if none). It may call progress as often as it likes: the
// latest value is sent, a few times a second. ctx is cancelled when the
// client goes away or the server closes; the handler should then return.
type StreamHandler func(ctx context.Context, args json.RawMessage, progress func(any)) (any, error)

// latest holds the last progress value a handler reported.
type latest struct {
	mu      sync.Mutex
	v       any
	changed bool
}

func (l *latest) set(v any) {
	l.mu.Lock()
	l.v, l.changed = v, true
	l.mu.Unlock()
}

// take returns the value and whether it changed since the last take.
func (l *latest) take() (any, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.changed
	l.changed = false
	return l.v, ch
}

// stream runs h on c: progress lines while it runs, then its answer.
func (s *Server) stream(c *net.UnixConn, h StreamHandler, args json.RawMessage) {
	select {
	case s.running <- struct{}{}:
		defer func() { <-s.running }()
	default:
		send(c, response{Error: fmt.Sprintf("%v: %d long operations running", ErrBusy, maxStreams)})
		return
	}
	ctx, cancel := context.WithCancel(s.quit)
	defer cancel()
	go watchClient(c, cancel)
	var prog latest
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("internal error: %v", r)}
			}
		}()
		v, err := h(ctx, args, prog.set)
		done <- result{v, err}
	}()
	tick := time.NewTicker(streamEvery)
	defer tick.Stop()
	quiet := time.Now()
	for {
		select {
		case r := <-done:
			if v, ch := prog.take(); ch {
				sendProgress(c, v)
			}
			send(c, answerOf(r.v, r.err))
			return
		case <-tick.C:
			v, ch := prog.take()
			if !ch && time.Since(quiet) < streamKeepalive {
				continue
			}
			quiet = time.Now()
			if sendProgress(c, v) != nil {
				cancel() // the client is gone: the handler stops, its answer is dropped
			}
		}
	}
}

// watchClient cancels when the client closes its end (it sends nothing
// after the request, so any read return means it went away or c closed).
func watchClient(c *net.UnixConn, cancel context.CancelFunc) {
	c.SetReadDeadline(time.Time{})
	var b [1]byte
	c.Read(b[:])
	cancel()
}

func answerOf(v any, err error) response {
	if err != nil {
		return response{Error: err.Error()}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return response{Error: "encode result: " + err.Error()}
	}
	return response{Result: b}
}

func sendProgress(c *net.UnixConn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return send(c, response{Progress: b})
}

// send writes one line, bounded by CallTimeout.
func send(c *net.UnixConn, r response) error {
	b, _ := json.Marshal(r)
	c.SetWriteDeadline(time.Now().Add(CallTimeout))
	_, err := c.Write(append(b, '\n'))
	return err
}

// Stream runs the long operation op with args (marshalled to JSON; nil =
// none) on the daemon at path, passing each progress line to progress
// (may be nil) and decoding the answer into result (may be nil). It gives
// up (ErrBusy) when the daemon stays silent for StreamIdle. Closing the
// connection (returning early, the process exiting) cancels the
// operation on the daemon.
func Stream(path, op string, args any, progress func(json.RawMessage), result any) error {
	c, err := net.DialTimeout("unix", path, CallTimeout)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			return fmt.Errorf("%w (no socket at %s)", ErrNoDaemon, path)
		}
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	defer c.Close()
	req := request{Op: op}
	if args != nil {
		if req.Args, err = json.Marshal(args); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(req)
	c.SetDeadline(time.Now().Add(CallTimeout))
	if _, err := c.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("control socket %s: %w", path, timedOut(err))
	}
	dec := json.NewDecoder(c)
	for {
		c.SetReadDeadline(time.Now().Add(StreamIdle))
		var resp response
		if err := dec.Decode(&resp); err != nil {
			return fmt.Errorf("control socket %s: bad answer: %w", path, timedOut(err))
		}
		switch {
		case resp.Error != "":
			return fmt.Errorf("daemon: %s", resp.Error)
		case resp.Result != nil:
			if result == nil {
				return nil
			}
			return json.Unmarshal(resp.Result, result)
		case resp.Progress != nil && progress != nil:
			progress(resp.Progress)
		}
	}
}
