//go:build linux

package fuseuring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Server is a go-fuse file system mounted with mount(2), its requests
// answered over per-CPU io_uring queues (or over /dev/fuse reads when the
// transport is off). go-fuse's fuse.Server still reads /dev/fuse: INIT,
// FORGET, INTERRUPT and notifications never travel on the rings. Safe for
// concurrent use.
type Server struct {
	dir string
	fd  int
	srv *fuse.Server
	tr  *Transport // nil: /dev/fuse only

	closeOnce sync.Once
	trErr     error // the transport's first error, set by closeOnce
}

// Mode says whether a mount's requests travel over io_uring.
type Mode int

const (
	// Off serves every request over /dev/fuse reads.
	Off Mode = iota
	// Auto uses io_uring when the kernel offers it (the fuse module's
	// enable_uring is Y) and falls back to /dev/fuse otherwise, or when
	// the queues cannot be registered (the mount is then made again).
	Auto
	// On requires io_uring: it sets enable_uring (root) and fails the
	// mount when the kernel refuses.
	On
)

// ParseMode parses "auto", "on" or "off".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "auto":
		return Auto, nil
	case "on":
		return On, nil
	}
	return Off, fmt.Errorf("fuse io_uring mode %q is not one of auto, on, off", s)
}

func (m Mode) String() string { return [...]string{"off", "auto", "on"}[m] }

// Mount mounts fsys on dir (root only: mount(2) directly) and serves it.
// With io_uring, INIT asks for FUSE_OVER_IO_URING and the queues are
// registered before Mount returns. opts.MaxWrite sizes the payload buffers
// (0 = 128 KiB). Fallback, when Auto could not use io_uring, says why
// (nil otherwise); the mount then serves over /dev/fuse.
func Mount(dir string, fsys fuse.RawFileSystem, opts fuse.MountOptions, mode Mode, cfg Config) (s *Server, fallback error, err error) {
	if mode == On {
		if err := Enable(); err != nil {
			return nil, nil, fmt.Errorf("mount %s: %w", dir, err)
		}
	}
	uring := mode != Off && Enabled()
	if mode == Auto && !uring {
		fallback = fmt.Errorf("%w: %s is not Y", ErrUnsupported, enableParam)
	}
	s, err = mount(dir, fsys, opts, uring, cfg)
	if mode == Auto && errors.Is(err, ErrUnsupported) {
		fallback = err
		s, err = mount(dir, fsys, opts, false, cfg)
	}
	return s, fallback, err
}

