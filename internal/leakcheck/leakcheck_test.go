package leakcheck

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"
)

func init() { settleTimeout = 200 * time.Millisecond }

// kept holds what a leaking test body opened, so that the garbage
// collector cannot close it.
var kept []any

func TestRunPassesCleanTests(t *testing.T) {
	code := Run(func() int {
		f, err := os.CreateTemp("", "x")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		return 7
	})
	if code != 7 {
		t.Fatalf("code %d, want the tests' 7", code)
	}
}

func TestRunFailsLeaks(t *testing.T) {
	cases := map[string]func() (any, error){
		"file": func() (any, error) { return os.CreateTemp("", "leak") },
		"dir":  func() (any, error) { return os.Open(os.TempDir()) },
		"socket": func() (any, error) {
			return net.Listen("unix", filepath.Join(os.TempDir(), "s"))
		},
		"pipe": func() (any, error) { r, w, err := os.Pipe(); return []*os.File{r, w}, err },
		"memfd": func() (any, error) {
			fd, err := unix.MemfdCreate("leak", 0)
			return os.NewFile(uintptr(fd), "memfd"), err
		},
	}
	for name, open := range cases {
		t.Run(name, func(t *testing.T) {
			var openErr error
			code := Run(func() int {
				v, err := open()
				openErr = err
				kept = append(kept, v)
				return 0
			})
			if openErr != nil {
				t.Fatal(openErr)
			}
			if code != 1 {
				t.Fatalf("a leaked %s passed (code %d)", name, code)
			}
		})
	}
}

// An fd that a goroutine closes shortly after the tests end is no leak.
func TestRunWaitsForAsyncClose(t *testing.T) {
	code := Run(func() int {
		f, err := os.CreateTemp("", "late")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			f.Close()
		}()
		return 0
	})
	if code != 0 {
		t.Fatalf("code %d", code)
	}
}

func TestRunRestoresTMPDIR(t *testing.T) {
	old := os.Getenv("TMPDIR")
	var inside string
	Run(func() int { inside = os.TempDir(); return 0 })
	if os.Getenv("TMPDIR") != old {
		t.Fatalf("TMPDIR %q after Run, was %q", os.Getenv("TMPDIR"), old)
	}
	if !strings.HasPrefix(filepath.Base(inside), "iow") {
		t.Fatalf("tests ran with TMPDIR %q", inside)
	}
	if _, err := os.Stat(inside); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", inside, err)
	}
}

// A FUSE mount left under the temp dir fails the run and is detached.
func TestRunFailsMountLeak(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	var mnt string
	var srv *fuse.Server
	code := Run(func() int {
		mnt = filepath.Join(os.TempDir(), "mnt")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		srv, err = fs.Mount(mnt, &fs.Inode{}, &fs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return 0
	})
	if srv != nil {
		defer srv.Wait()
	}
	if code != 1 {
		t.Fatalf("a leaked mount passed (code %d)", code)
	}
	if ms := fuseMountsUnder(mnt); len(ms) != 0 {
		t.Fatalf("mount not detached: %v", ms)
	}
}

// go-fuse keeps the pipes of its splice replies in a pool: no leak.
func TestRunIgnoresSplicePool(t *testing.T) {
	code := Run(func() int {
		p, err := splice.Get()
		if err != nil {
			t.Fatal(err)
		}
		splice.Done(p)
		return 0
	})
	if code != 0 {
		t.Fatalf("code %d", code)
	}
}
