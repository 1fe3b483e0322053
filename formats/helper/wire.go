package helper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"syscall"

	"github.com/iowarp/iowarp/formats/omni"
)

const (
	envHelper = "IOWARP_FORMAT_HELPER"
	envMemory = "IOWARP_FORMAT_HELPER_MEMORY"
	// envRoot confines a helper to reading below it; envLandlock says
	// the kernel has Landlock for that.
	envRoot     = "IOWARP_FORMAT_HELPER_ROOT"
	envLandlock = "IOWARP_FORMAT_HELPER_LANDLOCK"
	maxMsg      = 64 << 10
)

// request is one datagram from the caller; a read carries the memfd.
type request struct {
	Op   string          `json:"op"` // open, read, ping
	Path string          `json:"path,omitempty"`
	Var  string          `json:"var,omitempty"`
	Slab *omni.Hyperslab `json:"slab,omitempty"`
	Off  int64           `json:"off,omitempty"` // where in the passed fd the data goes
	// Uid is the user the request is made for (the FUSE caller); a
	// helper running as another refuses it.
	Uid *uint32 `json:"uid,omitempty"`
}

// response answers a request; open and string reads carry a memfd.
type response struct {
	Err  string `json:"err,omitempty"`
	Kind string `json:"kind,omitempty"` // the omni sentinel of Err
	Size int64  `json:"size,omitempty"` // bytes of data written or in the fd
	// Retire: the helper failed inside a format library and serves no
	// other request (the pool stops it).
	Retire bool `json:"retire,omitempty"`
}

var kinds = []struct {
	name string
	err  error
}{
	{"notfound", omni.ErrNotFound}, {"invalid", omni.ErrInvalid},
	{"unsupported", omni.ErrNotSupported}, {"corrupt", omni.ErrCorrupt},
	{"notexist", os.ErrNotExist}, {"permission", os.ErrPermission},
}

func kindOf(err error) string {
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return ""
}

// remoteError is an error reported by a helper; errors.Is matches the
// omni sentinel it was wrapping there.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

func (r *response) err() error {
	if r.Err == "" {
		return nil
	}
	e := &remoteError{msg: r.Err}
	for _, k := range kinds {
		if k.name == r.Kind {
			e.kind = k.err
		}
	}
	return e
}

func send(c *net.UnixConn, v any, f *os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var oob []byte
	if f != nil {
		oob = syscall.UnixRights(int(f.Fd()))
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// recv reads one datagram into v (a pointer) and returns the fd it
// carried, if any. On error v is left zero: json.Unmarshal fills the
// fields it decoded before a type error.
func recv(c *net.UnixConn, v any) (*os.File, error) {
	buf := make([]byte, maxMsg)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		// A zero-length datagram: the peer closed its end.
		return nil, io.EOF
	}
	f, ferr := takeFD(oob[:oobn])
	if err := json.Unmarshal(buf[:n], v); err != nil {
		if f != nil {
			f.Close()
		}
		reflect.ValueOf(v).Elem().SetZero()
		return nil, fmt.Errorf("bad message: %w", err)
	}
	if ferr != nil {
		reflect.ValueOf(v).Elem().SetZero()
		return nil, ferr
	}
	return f, nil
}

func takeFD(oob []byte) (*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var out *os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if out == nil {
				out = os.NewFile(uintptr(fd), "passed-fd")
			} else {
				syscall.Close(fd)
			}
		}
	}
	return out, nil
}
