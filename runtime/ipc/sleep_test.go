package ipc

import (
	"bytes"
	"testing"
)

// A client that asks the daemon not to spin (DaemonSleeps) is served all
// the same: each request wakes the sleeping poller.
func TestDaemonSleeps(t *testing.T) {
	srv, _ := newServer(t)
	c, err := Dial(srv.Path(), DialOptions{SegmentSize: 4 << 20, DaemonSleeps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in, _ := c.AllocUninit(100)
	out, _ := c.Alloc(100)
	for i := 0; i < 200; i++ {
		for j := range in.Bytes() {
			in.Bytes()[j] = byte(i + j)
		}
		res, err := c.Do(mEcho, Span{}, in.All(), out.All())
		if err != nil || res.N != 100 || !bytes.Equal(in.Bytes(), out.Bytes()) {
			t.Fatalf("echo %d: %v %+v", i, err, res)
		}
	}
	if st := srv.Stats(); st.Clients != 1 || st.Requests < 200 || st.Killed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A hello with unknown flags is refused.
func TestHelloUnknownFlags(t *testing.T) {
	b := hello{magic: helloMagic, version: helloVersion, flags: 1 << 5}.encode()
	if _, err := decodeHello(b); err == nil {
		t.Fatal("hello with unknown flags accepted")
	}
	h, err := decodeHello(hello{magic: helloMagic, version: helloVersion, size: 1 << 20, flags: helloNoSpin}.encode())
	if err != nil || h.flags != helloNoSpin || h.size != 1<<20 {
		t.Fatalf("decode = %+v, %v", h, err)
	}
}
