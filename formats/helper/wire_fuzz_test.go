package helper

import (
	"net"
	"syscall"
	"testing"
)

// FuzzRecv: a helper runs libhdf5 over crafted files, so the daemon
// trusts none of its replies. The input goes as one datagram (with a
// memfd attached if attach) through the helper's socket type; recv of a
// response either fails with no fd and the zero response, or returns
// what the datagram decodes to.
func FuzzRecv(f *testing.F) {
	f.Add([]byte(`{"size":12}`), true)
	f.Add([]byte(`{"err":"open x: not found","kind":"notfound"}`), false)
	f.Add([]byte(`{"err":"x","kind":"nonsense","size":-1}`), false)
	f.Add([]byte(`{"err":"x","size":"12"}`), true)
	f.Add([]byte(`[]`), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, b []byte, attach bool) {
		if len(b) > maxMsg {
			return
		}
		parent, child, err := socketpair()
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.FileConn(parent)
		parent.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		defer child.Close()
		var oob []byte
		if attach {
			mf, err := newMemfd("fuzz", 16)
			if err != nil {
				t.Fatal(err)
			}
			defer mf.Close()
			oob = syscall.UnixRights(int(mf.Fd()))
		}
		if err := syscall.Sendmsg(int(child.Fd()), b, oob, nil, 0); err != nil {
			t.Fatal(err)
		}
		var resp response
		fd, err := recv(pc.(*net.UnixConn), &resp)
		if fd != nil {
			defer fd.Close()
		}
		if err != nil {
			if fd != nil || resp != (response{}) {
				t.Fatalf("error %v with fd %v, response %+v", err, fd != nil, resp)
			}
			return
		}
		if attach != (fd != nil) {
			t.Fatalf("memfd attached %v, received %v", attach, fd != nil)
		}
		if e := resp.err(); (e == nil) != (resp.Err == "") {
			t.Fatalf("response %+v: error %v", resp, e)
		}
		if e := resp.err(); e != nil && resp.Kind != "" && kindOf(e) != resp.Kind && kindOf(e) != "" {
			t.Fatalf("kind %q came back as %q", resp.Kind, kindOf(e))
		}
	})
}
