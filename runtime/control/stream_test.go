package control

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type count struct {
	N int `json:"n"`
}

// TestStream: a stream sends progress lines, then its answer; the args
// reach the handler; a client that goes away cancels it; Close cancels
// what still runs.
func TestStream(t *testing.T) {
	cancelled := make(chan struct{})
	srv, err := ListenStreams(filepath.Join(t.TempDir(), "s.sock"), nil, map[string]StreamHandler{
		"count": func(ctx context.Context, args json.RawMessage, progress func(any)) (any, error) {
			var a count
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			for i := 1; i <= a.N; i++ {
				progress(count{i})
				time.Sleep(streamEvery / 2)
			}
			return count{a.N * 10}, nil
		},
		"forever": func(ctx context.Context, _ json.RawMessage, progress func(any)) (any, error) {
			progress(count{1})
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		},
		"fail": func(context.Context, json.RawMessage, func(any)) (any, error) { return nil, errors.New("no backing") },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var seen []int
	var got count
	err = Stream(srv.Path(), "count", count{8}, func(raw json.RawMessage) {
		var c count
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Errorf("progress %s: %v", raw, err)
		}
		seen = append(seen, c.N)
	}, &got)
	if err != nil || got.N != 80 {
		t.Fatalf("count: %+v, %v", got, err)
	}
	if len(seen) < 2 || seen[len(seen)-1] != 8 {
		t.Errorf("progress seen %v: want several, the last one 8", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("progress went back: %v", seen)
		}
	}
	if err := Stream(srv.Path(), "fail", nil, nil, nil); err == nil || err.Error() != "daemon: no backing" {
		t.Errorf("fail: %v", err)
	}
	// Arguments far larger than an ordinary request (a job's input list).
	if err := Stream(srv.Path(), "count", map[string]any{"n": 1, "pad": strings.Repeat("p", 200<<10)}, nil, &got); err != nil || got.N != 10 {
		t.Errorf("count with 200 KiB of arguments: %+v, %v", got, err)
	}
	// The client goes away after the first progress line.
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(`{"op":"forever"}` + "\n"))
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil || string(resp.Progress) != `{"n":1}` {
		t.Fatalf("first line of forever: %+v, %v", resp, err)
	}
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream went on after its client went away")
	}
}
