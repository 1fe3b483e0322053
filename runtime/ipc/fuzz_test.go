package ipc

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/iowarp/iowarp/runtime"
)

// fuzzSrv is one server shared by all fuzz inputs of a process: the point
// is that nothing a client does hurts it.
var (
	fuzzOnce sync.Once
	fuzzSrv  *Server
)

func fuzzServer(t testing.TB) *Server {
	fuzzOnce.Do(func() {
		rt := runtime.New(runtime.Options{Log: quietLog()})
		rt.Initialize(nil)
		dir, err := os.MkdirTemp("", "iowarp-fuzz-") // outlives the first input's t.TempDir
		if err != nil {
			t.Fatal(err)
		}
		srv, err := Listen(dir+"/f.ipc", rt, Options{Log: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		fuzzSrv = srv
	})
	return fuzzSrv
}

// FuzzRings writes descriptors built from the input into a client's
// request ring and the input's tail bytes over its ring memory, then
// checks that the daemon either answered every request with an error or
// disconnected the client, and that a second client is still served.
func FuzzRings(f *testing.F) {
	seed := make([]byte, 64)
	f.Add(seed, []byte{}, uint16(0))
	binary.LittleEndian.PutUint32(seed[8:], 0)
	binary.LittleEndian.PutUint32(seed[12:], 1)
	binary.LittleEndian.PutUint64(seed[24:], 1<<40) // InOff far outside
	binary.LittleEndian.PutUint64(seed[48:], 100)
	f.Add(seed, []byte{0xff, 0xff, 0xff, 0xff}, uint16(64))
	f.Add(append(seed, seed...), []byte("garbage over the ring header"), uint16(1))
	f.Add([]byte{1, 2, 3}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, uint16(300))
	f.Fuzz(func(t *testing.T, descs, scribble []byte, where uint16) {
		srv := fuzzServer(t)
		c, err := Dial(srv.Path(), DialOptions{SegmentSize: MinSegmentSize})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var calls []*Call
		for len(descs) > 0 && len(calls) < 32 {
			var raw [64]byte
			n := copy(raw[:], descs)
			descs = descs[n:]
			req := Request{Module: binary.LittleEndian.Uint32(raw[8:]) % 4, Method: binary.LittleEndian.Uint32(raw[12:]) % 8,
				ArgOff: binary.LittleEndian.Uint64(raw[16:]), InOff: binary.LittleEndian.Uint64(raw[24:]),
				OutOff: binary.LittleEndian.Uint64(raw[32:]), ArgLen: binary.LittleEndian.Uint32(raw[40:]),
				Flags: binary.LittleEndian.Uint32(raw[44:]) & 1, InLen: binary.LittleEndian.Uint64(raw[48:]),
				OutLen: binary.LittleEndian.Uint64(raw[56:])}
			if raw[0]&1 == 0 { // half the time, offsets inside the segment
				size := uint64(len(c.mem.Bytes()))
				req.ArgOff, req.InOff, req.OutOff = req.ArgOff%size, req.InOff%size, req.OutOff%size
				req.ArgLen, req.InLen, req.OutLen = req.ArgLen%70000, req.InLen%size, req.OutLen%size
			}
			call, err := c.StartRaw(req)
			if err != nil {
				break
			}
			calls = append(calls, call)
		}
		// Scribble over the ring memory (headers and slots) of this client.
		ring := c.rq.Pointer().Offset
		mem := c.mem.Bytes()
		for i, b := range scribble {
			if off := ring + uint64(where) + uint64(i); off < uint64(len(mem)) {
				mem[off] = b
			}
		}
		// A scribbled ring may lose completions: after a deadline, hanging
		// up must still release every waiter.
		deadline := time.AfterFunc(200*time.Millisecond, func() { c.Close() })
		for _, call := range calls {
			call.Wait()
		}
		deadline.Stop()
		good, err := Dial(srv.Path(), DialOptions{SegmentSize: MinSegmentSize})
		if err != nil {
			t.Fatalf("daemon refuses a new client after fuzzing: %v", err)
		}
		defer good.Close()
		if _, err := good.Do(mNoop, Span{}, Span{}, Span{}); err != nil {
			t.Fatalf("daemon does not serve a good client after fuzzing: %v", err)
		}
	})
}

// TestHostileRequests checks answers to specific bad descriptors.
func TestHostileRequests(t *testing.T) {
	srv, _ := newServer(t)
	c := dial(t, srv)
	size := uint64(len(c.mem.Bytes()))
	out, _ := c.Alloc(256)
	outOff := out.p.Offset
	cases := []struct {
		name string
		req  Request
		want error
	}{
		{"module", Request{Module: 7, OutOff: outOff, OutLen: 256}, runtime.ErrNoModule},
		{"method", Request{Method: 1 << 31, OutOff: outOff, OutLen: 256}, runtime.ErrNoMethod},
		{"input past end", Request{Method: 1, InOff: size - 10, InLen: 11, OutOff: outOff, OutLen: 256}, runtime.ErrInvalid},
		{"input wraps", Request{Method: 1, InOff: 1 << 63, InLen: 1 << 63, OutOff: outOff, OutLen: 256}, runtime.ErrInvalid},
		{"output in header", Request{OutOff: 8, OutLen: 8}, runtime.ErrInvalid},
		{"args too long", Request{ArgOff: 4096, ArgLen: MaxArgs + 1, OutOff: outOff, OutLen: 256}, runtime.ErrInvalid},
		{"flags", Request{Flags: 2, OutOff: outOff, OutLen: 256}, runtime.ErrInvalid},
		{"echo over own ring", Request{Method: 1, InOff: outOff, InLen: 256, OutOff: c.cq.Pointer().Offset, OutLen: 8}, runtime.ErrShortBuffer},
	}
	for _, tc := range cases {
		call, err := c.StartRaw(tc.req)
		if err != nil {
			t.Fatal(err)
		}
		call.out = out.All()
		if _, err := call.Wait(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if srv.Stats().Killed != 0 {
		t.Fatalf("a client was killed: %+v", srv.Stats())
	}
}
