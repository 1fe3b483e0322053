package helper

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/iowarp/iowarp/formats/omni"
	"github.com/iowarp/iowarp/internal/sys"

	// The drivers a helper serves.
	_ "github.com/iowarp/iowarp/formats/fits"
	_ "github.com/iowarp/iowarp/formats/gdal"
	_ "github.com/iowarp/iowarp/formats/grib"
	"github.com/iowarp/iowarp/formats/hdf5"
	"github.com/iowarp/iowarp/formats/netcdf"
	_ "github.com/iowarp/iowarp/formats/numpy"
	_ "github.com/iowarp/iowarp/formats/pdb"
	_ "github.com/iowarp/iowarp/formats/tabular"
	_ "github.com/iowarp/iowarp/formats/zarr"
)

// init turns this process into a helper when the pool started it so.
//
// Stage "1": lower its standing (confine); with a root and Landlock,
// confine itself and exec stage "2"; else serve. Every serving helper
// runs under a seccomp filter (deniedSyscalls).
func init() {
	stage := os.Getenv(envHelper)
	if stage != "1" && stage != "2" {
		return
	}
	root := os.Getenv(envRoot)
	if stage == "1" {
		limit, _ := strconv.ParseUint(os.Getenv(envMemory), 10, 64)
		confine(limit)
		if root != "" && os.Getenv(envLandlock) == "1" {
			err := startConfined(root)
			fmt.Fprintln(os.Stderr, "helper: landlock:", err)
			os.Exit(1)
		}
	}
	for _, k := range []string{envHelper, envMemory, envRoot, envLandlock} {
		os.Unsetenv(k)
	}
	if err := sys.SeccompDeny(deniedSyscalls); err != nil {
		fmt.Fprintln(os.Stderr, "helper: seccomp:", err)
		os.Exit(1)
	}
	hdf5.Root = root
	os.Exit(serve(os.NewFile(3, "helper-socket")))
}

// open is a cached open file, valid while size and mtime stay.
type open struct {
	r     omni.Reader
	size  int64
	mtime time.Time
	used  time.Time
}

const maxOpen = 4

type server struct {
	conn  *net.UnixConn
	files map[string]*open
}

func serve(f *os.File) int {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	s := &server{conn: c.(*net.UnixConn), files: map[string]*open{}}
	for {
		var req request
		fd, err := recv(s.conn, &req)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
		resp, out := s.handle(&req, fd)
		if fd != nil {
			fd.Close()
		}
		err = send(s.conn, resp, out)
		if out != nil {
			out.Close()
		}
		if err != nil {
			return 1
		}
	}
}

// handle answers one request. A request that failed in a format library
// retires the helper: the library may have failed half-way (libhdf5
// keeps free lists, caches and half-closed files across files) and must
// not serve another file. Failures checked before any library call (no
// such variable, a selection out of range, no such file) do not.
func (s *server) handle(req *request, fd *os.File) (*response, *os.File) {
	if req.Uid != nil && uint32(os.Getuid()) != *req.Uid {
		err := fmt.Errorf("request for uid %d in a helper of uid %d: %w", *req.Uid, os.Getuid(), os.ErrPermission)
		return &response{Err: err.Error(), Kind: kindOf(err), Retire: true}, nil
	}
	resp, out, err := s.do(req, fd)
	if err != nil {
		return &response{Err: err.Error(), Kind: kindOf(err), Retire: tainted(err)}, nil
	}
	return resp, out
}

// tainted reports whether err may have left a library in a bad state:
// anything but the checks made before calling one.
func tainted(err error) bool {
	if errors.Is(err, hdf5.ErrLibrary) || errors.Is(err, netcdf.ErrLibrary) {
		return true
	}
	for _, clean := range []error{omni.ErrNotFound, omni.ErrInvalid, os.ErrNotExist, os.ErrPermission} {
		if errors.Is(err, clean) {
			return false
		}
	}
	return true
}

func (s *server) do(req *request, fd *os.File) (*response, *os.File, error) {
	switch req.Op {
	case "ping":
		return &response{}, nil, nil
	case "open":
		return s.open(req)
	case "read":
		return s.read(req, fd)
	}
	return nil, nil, fmt.Errorf("op %q: %w", req.Op, omni.ErrInvalid)
}

func (s *server) reader(path string) (omni.Reader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if o := s.files[path]; o != nil {
		if o.size == st.Size() && o.mtime.Equal(st.ModTime()) {
			o.used = time.Now()
			return o.r, nil
		}
		o.r.Close()
		delete(s.files, path)
	}
	r, err := omni.OpenFile(path)
	if err != nil {
		return nil, err
	}
	if len(s.files) >= maxOpen {
		s.evict()
	}
	s.files[path] = &open{r: r, size: st.Size(), mtime: st.ModTime(), used: time.Now()}
	return r, nil
}

func (s *server) evict() {
	var oldest string
	for p, o := range s.files {
		if oldest == "" || o.used.Before(s.files[oldest].used) {
			oldest = p
		}
	}
	s.files[oldest].r.Close()
	delete(s.files, oldest)
}

func (s *server) open(req *request) (*response, *os.File, error) {
	r, err := s.reader(req.Path)
	if err != nil {
		return nil, nil, err
	}
	omni.CapAttrs(r.Dataset())
	schema, err := r.Dataset().Schema()
	if err != nil {
		return nil, nil, err
	}
	return s.reply(schema)
}

// reply returns b in a fresh memfd.
func (s *server) reply(b []byte) (*response, *os.File, error) {
	mf, err := newMemfd("omni-reply", int64(len(b)))
	if err != nil {
		return nil, nil, err
	}
	if _, err := mf.WriteAt(b, 0); err != nil {
		mf.Close()
		return nil, nil, err
	}
	return &response{Size: int64(len(b))}, mf, nil
}

func (s *server) read(req *request, fd *os.File) (*response, *os.File, error) {
	if req.Slab == nil {
		return nil, nil, fmt.Errorf("read without a hyperslab: %w", omni.ErrInvalid)
	}
	r, err := s.reader(req.Path)
	if err != nil {
		return nil, nil, err
	}
	v, err := r.Dataset().Var(req.Var)
	if err != nil {
		return nil, nil, err
	}
	if err := req.Slab.Check(v.Shape); err != nil {
		return nil, nil, err
	}
	if v.DType == omni.String {
		b, err := omni.ReadSlab(r, v, *req.Slab)
		if err != nil {
			return nil, nil, err
		}
		return s.reply(b)
	}
	if fd == nil {
		return nil, nil, fmt.Errorf("read of %s without a destination fd: %w", v.Path, omni.ErrInvalid)
	}
	n := req.Slab.Bytes(v.DType)
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, err
	}
	if req.Off < 0 || req.Off+n > st.Size() {
		return nil, nil, fmt.Errorf("destination of %d bytes cannot hold %d at %d: %w", st.Size(), n, req.Off, omni.ErrInvalid)
	}
	m, err := mapFile(fd, req.Off, n, true)
	if err != nil {
		return nil, nil, err
	}
	defer m.unmap()
	if err := r.ReadInto(v.Path, *req.Slab, m.b); err != nil {
		return nil, nil, err
	}
	return &response{Size: n}, nil, nil
}