// mount makes one mount; with uring, a failure to use io_uring unmounts
// again (a connection that negotiated it cannot go back to /dev/fuse) and
// is an ErrUnsupported.
func mount(dir string, fsys fuse.RawFileSystem, opts fuse.MountOptions, uring bool, cfg Config) (*Server, error) {
	if uring {
		opts.ExtraCapabilities |= CapOverIoUring
	}
	fd, err := mountFd(dir, &opts)
	if err != nil {
		return nil, err
	}
	// go-fuse tries a direct mount before it looks for /dev/fd/N: on
	// "/dev/fd/N" it would follow the link and mount over /dev/fuse.
	opts.DirectMount, opts.DirectMountStrict = false, false
	s := &Server{dir: dir, fd: fd}
	s.srv, err = fuse.NewServer(fsys, fmt.Sprintf("/dev/fd/%d", fd), &opts)
	if err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		unix.Close(fd)
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if uring {
		if err := s.startUring(fsys, opts, cfg); err != nil {
			go s.srv.Serve()
			s.Unmount()
			return nil, fmt.Errorf("mount %s: %w", dir, err)
		}
	}
	go s.srv.Serve()
	err = s.srv.WaitMount()
	if err == nil {
		err = pollHack(dir)
	}
	if err != nil {
		s.Unmount()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	return s, nil
}

// startUring checks that INIT negotiated io_uring and registers the queues,
// answering through a go-fuse ProtocolServer for the same file system.
func (s *Server) startUring(fsys fuse.RawFileSystem, opts fuse.MountOptions, cfg Config) error {
	ks := s.srv.KernelSettings()
	if ks.Flags64()&CapOverIoUring == 0 {
		return fmt.Errorf("%w: the kernel did not offer it in INIT", ErrUnsupported)
	}
	ps := fuse.NewProtocolServer(fsys, &opts)
	if err := replayInit(ps, ks); err != nil {
		return err
	}
	if cfg.Payload == 0 {
		// The kernel wants max(8 KiB, max_write, max_pages pages), and
		// go-fuse rounds max_pages up from MaxWrite.
		cfg.Payload = (max(opts.MaxWrite, 128<<10) + pageSize - 1) &^ (pageSize - 1)
	}
	h := func(in, out [][]byte) int {
		n, _ := ps.HandleRequest(in, out)
		return n
	}
	tr, err := Start(s.fd, h, cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	s.tr = tr
	return nil
}

// replayInit hands the ProtocolServer the INIT the kernel sent to the
// fuse.Server, so that both parse requests with the same negotiated
// settings.
func replayInit(ps *fuse.ProtocolServer, ks *fuse.InitIn) error {
	in := *ks
	in.InHeader = fuse.InHeader{Length: uint32(unsafe.Sizeof(in)), Opcode: opInit, Unique: 1}
	req := unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	out := make([]byte, 4096)
	n, st := ps.HandleRequest([][]byte{req}, [][]byte{out})
	if !st.Ok() || n < outHeaderSize {
		return fmt.Errorf("replay INIT: %v", st)
	}
	if errno := int32(uint32(out[4]) | uint32(out[5])<<8 | uint32(out[6])<<16 | uint32(out[7])<<24); errno != 0 {
		return fmt.Errorf("replay INIT: %w", unix.Errno(-errno))
	}
	return nil
}

const opInit = 26 // FUSE_INIT

var pageSize = os.Getpagesize()

// mountFd opens /dev/fuse and mounts it on dir like go-fuse's direct mount.
func mountFd(dir string, opts *fuse.MountOptions) (int, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return -1, fmt.Errorf("mount %s: %w", dir, err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("mount %s: open /dev/fuse: %w", dir, err)
	}
	mode := uint32(unix.S_IFDIR)
	if !st.IsDir() {
		mode = unix.S_IFREG
	}
	data := []string{fmt.Sprintf("fd=%d", fd), fmt.Sprintf("rootmode=%o", mode),
		fmt.Sprintf("user_id=%d", os.Geteuid()), fmt.Sprintf("group_id=%d", os.Getegid())}
	if opts.MaxWrite > 0 {
		data = append(data, fmt.Sprintf("max_read=%d", opts.MaxWrite))
	}
	if opts.AllowOther {
		data = append(data, "allow_other")
	}
	data = append(data, opts.Options...)
	name := opts.Name
	if name == "" {
		name = "gofuse"
	}
	source := opts.FsName
	if source == "" {
		source = name
	}
	err = unix.Mount(source, dir, "fuse."+name, unix.MS_NOSUID|unix.MS_NODEV, strings.Join(data, ","))
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount %s: %w", dir, err)
	}
	return fd, nil
}

// Uring reports whether requests are answered over io_uring.
func (s *Server) Uring() bool { return s.tr != nil }

// Served is the number of requests answered over the rings (0 without).
func (s *Server) Served() uint64 {
	if s.tr == nil {
		return 0
	}
	return s.tr.Served()
}

// Fuse is the go-fuse server that reads /dev/fuse (notifications, passthrough
// backing files).
func (s *Server) Fuse() *fuse.Server { return s.srv }

// KernelSettings is the kernel's INIT request (what it offers), as
// fuse.Server.KernelSettings.
func (s *Server) KernelSettings() *fuse.InitIn { return s.srv.KernelSettings() }

// Unmount detaches the mount (EBUSY while files are open, like umount(8)),
// then waits for both transports to stop and frees the rings.
func (s *Server) Unmount() error {
	if err := unix.Unmount(s.dir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", s.dir, err)
	}
	s.Wait()
	return s.trErr
}

// Wait returns when the mount is gone (Unmount, or umount from outside)
// and the rings are freed.
func (s *Server) Wait() {
	s.srv.Wait()
	s.closeOnce.Do(func() {
		if s.tr != nil {
			s.trErr = s.tr.Close()
		}
	})
}

// pollHack makes the kernel learn that POLL is not implemented (go-fuse
// answers ENOSYS for its hidden hack file), as go-fuse's own mount does but
// not for a /dev/fd/N mount point. Without it, a Go program that opens a
// file of its own mount registers it with epoll from inside the runtime,
// holding its P, and the POLL request this sends can wait for a server
// goroutine that has no P left to run on: a deadlock, seen with
// GOMAXPROCS=2.
func pollHack(dir string) error {
	fd, err := unix.Open(dir+"/.go-fuse-epoll-hack", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("poll hack: %w", err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}
	unix.Poll(fds, 0)
	return nil
}
