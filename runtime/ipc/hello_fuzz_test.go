package ipc

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// FuzzDecodeHello: no panic; an error returns the zero hello; a decoded
// hello is exactly the bytes it came from.
func FuzzDecodeHello(f *testing.F) {
	f.Add(hello{magic: helloMagic, version: helloVersion}.encode())
	f.Add(hello{magic: helloMagic, version: helloVersion, size: 1 << 20, flags: helloNoSpin}.encode())
	f.Add(hello{magic: helloMagic, version: helloVersion, size: ^uint64(0), flags: 2}.encode())
	f.Add([]byte("IWIP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			if h != (hello{}) {
				t.Fatalf("error %v with a partial hello %+v", err, h)
			}
			return
		}
		if !bytes.Equal(h.encode(), b) {
			t.Fatalf("hello %+v does not encode back to %x", h, b)
		}
	})
}

// FuzzDecodeWelcome: the same for the daemon's answer, which a client
// must not trust either.
func FuzzDecodeWelcome(f *testing.F) {
	f.Add(welcome{magic: helloMagic, status: statusOK, id: 1, size: MinSegmentSize, pid: 99}.encode())
	f.Add(welcome{magic: helloMagic, status: statusBusy}.encode())
	f.Add(make([]byte, welcomeLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWelcome(b)
		if err != nil {
			if w != (welcome{}) {
				t.Fatalf("error %v with a partial welcome %+v", err, w)
			}
			return
		}
		if !bytes.Equal(w.encode(), b) {
			t.Fatalf("welcome %+v does not encode back to %x", w, b)
		}
	})
}

// FuzzHello sends the input as a hello to a live server: it answers with
// a welcome whose status is OK exactly when the hello decodes (and then
// with a segment).
func FuzzHello(f *testing.F) {
	f.Add(hello{magic: helloMagic, version: helloVersion, size: MinSegmentSize}.encode())
	f.Add(hello{magic: helloMagic, version: helloVersion, size: 1 << 40, flags: helloNoSpin}.encode())
	f.Add(hello{magic: helloMagic, version: 1}.encode())
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 256 {
			return // nothing sent: the server waits for its deadline
		}
		srv := fuzzServer(t)
		nc, err := net.Dial("unix", srv.Path())
		if err != nil {
			t.Fatal(err)
		}
		sock := nc.(*net.UnixConn)
		defer sock.Close()
		sock.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := sock.Write(b); err != nil {
			t.Fatal(err)
		}
		wb, fd, err := recvFd(sock, welcomeLen)
		if err != nil {
			t.Fatalf("no welcome: %v", err)
		}
		if fd != nil {
			defer fd.Close()
		}
		w, err := decodeWelcome(wb)
		if err != nil {
			t.Fatal(err)
		}
		_, herr := decodeHello(b[:min(len(b), helloLen)])
		switch {
		case herr == nil && (w.status != statusOK || fd == nil):
			t.Fatalf("valid hello %x: status %d, segment %v", b, w.status, fd != nil)
		case herr != nil && (w.status != statusBadHello || fd != nil):
			t.Fatalf("bad hello %x (%v): status %d, segment %v", b, herr, w.status, fd != nil)
		}
	})
}
